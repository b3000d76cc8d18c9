package io.fsdp4j.checkpoint;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.UserError;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.NamedTensor;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.safetensors.SafetensorsWriter;
import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * LoRA adapters in PEFT's format: a directory with {@code adapter_config.json} and {@code adapter_model.safetensors},
 * whose tensors are named {@code base_model.model.} + the adapter's name in the model
 * ({@code base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight}, (r, in); {@code lora_B}, (out, r)).
 * Read as a {@link ParamSource} over the adapters' layouts (to start from, {@code lora.init}), and written from them.
 */
public final class PeftAdapter {
    /** The adapter file's name in a PEFT adapter directory. */
    public static final String WEIGHTS = "adapter_model.safetensors";
    /** The adapter config's name in a PEFT adapter directory. */
    public static final String CONFIG = "adapter_config.json";
    /** What PEFT puts before a tensor's name in the model. */
    public static final String PREFIX = "base_model.model.";
    private static final ObjectMapper JSON = new ObjectMapper();

    private PeftAdapter() {}

    /**
     * The adapters of {@code dir} (a PEFT adapter directory, or its safetensors file) as a source over
     * {@code layouts} (the adapters' layouts), open until closed: every adapter of the layouts must be in the file
     * with its shape, or a one-line error names the first that is not.
     */
    public static Source open(Path dir, List<UnitLayout> layouts) {
        Path file = Files.isDirectory(dir) ? dir.resolve(WEIGHTS) : dir;
        if (!Files.isRegularFile(file)) {
            throw new UserError("lora.init: " + file + " does not exist; point lora.init at a PEFT adapter directory"
                    + " (with " + WEIGHTS + ")");
        }
        SafetensorsFile weights = SafetensorsFile.open(file);
        try {
            for (UnitLayout unit : layouts) {
                for (ParamSpec p : unit.params()) {
                    String name = PREFIX + p.name();
                    if (!weights.contains(name)) {
                        throw new UserError("lora.init: " + file + " has no tensor " + name + "; is it an adapter of "
                                + "this model with these lora.target_modules?");
                    }
                    long[] shape = weights.info(name).shape();
                    if (!Arrays.equals(shape, Arrays.stream(p.shape()).asLongStream().toArray())) {
                        throw new UserError("lora.init: " + file + ": " + name + " has shape " + Arrays.toString(shape)
                                + ", this model's is " + Arrays.toString(p.shape()) + " (check lora.rank)");
                    }
                }
            }
        } catch (RuntimeException e) {
            weights.close();
            throw e;
        }
        return new Source(weights, List.copyOf(layouts));
    }

    /** An adapter file read as the adapters' units ({@link #open}). */
    public record Source(SafetensorsFile file, List<UnitLayout> layouts) implements ParamSource, AutoCloseable {
        @Override
        public void read(int unit, long start, float[] dst, int dstOffset, int count) {
            long end = start + count;
            for (ParamSpec p : layouts.get(unit).params()) {
                long from = Math.max(start, p.offset()), to = Math.min(end, p.end());
                if (from < to) {
                    file.readFloats(PREFIX + p.name(), from - p.offset(), dst, dstOffset + (int) (from - start),
                            (int) (to - from));
                }
            }
        }

        @Override
        public void close() {
            file.close();
        }
    }

    /**
     * Writes the adapters ({@code values.get(i)}: the whole of {@code layouts.get(i)}) to {@code dir} in PEFT's format,
     * fp32, with a config naming the base model and the LoRA settings.
     *
     * @param baseModel the base model's path or Hub id ({@code base_model_name_or_path})
     * @param alpha     lora_alpha
     * @param rslora    use_rslora
     */
    public static void write(Path dir, List<UnitLayout> layouts, List<float[]> values, LoraSpec lora, double alpha,
                             boolean rslora, String baseModel) {
        List<NamedTensor> tensors = new ArrayList<>();
        for (int u = 0; u < layouts.size(); u++) {
            for (ParamSpec p : layouts.get(u).params()) {
                float[] v = Arrays.copyOfRange(values.get(u), Math.toIntExact(p.offset()), Math.toIntExact(p.end()));
                tensors.add(new NamedTensor(PREFIX + p.name(), DType.F32,
                        Arrays.stream(p.shape()).asLongStream().toArray(), v, null));
            }
        }
        ObjectNode config = JSON.createObjectNode();
        config.put("peft_type", "LORA");
        config.put("task_type", "CAUSAL_LM");
        config.put("base_model_name_or_path", baseModel);
        config.put("r", lora.rank());
        config.put("lora_alpha", alpha);
        config.put("lora_dropout", 0.0);
        config.put("use_rslora", rslora);
        config.put("bias", "none");
        config.put("fan_in_fan_out", false);
        config.put("inference_mode", true);
        config.putArray("target_modules").addAll(lora.modules().stream().map(config::textNode).toList());
        try {
            Files.createDirectories(dir);
            SafetensorsWriter.write(dir.resolve(WEIGHTS), tensors, Map.of("format", "pt"));
            JSON.writerWithDefaultPrettyPrinter().writeValue(dir.resolve(CONFIG).toFile(), config);
        } catch (IOException e) {
            throw new UserError("cannot write the LoRA adapter to " + dir + ": " + e.getMessage());
        }
    }
}
