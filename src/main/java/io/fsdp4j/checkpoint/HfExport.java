package io.fsdp4j.checkpoint;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.hf.HfConfig;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.NamedTensor;
import io.fsdp4j.safetensors.SafetensorsWriter;
import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * {@code fsdp4j export}: a checkpoint as a Hugging Face model directory that transformers loads: model.safetensors
 * with the checkpoint's parameter names, the config.json (the original model's when the run started from a Hugging
 * Face directory, else one written for the architecture) and the original's tokenizer files. Written under a
 * temporary name and renamed when complete.
 */
public final class HfExport {
    /** Files copied from the original model directory when present. */
    private static final List<String> TOKENIZER_FILES = List.of("tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "vocab.json", "merges.txt", "tokenizer.model", "generation_config.json",
            "chat_template.jinja", "added_tokens.json");

    private HfExport() {}

    public static Path export(Path checkpointDir, Path outDir, DType dtype) {
        if (Files.exists(outDir) && !isEmptyDirectory(outDir)) {
            throw new UserError("export directory " + outDir + " already exists and is not empty; choose a new one");
        }
        Path tmp = outDir.resolveSibling("." + outDir.getFileName() + ".tmp");
        try (SavedCheckpoint checkpoint = SavedCheckpoint.open(checkpointDir)) {
            ModelConfig config = checkpoint.index().model();
            List<UnitLayout> layout = CausalLMs.layout(config);
            checkpoint.requireLayout(layout);
            deleteTree(tmp);
            Files.createDirectories(tmp);
            ParamSource params = checkpoint.source(SavedCheckpoint.Kind.PARAMS);
            List<NamedTensor> tensors = new ArrayList<>();
            for (int u = 0; u < layout.size(); u++) {
                for (ParamSpec p : layout.get(u).params()) {
                    float[] values = new float[Math.toIntExact(p.numel())];
                    params.read(u, p.offset(), values, 0, values.length);
                    long[] shape = java.util.Arrays.stream(p.shape()).asLongStream().toArray();
                    tensors.add(NamedTensor.of(p.name(), dtype, shape, values));
                }
            }
            SafetensorsWriter.write(tmp.resolve("model.safetensors"), tensors, Map.of("format", "pt"));
            String original = checkpoint.index().modelPath();
            Path originalDir = original == null ? null : Path.of(original);
            var mapper = new ObjectMapper();
            if (originalDir != null && Files.isRegularFile(originalDir.resolve("config.json"))) {
                var json = (com.fasterxml.jackson.databind.node.ObjectNode) mapper.readTree(originalDir.resolve("config.json").toFile());
                json.put("torch_dtype", dtype == DType.BF16 ? "bfloat16" : dtype == DType.F16 ? "float16" : "float32");
                mapper.writerWithDefaultPrettyPrinter().writeValue(tmp.resolve("config.json").toFile(), json);
                for (String name : TOKENIZER_FILES) {
                    if (Files.isRegularFile(originalDir.resolve(name))) {
                        Files.copy(originalDir.resolve(name), tmp.resolve(name));
                    }
                }
            } else {
                var json = HfConfig.toJson(config);
                json.put("torch_dtype", dtype == DType.BF16 ? "bfloat16" : dtype == DType.F16 ? "float16" : "float32");
                mapper.writerWithDefaultPrettyPrinter().writeValue(tmp.resolve("config.json").toFile(), json);
            }
            if (Files.exists(outDir)) {
                Files.delete(outDir); // empty, checked above
            }
            Files.move(tmp, outDir, StandardCopyOption.ATOMIC_MOVE);
            return outDir;
        } catch (IOException e) {
            throw new UserError("cannot write export directory " + outDir + ": " + e.getMessage());
        }
    }

    private static boolean isEmptyDirectory(Path dir) {
        try (Stream<Path> entries = Files.list(dir)) {
            return entries.findAny().isEmpty();
        } catch (IOException e) {
            return false;
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
