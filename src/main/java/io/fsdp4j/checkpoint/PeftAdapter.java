package io.fsdp4j.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
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
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

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
    /** The model card of a QLoRA adapter (PEFT writes one with every adapter; fsdp4j where it has something to say). */
    public static final String CARD = "README.md";
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
        return open(dir, layouts, "lora.init", "is it an adapter of this model with these lora.target_modules?",
                "check lora.rank", false);
    }

    /**
     * {@link #open(Path, List)} for {@code option} (the key or option that named the directory, for messages), a
     * missing tensor's and a wrong shape's messages ending in {@code missingHint} and {@code shapeHint}; with
     * {@code exact}, a tensor of the file that none of the layouts has (an adapter of another model: more layers,
     * other linears) is refused too.
     */
    public static Source open(Path dir, List<UnitLayout> layouts, String option, String missingHint,
                              String shapeHint, boolean exact) {
        Path file = Files.isDirectory(dir) ? dir.resolve(WEIGHTS) : dir;
        if (!Files.isRegularFile(file)) {
            throw new UserError(option + ": " + file + " does not exist; point " + option + " at a PEFT adapter "
                    + "directory (with " + WEIGHTS + ")");
        }
        SafetensorsFile weights = SafetensorsFile.open(file);
        try {
            Set<String> expected = new HashSet<>();
            for (UnitLayout unit : layouts) {
                for (ParamSpec p : unit.params()) {
                    String name = PREFIX + p.name();
                    expected.add(name);
                    if (!weights.contains(name)) {
                        throw new UserError(option + ": " + file + " has no tensor " + name + "; " + missingHint);
                    }
                    long[] shape = weights.info(name).shape();
                    if (!Arrays.equals(shape, Arrays.stream(p.shape()).asLongStream().toArray())) {
                        throw new UserError(option + ": " + file + ": " + name + " has shape " + Arrays.toString(shape)
                                + ", this model's is " + Arrays.toString(p.shape()) + " (" + shapeHint + ")");
                    }
                }
            }
            for (String name : exact ? weights.names() : Set.<String>of()) {
                if (!expected.contains(name)) {
                    throw new UserError(option + ": " + file + " holds " + name + ", which this model has no place "
                            + "for; " + missingHint);
                }
            }
        } catch (RuntimeException e) {
            weights.close();
            throw e;
        }
        return new Source(weights, List.copyOf(layouts));
    }

    /**
     * What a PEFT adapter directory holds ({@link #read}): LoRA adapters of rank {@code rank} on the linears
     * {@code modules} (their names in a block, as {@code q_proj}, in the order first met in the file), scaled by
     * alpha / r, or alpha / sqrt(r) with rsLoRA.
     *
     * @param baseModel the config's {@code base_model_name_or_path} (null when absent)
     */
    public record Adapter(Path dir, int rank, double alpha, boolean rslora, List<String> modules, String baseModel) {
        /** PEFT's scaling of the adapters' output. */
        public double scaling() {
            return rslora ? alpha / Math.sqrt(rank) : alpha / rank;
        }
    }

    /**
     * Reads the config of the PEFT adapter directory {@code dir} ({@link #CONFIG}: peft_type LORA, r, lora_alpha,
     * use_rslora) and which linears its tensors adapt; anything else (another PEFT method, DoRA, per-module ranks, an
     * r its tensors do not have) is a one-line error naming {@code option} and the file.
     */
    public static Adapter read(Path dir, String option) {
        if (!Files.isDirectory(dir)) {
            throw new UserError(option + ": " + dir + " is not a directory; give a PEFT adapter directory (with "
                    + CONFIG + " and " + WEIGHTS + ")");
        }
        Path configFile = dir.resolve(CONFIG), weightsFile = dir.resolve(WEIGHTS);
        for (Path f : List.of(configFile, weightsFile)) {
            if (!Files.isRegularFile(f)) {
                throw new UserError(option + ": " + f + " does not exist; give a PEFT adapter directory (with "
                        + CONFIG + " and " + WEIGHTS + ")");
            }
        }
        JsonNode config;
        try {
            config = JSON.readTree(configFile.toFile());
        } catch (IOException e) {
            throw new UserError(option + ": " + configFile + " is not valid JSON: " + e.getMessage().lines().findFirst()
                    .orElse(""));
        }
        if (config == null || !config.isObject() || !"LORA".equals(config.path("peft_type").asText())) {
            throw new UserError(option + ": " + configFile + " is not a LoRA adapter's config (peft_type "
                    + (config == null ? "missing" : config.path("peft_type").asText("missing")) + "); fsdp4j reads "
                    + "PEFT's LoRA adapters");
        }
        if (!config.path("r").isInt() || config.path("r").intValue() < 1 || !config.path("lora_alpha").isNumber()) {
            throw new UserError(option + ": " + configFile + " needs r (an integer >= 1) and lora_alpha (a number)");
        }
        if (config.path("use_dora").asBoolean(false) || !config.path("rank_pattern").isEmpty()
                || !config.path("alpha_pattern").isEmpty()) {
            throw new UserError(option + ": " + configFile + " asks for DoRA or per-module ranks (use_dora, "
                    + "rank_pattern, alpha_pattern); fsdp4j reads plain LoRA adapters of one rank");
        }
        int rank = config.path("r").intValue();
        Set<String> modules = new LinkedHashSet<>();
        try (SafetensorsFile weights = SafetensorsFile.open(weightsFile)) {
            for (String name : weights.names()) {
                int at = name.lastIndexOf(".lora_A.weight");
                if (at < 0) {
                    continue;
                }
                modules.add(name.substring(name.lastIndexOf('.', at - 1) + 1, at));
                long rows = weights.info(name).shape()[0];
                if (rows != rank) {
                    throw new UserError(option + ": " + configFile + " says r " + rank + ", but " + weightsFile
                            + " has " + name + " of rank " + rows);
                }
            }
        }
        if (modules.isEmpty()) {
            throw new UserError(option + ": " + weightsFile + " holds no LoRA tensors (names ending in "
                    + ".lora_A.weight)");
        }
        JsonNode base = config.path("base_model_name_or_path");
        return new Adapter(dir, rank, config.path("lora_alpha").doubleValue(), config.path("use_rslora").asBoolean(false),
                List.copyOf(modules), base.isTextual() ? base.asText() : null);
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
        write(dir, layouts, values, lora, alpha, rslora, baseModel, null);
    }

    /**
     * As {@link #write(Path, List, List, LoraSpec, double, boolean, String)}, for a run whose base was quantized
     * ({@code quantization}: bitsandbytes' config of it, as transformers' BitsAndBytesConfig.to_dict names its keys;
     * null: none): adapter_config.json is the same (PEFT records no quantization there), and a model card README.md
     * says, as PEFT's create_or_update_model_card does, which bitsandbytes config was used in training.
     */
    public static void write(Path dir, List<UnitLayout> layouts, List<float[]> values, LoraSpec lora, double alpha,
                             boolean rslora, String baseModel, Map<String, Object> quantization) {
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
            if (quantization != null) {
                Files.writeString(dir.resolve(CARD), quantizationCard(baseModel, quantization));
            }
        } catch (IOException e) {
            throw new UserError("cannot write the LoRA adapter to " + dir + ": " + e.getMessage());
        }
    }

    /** PEFT's model card lines for a quantized base: its "Training procedure" with the bitsandbytes config. */
    static String quantizationCard(String baseModel, Map<String, Object> quantization) {
        StringBuilder card = new StringBuilder("---\n").append(baseModel == null ? "" : "base_model: " + baseModel + "\n")
                .append("library_name: peft\npipeline_tag: text-generation\n---\n\n## Training procedure\n\n")
                .append("The following `bitsandbytes` quantization config was used during training:\n");
        quantization.forEach((k, v) -> card.append("- ").append(k).append(": ").append(v).append('\n'));
        return card.append("\n### Framework versions\n\n- fsdp4j\n").toString();
    }
}
