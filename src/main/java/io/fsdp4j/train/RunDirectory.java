package io.fsdp4j.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A run's output directory ({@code run.dir}): the resolved config as {@code config.yaml} at the start, and at the
 * end the last checkpoint exported as a Hugging Face model ({@code export/}) in the source model's precision, beside
 * the {@code metrics.jsonl}, {@code plots/} and {@code checkpoints/} that their keys put there by default. Only the
 * process that reports for the job writes it.
 */
final class RunDirectory {
    static final String CONFIG = "config.yaml";
    static final String EXPORT = "export";

    private RunDirectory() {}

    /**
     * Creates the run directory and writes the config into it; refuses a directory whose export exists already
     * (a finished run's) unless the run resumes, before any work.
     */
    static void start(TrainConfig config, boolean resuming, PrintStream out) {
        Path dir = config.run().dir();
        if (dir == null) {
            return;
        }
        Path export = dir.resolve(EXPORT);
        if (!resuming && config.data().train() != null && nonEmpty(export)) {
            throw new UserError("run directory " + dir + " holds a finished run's export (" + export + "); give a new"
                    + " run.dir, or remove it");
        }
        try {
            Files.createDirectories(dir);
            Files.writeString(dir.resolve(CONFIG), "# the resolved config of this run: fsdp4j train " + dir.resolve(CONFIG)
                    + " repeats it\n" + config.toYaml());
        } catch (IOException e) {
            throw new UserError("cannot write the run directory " + dir + ": " + e.getMessage());
        }
        out.printf(Locale.ROOT, "fsdp4j: run directory %s (%s)%n", dir, contents(config));
    }

    /**
     * Where the checkpoint of the last step is exported at the end of the run ({@code export/}; a resumed run whose
     * earlier part was exported there already takes {@code export-step-NNNNNNNN}), in the source model's precision;
     * null without a run directory or checkpoints.
     */
    static TrainingJob.Export exportAtEnd(TrainConfig config) {
        Path dir = config.run().dir();
        if (dir == null || config.checkpoint().dir() == null) {
            return null;
        }
        Path to = dir.resolve(EXPORT);
        String last = Checkpoints.stepDir(config.checkpoint().dir(), config.train().steps()).getFileName().toString();
        return new TrainingJob.Export(nonEmpty(to) ? dir.resolve(EXPORT + "-" + last) : to, sourceDType(config));
    }

    /** Names the export written at the end ({@code export}, or null) and the run directory in the summary. */
    static void finish(TrainConfig config, TrainingJob.Export export, Map<String, Object> summary, PrintStream out) {
        Path dir = config.run().dir();
        if (dir == null) {
            return;
        }
        if (export != null) {
            out.printf(Locale.ROOT, "fsdp4j: exported %s to %s (%s)%n", Checkpoints.latest(config.checkpoint().dir()),
                    export.dir(), config.lora().enabled() ? "a PEFT adapter; export --merge writes the merged model"
                            : export.dtype().name().toLowerCase(Locale.ROOT) + ", as the source model");
        }
        out.printf(Locale.ROOT, "fsdp4j: run directory %s (%s)%n", dir, contents(config));
        summary.put("run_dir", dir.toString());
        summary.put("export", export == null ? null : export.dir().toString());
    }

    /** The precision of the model the run started from (its config.json's torch_dtype); fp32 for a preset. */
    static DType sourceDType(TrainConfig config) {
        Path path = config.model().path();
        if (path == null || !Files.isRegularFile(path.resolve("config.json"))) {
            return DType.F32;
        }
        try {
            JsonNode json = new ObjectMapper().readTree(path.resolve("config.json").toFile());
            String dtype = json.path("torch_dtype").asText(json.path("dtype").asText(""));
            return switch (dtype) {
                case "bfloat16" -> DType.BF16;
                case "float16" -> DType.F16;
                default -> DType.F32;
            };
        } catch (IOException e) {
            return DType.F32;
        }
    }

    /** What the run directory of {@code config} holds, as its start and its summary name it. */
    static String contents(TrainConfig config) {
        Path dir = config.run().dir().toAbsolutePath().normalize();
        StringBuilder b = new StringBuilder(CONFIG);
        Path metrics = config.log().metrics();
        if (metrics != null && metrics.toAbsolutePath().normalize().startsWith(dir)) {
            b.append(", ").append(dir.relativize(metrics.toAbsolutePath().normalize())).append(", plots/");
        }
        Path tensorboard = config.log().tensorboard();
        if (tensorboard != null && tensorboard.toAbsolutePath().normalize().startsWith(dir)) {
            b.append(", ").append(dir.relativize(tensorboard.toAbsolutePath().normalize())).append("/");
        }
        Path ck = config.checkpoint().dir();
        if (ck != null && ck.toAbsolutePath().normalize().startsWith(dir)) {
            b.append(", ").append(dir.relativize(ck.toAbsolutePath().normalize())).append("/");
        }
        if (ck != null) {
            b.append(", ").append(EXPORT).append("/");
        }
        return b.toString();
    }

    private static boolean nonEmpty(Path dir) {
        if (!Files.isDirectory(dir)) {
            return Files.exists(dir);
        }
        try (Stream<Path> entries = Files.list(dir)) {
            return entries.findAny().isPresent();
        } catch (IOException e) {
            return true;
        }
    }
}
