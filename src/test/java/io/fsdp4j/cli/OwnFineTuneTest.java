package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.job.Launcher;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A fine-tune as a new user runs one: a config like the examples' with no output keys, started in a directory of
 * its own (a separate process, as {@code bin/fsdp4j} starts it), finds everything in one run directory.
 */
class OwnFineTuneTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    /** An Alpaca file whose prompts (Prepare's default template, about 170 bytes) exceed 64 byte tokens. */
    static Path alpaca(Path dir, int examples) throws IOException {
        StringBuilder list = new StringBuilder("[\n");
        for (int i = 0; i < examples; i++) {
            list.append(i == 0 ? "" : ",\n").append("{\"instruction\": \"Echo the number.\", \"input\": \"")
                    .append(i).append("\", \"output\": \"").append(i).append("\"}");
        }
        return Files.writeString(dir.resolve("alpaca.json"), list.append("\n]\n"));
    }

    record Run(int status, List<String> lines) {
        String text() {
            return String.join("\n", lines);
        }
    }

    /** {@code fsdp4j ARGS} in a new process whose working directory is {@code cwd}. */
    static Run fsdp4j(Path cwd, String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(Launcher.javaCommand(Main.class.getName()));
        command.add(1, "-XX:+UseSerialGC");
        command.addAll(List.of(args));
        Path log = Files.createTempFile(cwd, "out", ".log");
        Process p = new ProcessBuilder(command).directory(cwd.toFile()).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        Run run = new Run(p.exitValue(), Files.readAllLines(log));
        Files.delete(log);
        return run;
    }

    @Test
    void aConfigWithNoOutputKeysWritesOneCompleteRunDirectory() throws Exception {
        alpaca(dir, 8);
        Files.writeString(dir.resolve("finetune.yaml"), """
                model:
                  preset: tiny
                data:
                  train: alpaca.json
                  seq_len: auto
                train:
                  steps: 2
                  batch_size: 1
                dist:
                  device: cpu
                  ranks: 1
                fsdp:
                  activation_checkpointing: auto
                  param_copy: auto
                checkpoint:
                  every: 1
                log:
                  tensorboard: true
                """);
        Run run = fsdp4j(dir, "train", "finetune.yaml");
        assertThat(run.status()).as(run.text()).isZero();

        List<Path> runs;
        try (Stream<Path> s = Files.list(dir.resolve("runs"))) {
            runs = s.toList();
        }
        assertThat(runs).hasSize(1);
        Path runDir = runs.getFirst();
        assertThat(runDir.getFileName().toString()).matches("tiny-\\d{8}-\\d{6}");
        assertThat(runDir.resolve("config.yaml")).isRegularFile();
        assertThat(Files.readString(runDir.resolve("config.yaml"))).contains("seq_len: ").contains("train: alpaca.json");
        assertThat(runDir.resolve("metrics.jsonl")).isRegularFile();
        assertThat(Files.readAllLines(runDir.resolve("metrics.jsonl"))).hasSize(2);
        assertThat(runDir.resolve("checkpoints/step-00000002")).isDirectory();
        assertThat(runDir.resolve("export/config.json")).isRegularFile();
        assertThat(runDir.resolve("export/model.safetensors")).isRegularFile();
        assertThat(runDir.resolve("plots")).isDirectory();
        try (Stream<Path> s = Files.list(runDir.resolve("tensorboard"))) {
            assertThat(s.map(p -> p.getFileName().toString()).toList()).singleElement()
                    .asString().startsWith("events.out.tfevents.");
        }

        String rel = Path.of("runs").resolve(runDir.getFileName()).toString();
        assertThat(run.lines()).anyMatch(l -> l.startsWith("fsdp4j: run directory " + rel + " (config.yaml")
                && l.contains(", tensorboard/, checkpoints/"));
        // checkpoint.every needs a checkpoint.dir: the run directory's default gives it
        assertThat(run.lines()).anyMatch(l -> l.startsWith("fsdp4j: checkpoint of step 1 saved in "));
        assertThat(run.lines()).anyMatch(l -> l.startsWith("fsdp4j: data.seq_len=auto: "));
        assertThat(run.lines()).contains("fsdp4j: auto: fsdp.activation_checkpointing=none, fsdp.param_copy=per_gather"
                + " (CPU ranks keep every activation)");
        assertThat(run.lines()).anyMatch(l -> l.startsWith("fsdp4j: checkpoint of step 2 saved in "));
        // two steps of one sequence each: the epoch is 2 / the training sequences the run announced
        int sequences = run.lines().stream().filter(l -> l.contains(" sequences of ")).findFirst()
                .map(l -> Integer.parseInt(l.replaceAll(".* (\\d+) sequences of .*", "$1"))).orElseThrow();
        String epoch = String.format(java.util.Locale.ROOT, "  epoch %.2f  tokens ", 2.0 / sequences);
        assertThat(run.lines()).anyMatch(l -> l.startsWith("step     2/2 ") && l.contains(epoch) && l.contains("  elapsed "));
        JsonNode summary = JSON.readTree(run.lines().getLast());
        assertThat(summary.get("run_dir").asText()).isEqualTo(rel);
        assertThat(summary.get("export").asText()).endsWith("export");
        // the resolved config trains again as it is (a new run directory, as the run directory says)
        JsonNode again = JSON.readTree(fsdp4j(dir, "train", runDir.resolve("config.yaml").toString(),
                "--print-config").lines().getLast());
        assertThat(again.at("/run/dir").asText()).isEqualTo(rel);
        assertThat(again.at("/data/seq_len").isInt()).isTrue();
    }

    @Test
    void examplesWithoutALossCarryingTokenInTheirWindowAreWarnedOf() throws Exception {
        StringBuilder list = new StringBuilder("[\n");
        for (int i = 0; i < 8; i++) { // two of them with an input of 300 bytes: their answers are past 256 tokens
            list.append(i == 0 ? "" : ",\n").append("{\"instruction\": \"Echo the number.\", \"input\": \"")
                    .append(i < 2 ? "x".repeat(300) : i).append("\", \"output\": \"").append(i).append("\"}");
        }
        Path data = Files.writeString(dir.resolve("alpaca.json"), list.append("\n]\n"));
        CommandsEndToEndTest.Run run = CommandsEndToEndTest.run("train", "--set", "data.train=" + data,
                "--set", "data.seq_len=256", "--set", "train.steps=1", "--set", "train.batch_size=1",
                "--set", "dist.ranks=1", "--set", "dist.device=cpu", "--set", "run.dir=" + dir.resolve("run"),
                "--set", "checkpoint.dir=", "--set", "log.metrics=");
        assertThat(run.status()).as(run.err()).isZero();
        assertThat(run.out()).contains("fsdp4j: warning: 2 of 8 examples (25.0%) have no loss-carrying token within"
                + " data.seq_len=256 (the prompt fills the window) and are left out; raise data.seq_len, or set it to"
                + " auto");
    }
}
