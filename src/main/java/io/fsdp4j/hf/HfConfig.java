package io.fsdp4j.hf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.model.Architecture;
import io.fsdp4j.model.ModelConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Reads a Hugging Face {@code config.json} into a {@link ModelConfig}. Keys the model needs must be present
 * and well-typed; settings that would change the computation in ways fsdp4j does not implement (another
 * activation, rope scaling, biases Llama's code supports but we do not) are refused rather than ignored.
 */
public final class HfConfig {
    private final Path file;
    private final JsonNode root;

    private HfConfig(Path file, JsonNode root) {
        this.file = file;
        this.root = root;
    }

    /** Reads {@code dir/config.json}. */
    public static ModelConfig read(Path dir) {
        Path file = dir.resolve("config.json");
        if (!Files.isRegularFile(file)) {
            throw new UserError("no config.json in " + dir + " (expected a Hugging Face model directory)");
        }
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(file.toFile());
        } catch (IOException e) {
            throw new UserError(file + " is not valid JSON: " + e.getMessage().lines().findFirst().orElse(""));
        }
        if (root == null || !root.isObject()) {
            throw new UserError(file + " must hold a JSON object");
        }
        return new HfConfig(file, root).toModelConfig();
    }

    /**
     * A Hugging Face {@code config.json} for a model config (used when exporting a model that did not come from a
     * Hugging Face directory): the keys transformers needs to build the same architecture.
     */
    public static com.fasterxml.jackson.databind.node.ObjectNode toJson(ModelConfig c) {
        var json = new ObjectMapper().createObjectNode();
        json.putArray("architectures").add(c.architecture().hfName());
        json.put("model_type", switch (c.architecture()) {
            case QWEN2 -> "qwen2";
            case LLAMA -> "llama";
            case MISTRAL -> "mistral";
        });
        json.put("vocab_size", c.vocabSize());
        json.put("hidden_size", c.hidden());
        json.put("intermediate_size", c.intermediate());
        json.put("num_hidden_layers", c.layers());
        json.put("num_attention_heads", c.heads());
        json.put("num_key_value_heads", c.kvHeads());
        json.put("head_dim", c.headDim());
        json.put("hidden_act", "silu");
        json.put("max_position_embeddings", c.maxPositions());
        json.put("rms_norm_eps", c.rmsNormEps());
        json.put("rope_theta", c.ropeTheta());
        json.putObject("rope_parameters").put("rope_type", "default").put("rope_theta", c.ropeTheta());
        json.put("tie_word_embeddings", c.tieEmbeddings());
        switch (c.architecture()) {
            case MISTRAL -> {
                if (c.slidingWindow() > 0) {
                    json.put("sliding_window", c.slidingWindow());
                } else {
                    json.putNull("sliding_window");
                }
            }
            case LLAMA -> json.put("attention_bias", false).put("mlp_bias", false);
            case QWEN2 -> json.put("use_sliding_window", false);
        }
        json.put("torch_dtype", "float32");
        return json;
    }

    private ModelConfig toModelConfig() {
        Architecture arch = architecture();
        int hidden = requiredInt("hidden_size");
        int heads = requiredInt("num_attention_heads");
        int kvHeads = optionalInt("num_key_value_heads", heads);
        int headDim = optionalInt("head_dim", heads > 0 ? hidden / heads : 0);
        String act = optionalString("hidden_act", "silu");
        if (!act.equals("silu")) {
            throw unsupported("hidden_act", "'" + act + "' (only silu is supported for " + arch.hfName() + ")");
        }
        boolean qkvBias = switch (arch) {
            case QWEN2 -> true;
            case LLAMA, MISTRAL -> false;
        };
        if (arch == Architecture.LLAMA && optionalBoolean("attention_bias", false)) {
            throw unsupported("attention_bias", "true (Llama with attention biases is not supported)");
        }
        if (arch == Architecture.LLAMA && optionalBoolean("mlp_bias", false)) {
            throw unsupported("mlp_bias", "true (Llama with MLP biases is not supported)");
        }
        int slidingWindow = 0;
        if (arch == Architecture.MISTRAL && root.hasNonNull("sliding_window")) {
            slidingWindow = requiredInt("sliding_window");
        }
        if (arch == Architecture.QWEN2 && optionalBoolean("use_sliding_window", false)) {
            throw unsupported("use_sliding_window", "true (Qwen2's per-layer sliding window is not supported)");
        }
        return new ModelConfig(arch, requiredInt("vocab_size"), hidden, requiredInt("intermediate_size"),
                requiredInt("num_hidden_layers"), heads, kvHeads, headDim, ropeTheta(),
                optionalDouble("rms_norm_eps", 1e-6), optionalBoolean("tie_word_embeddings", false), qkvBias,
                slidingWindow, optionalInt("max_position_embeddings", 4096));
    }

    private Architecture architecture() {
        JsonNode list = root.get("architectures");
        if (list == null || !list.isArray() || list.isEmpty() || !list.get(0).isTextual()) {
            throw new UserError(file + ": missing key 'architectures' (a list naming the model class); supported: "
                    + Architecture.supportedNames());
        }
        String name = list.get(0).asText();
        Architecture arch = Architecture.fromHfName(name);
        if (arch == null) {
            throw new UserError(file + ": unsupported architecture '" + name + "'; supported: "
                    + Architecture.supportedNames());
        }
        return arch;
    }

    /** rope_theta at the top level (transformers 4) or inside rope_parameters (transformers 5). */
    private double ropeTheta() {
        JsonNode params = root.get("rope_parameters");
        if (params == null || params.isNull()) {
            params = root.get("rope_scaling");
        }
        if (params != null && params.isObject()) {
            JsonNode type = params.has("rope_type") ? params.get("rope_type") : params.get("type");
            if (type != null && !type.isNull() && !type.asText().equals("default")) {
                throw unsupported("rope_parameters.rope_type", "'" + type.asText() + "' (only default rope is supported)");
            }
            JsonNode theta = params.get("rope_theta");
            if (theta != null && !theta.isNull()) {
                if (!theta.isNumber()) {
                    throw new UserError(file + ": key 'rope_parameters.rope_theta' must be a number, got " + theta);
                }
                return theta.asDouble();
            }
        }
        if (!root.hasNonNull("rope_theta")) {
            throw new UserError(file + ": missing key 'rope_theta' (or 'rope_parameters.rope_theta'), needed for "
                    + "the rotary position embedding");
        }
        return number("rope_theta").asDouble();
    }

    private UserError unsupported(String key, String what) {
        return new UserError(file + ": unsupported setting '" + key + "': " + what);
    }

    private JsonNode number(String key) {
        JsonNode v = root.get(key);
        if (!v.isNumber()) {
            throw new UserError(file + ": key '" + key + "' must be a number, got " + v);
        }
        return v;
    }

    private int requiredInt(String key) {
        if (!root.hasNonNull(key)) {
            throw new UserError(file + ": missing key '" + key + "', which the model needs");
        }
        JsonNode v = root.get(key);
        if (!v.isIntegralNumber() || !v.canConvertToInt()) {
            throw new UserError(file + ": key '" + key + "' must be an integer, got " + v);
        }
        return v.intValue();
    }

    private int optionalInt(String key, int fallback) {
        return root.hasNonNull(key) ? requiredInt(key) : fallback;
    }

    private double optionalDouble(String key, double fallback) {
        return root.hasNonNull(key) ? number(key).asDouble() : fallback;
    }

    private boolean optionalBoolean(String key, boolean fallback) {
        if (!root.hasNonNull(key)) {
            return fallback;
        }
        JsonNode v = root.get(key);
        if (!v.isBoolean()) {
            throw new UserError(file + ": key '" + key + "' must be true or false, got " + v);
        }
        return v.booleanValue();
    }

    private String optionalString(String key, String fallback) {
        if (!root.hasNonNull(key)) {
            return fallback;
        }
        JsonNode v = root.get(key);
        if (!v.isTextual()) {
            throw new UserError(file + ": key '" + key + "' must be a string, got " + v);
        }
        return v.asText();
    }
}
