package io.fsdp4j.hf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.model.Architecture;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.RopeScaling;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Reads a Hugging Face {@code config.json} into a {@link ModelConfig}. Keys the model needs must be present
 * and well-typed; settings that would change the computation in ways fsdp4j does not implement (another
 * activation, a rope type other than default, linear, dynamic and llama3, biases Llama's code supports but we do
 * not) are refused rather than ignored. BLOOM's config has keys of its own (n_layer, n_head, layer_norm_epsilon).
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
            case QWEN3 -> "qwen3";
            case PHI3 -> "phi3";
            case GEMMA2 -> "gemma2";
            case GEMMA3 -> "gemma3_text";
            case BLOOM -> "bloom";
        });
        if (c.architecture() == Architecture.BLOOM) {
            json.put("vocab_size", c.vocabSize());
            json.put("hidden_size", c.hidden());
            json.put("n_layer", c.layers());
            json.put("n_head", c.heads());
            json.put("layer_norm_epsilon", c.rmsNormEps());
            json.put("apply_residual_connection_post_layernorm", false);
            json.put("hidden_dropout", 0.0);
            json.put("attention_dropout", 0.0);
            json.put("seq_length", c.maxPositions());
            json.put("tie_word_embeddings", c.tieEmbeddings());
            json.put("torch_dtype", "float32");
            return json;
        }
        if (c.architecture().gemma()) {
            return gemmaJson(json, c);
        }
        putShape(json, c);
        json.put("hidden_act", "silu");
        json.put("max_position_embeddings", c.maxPositions());
        json.put("rms_norm_eps", c.rmsNormEps());
        json.put("rope_theta", c.ropeTheta());
        RopeScaling rs = c.ropeScaling();
        putRope(json.putObject("rope_parameters"), c.ropeTheta(), rs);
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
            case QWEN3 -> json.put("attention_bias", false).put("use_sliding_window", false);
            case PHI3 -> {
                if (c.slidingWindow() > 0) {
                    json.put("sliding_window", c.slidingWindow());
                } else {
                    json.putNull("sliding_window");
                }
                if (rs.type() == RopeScaling.Type.LONGROPE) {
                    json.put("original_max_position_embeddings", rs.originalMaxPositions());
                }
                json.putNull("pad_token_id"); // fsdp4j gives no token an untrained embedding (padding_idx)
            }
            case GEMMA2, GEMMA3, BLOOM -> throw new IllegalStateException("unreachable");
        }
        json.put("torch_dtype", "float32");
        return json;
    }

    private static void putRope(com.fasterxml.jackson.databind.node.ObjectNode rope, double theta, RopeScaling rs) {
        rope.put("rope_type", rs.type().hfName()).put("rope_theta", theta);
        switch (rs.type()) {
            case DEFAULT -> { }
            case LINEAR, DYNAMIC -> rope.put("factor", rs.factor());
            case LLAMA3 -> rope.put("factor", rs.factor()).put("low_freq_factor", rs.lowFreqFactor())
                    .put("high_freq_factor", rs.highFreqFactor())
                    .put("original_max_position_embeddings", rs.originalMaxPositions());
            case LONGROPE -> {
                rope.put("factor", rs.factor()).put("attention_factor", rs.attentionFactor())
                        .put("original_max_position_embeddings", rs.originalMaxPositions());
                rs.shortFactor().forEach(rope.putArray("short_factor")::add);
                rs.longFactor().forEach(rope.putArray("long_factor")::add);
            }
        }
    }

    /** The sizes every decoder config.json of the Llama and Gemma families states, in transformers' order. */
    private static void putShape(com.fasterxml.jackson.databind.node.ObjectNode json, ModelConfig c) {
        json.put("vocab_size", c.vocabSize());
        json.put("hidden_size", c.hidden());
        json.put("intermediate_size", c.intermediate());
        json.put("num_hidden_layers", c.layers());
        json.put("num_attention_heads", c.heads());
        json.put("num_key_value_heads", c.kvHeads());
        json.put("head_dim", c.headDim());
    }

    /**
     * Gemma3TextConfig's keys, in transformers 5's form (rope_parameters per layer type, layer_types); Gemma2Config's
     * likewise, with one rope for every layer and the soft caps.
     */
    private static com.fasterxml.jackson.databind.node.ObjectNode gemmaJson(
            com.fasterxml.jackson.databind.node.ObjectNode json, ModelConfig c) {
        ModelConfig.Gemma g = c.gemma();
        putShape(json, c);
        json.put("hidden_activation", "gelu_pytorch_tanh");
        json.put("max_position_embeddings", c.maxPositions());
        json.put("rms_norm_eps", c.rmsNormEps());
        double scalar = g.queryPreAttnScalar(); // an int in Gemma3TextConfig, which checks types
        if (scalar == Math.rint(scalar)) {
            json.put("query_pre_attn_scalar", (long) scalar);
        } else {
            json.put("query_pre_attn_scalar", scalar);
        }
        json.put("sliding_window", c.slidingWindow());
        var types = json.putArray("layer_types");
        g.slidingLayers().forEach(s -> types.add(s ? "sliding_attention" : "full_attention"));
        if (c.architecture() == Architecture.GEMMA2) {
            json.put("rope_theta", c.ropeTheta());
            putRope(json.putObject("rope_parameters"), c.ropeTheta(), c.ropeScaling());
        } else {
            var rope = json.putObject("rope_parameters");
            putRope(rope.putObject("full_attention"), c.ropeTheta(), c.ropeScaling());
            putRope(rope.putObject("sliding_attention"), g.localRopeTheta(), RopeScaling.NONE);
        }
        json.put("attention_bias", false);
        putCap(json, "final_logit_softcapping", g.finalSoftcap());
        putCap(json, "attn_logit_softcapping", g.attnSoftcap());
        if (c.architecture() == Architecture.GEMMA3) {
            json.put("use_bidirectional_attention", false);
        }
        if (g.padTokenId() >= 0) {
            json.put("pad_token_id", g.padTokenId());
        } else {
            json.putNull("pad_token_id");
        }
        json.put("tie_word_embeddings", c.tieEmbeddings());
        json.put("torch_dtype", "float32");
        return json;
    }

    private static void putCap(com.fasterxml.jackson.databind.node.ObjectNode json, String key, double cap) {
        if (cap > 0) {
            json.put(key, cap);
        } else {
            json.putNull(key);
        }
    }

    /** A soft cap of config.json: null (or absent, where the default is none) is none, else a positive number. */
    private double softcap(String key, double fallback) {
        if (root.has(key) && root.get(key).isNull()) {
            return 0;
        }
        double cap = optionalDouble(key, fallback);
        if (!(cap > 0)) {
            throw new UserError(file + ": key '" + key + "' must be a positive number or null, got " + root.get(key));
        }
        return cap;
    }

    /**
     * Gemma3TextConfig's config.json (Gemma3ForCausalLM): its defaults for absent keys; the rope of global and sliding
     * layers from rope_parameters.{full_attention, sliding_attention} (transformers 5) or rope_theta, rope_scaling and
     * rope_local_base_freq (transformers 4); layer_types, else sliding_window_pattern; logit soft-capping where set.
     * Gemma2Config's (Gemma2ForCausalLM) likewise with its own defaults: soft caps 50 (attention) and 30 (logits),
     * sliding and global layers alternating, one rope (unscaled) for every layer. Bidirectional attention is refused.
     */
    private ModelConfig gemmaConfig(Architecture arch) {
        boolean gemma2 = arch == Architecture.GEMMA2;
        int hidden = optionalInt("hidden_size", 2304), heads = optionalInt("num_attention_heads", 8);
        int layers = optionalInt("num_hidden_layers", 26);
        String act = root.hasNonNull("hidden_activation") ? optionalString("hidden_activation", "")
                : optionalString("hidden_act", "gelu_pytorch_tanh");
        if (!act.equals("gelu_pytorch_tanh")) {
            throw unsupported("hidden_activation", "'" + act + "' (Gemma's MLP is gelu_pytorch_tanh)");
        }
        double attnSoftcap = softcap("attn_logit_softcapping", gemma2 ? 50.0 : 0);
        double finalSoftcap = softcap("final_logit_softcapping", gemma2 ? 30.0 : 0);
        if (optionalBoolean("use_bidirectional_attention", false)) {
            throw unsupported("use_bidirectional_attention", "true (fsdp4j trains causal language models)");
        }
        if (optionalBoolean("attention_bias", false)) {
            throw unsupported("attention_bias", "true (Gemma with attention biases is not supported)");
        }
        List<Boolean> sliding;
        JsonNode types = root.get("layer_types");
        if (types != null && !types.isNull()) {
            if (!types.isArray() || types.size() != layers) {
                throw new UserError(file + ": key 'layer_types' must list one type for each of the " + layers
                        + " layers, got " + types);
            }
            sliding = new java.util.ArrayList<>();
            for (JsonNode t : types) {
                switch (t.asText()) {
                    case "sliding_attention" -> sliding.add(true);
                    case "full_attention" -> sliding.add(false);
                    default -> throw unsupported("layer_types", t + " (sliding_attention or full_attention)");
                }
            }
        } else {
            int pattern = optionalInt("sliding_window_pattern", gemma2 ? 2 : 6);
            if (pattern < 1) {
                throw new UserError(file + ": key 'sliding_window_pattern' must be positive, got " + pattern);
            }
            sliding = ModelConfig.Gemma.pattern(layers, pattern);
        }
        double globalTheta = optionalDouble("rope_theta", gemma2 ? 1e4 : 1e6);
        double localTheta = optionalDouble("rope_local_base_freq", 1e4);
        RopeScaling scaling = RopeScaling.NONE;
        JsonNode params = root.get("rope_parameters");
        if (gemma2) { // one rope for every layer: the sliding layers' table is the same
            String where = params != null && params.isObject() ? "rope_parameters" : "rope_scaling";
            Rope rope = ropeOf(params != null && params.isObject() ? params : root.get("rope_scaling"), where,
                    globalTheta);
            if (rope.scaling().type() != RopeScaling.Type.DEFAULT) {
                throw unsupported(where + ".rope_type", "'" + rope.scaling().type().hfName()
                        + "' (Gemma 2 with scaled rotary embedding is not supported; its releases rotate unscaled)");
            }
            globalTheta = rope.theta();
            localTheta = rope.theta();
        } else if (params != null && params.isObject() && params.has("full_attention")) {
            Rope full = ropeOf(params.get("full_attention"), "rope_parameters.full_attention", globalTheta);
            Rope local = ropeOf(params.get("sliding_attention"), "rope_parameters.sliding_attention", localTheta);
            if (local.scaling().type() != RopeScaling.Type.DEFAULT) {
                throw unsupported("rope_parameters.sliding_attention.rope_type", "'" + local.scaling().type().hfName()
                        + "' (Gemma 3's sliding layers rotate unscaled)");
            }
            globalTheta = full.theta();
            localTheta = local.theta();
            scaling = full.scaling();
        } else if (root.hasNonNull("rope_scaling")) {
            scaling = ropeOf(root.get("rope_scaling"), "rope_scaling", globalTheta).scaling();
        }
        int padTokenId = root.has("pad_token_id") && root.get("pad_token_id").isNull() ? -1
                : optionalInt("pad_token_id", 0);
        return new ModelConfig(arch, optionalInt("vocab_size", gemma2 ? 256000 : 262208), hidden,
                optionalInt("intermediate_size", 9216), layers, heads, optionalInt("num_key_value_heads", 4),
                optionalInt("head_dim", 256), globalTheta, optionalDouble("rms_norm_eps", 1e-6),
                optionalBoolean("tie_word_embeddings", true), false, optionalInt("sliding_window", 4096),
                optionalInt("max_position_embeddings", gemma2 ? 8192 : 131072), scaling,
                new ModelConfig.Gemma(localTheta, optionalDouble("query_pre_attn_scalar", 256), sliding, padTokenId,
                        attnSoftcap, finalSoftcap));
    }

    private ModelConfig toModelConfig() {
        Architecture arch = architecture();
        if (arch == Architecture.BLOOM) {
            return bloomConfig();
        }
        if (arch.gemma()) {
            return gemmaConfig(arch);
        }
        int hidden = requiredInt("hidden_size");
        int heads = requiredInt("num_attention_heads");
        int kvHeads = optionalInt("num_key_value_heads", heads);
        // Qwen3Config's head_dim defaults to 128, whatever hidden / heads is; the others' to hidden / heads
        int headDim = optionalInt("head_dim", arch == Architecture.QWEN3 ? 128 : heads > 0 ? hidden / heads : 0);
        String act = optionalString("hidden_act", "silu");
        if (!act.equals("silu")) {
            throw unsupported("hidden_act", "'" + act + "' (only silu is supported for " + arch.hfName() + ")");
        }
        boolean qkvBias = switch (arch) {
            case QWEN2 -> true;
            case LLAMA, MISTRAL, QWEN3, PHI3 -> false;
            case GEMMA2, GEMMA3, BLOOM -> throw new IllegalStateException("unreachable");
        };
        if (arch == Architecture.QWEN3 && optionalBoolean("attention_bias", false)) {
            throw unsupported("attention_bias", "true (Qwen3 with q/k/v/o biases is not supported; every released "
                    + "Qwen3 has false)");
        }
        if (arch == Architecture.LLAMA && optionalBoolean("attention_bias", false)) {
            throw unsupported("attention_bias", "true (Llama with attention biases is not supported)");
        }
        if (arch == Architecture.LLAMA && optionalBoolean("mlp_bias", false)) {
            throw unsupported("mlp_bias", "true (Llama with MLP biases is not supported)");
        }
        int slidingWindow = 0;
        if ((arch == Architecture.MISTRAL || arch == Architecture.PHI3) && root.hasNonNull("sliding_window")) {
            slidingWindow = requiredInt("sliding_window");
        }
        if ((arch == Architecture.QWEN2 || arch == Architecture.QWEN3) && optionalBoolean("use_sliding_window", false)) {
            throw unsupported("use_sliding_window", "true (" + arch.hfName()
                    + "'s per-layer sliding window is not supported)");
        }
        Rope rope = rope();
        return new ModelConfig(arch, requiredInt("vocab_size"), hidden, requiredInt("intermediate_size"),
                requiredInt("num_hidden_layers"), heads, kvHeads, headDim, rope.theta(),
                optionalDouble("rms_norm_eps", 1e-6), optionalBoolean("tie_word_embeddings", false), qkvBias,
                slidingWindow, optionalInt("max_position_embeddings", 4096), rope.scaling());
    }

    /**
     * BLOOM's config.json: hidden_size (or n_embed), n_layer, n_head (or their num_* aliases), layer_norm_epsilon;
     * the MLP is 4 * hidden_size wide. ALiBi sets no maximum length: max positions keeps seq_length (2048 if absent).
     */
    private ModelConfig bloomConfig() {
        int hidden = root.hasNonNull("n_embed") ? requiredInt("n_embed") : requiredInt("hidden_size");
        int layers = root.hasNonNull("n_layer") ? requiredInt("n_layer") : requiredInt("num_hidden_layers");
        int heads = root.hasNonNull("n_head") ? requiredInt("n_head") : requiredInt("num_attention_heads");
        if (optionalBoolean("apply_residual_connection_post_layernorm", false)) {
            throw unsupported("apply_residual_connection_post_layernorm",
                    "true (BLOOM with residuals taken after the norms is not supported)");
        }
        if (heads <= 0 || hidden % heads != 0) {
            throw new UserError(file + ": hidden_size " + hidden + " is not a multiple of n_head " + heads);
        }
        return ModelConfig.bloom(optionalInt("vocab_size", 250880), hidden, layers, heads,
                optionalDouble("layer_norm_epsilon", 1e-5), optionalBoolean("tie_word_embeddings", true),
                optionalInt("seq_length", 2048));
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

    private record Rope(double theta, RopeScaling scaling) {}

    /**
     * The rotary base and scaling: {@code rope_parameters} (transformers 5: rope_type, rope_theta and the scaling's
     * keys) or {@code rope_scaling} (transformers 4: rope_type or type and the scaling's keys, rope_theta at the top
     * level). Supported rope types: {@link RopeScaling.Type}; any other is refused.
     */
    private Rope rope() {
        String where = "rope_parameters";
        JsonNode params = root.get(where);
        if (params == null || params.isNull()) {
            where = "rope_scaling";
            params = root.get(where);
        }
        Rope rope = ropeOf(params, where, 0);
        if (rope.theta() == 0) {
            if (!root.hasNonNull("rope_theta")) {
                throw new UserError(file + ": missing key 'rope_theta' (or 'rope_parameters.rope_theta'), needed for "
                        + "the rotary position embedding");
            }
            return new Rope(number("rope_theta").asDouble(), rope.scaling());
        }
        return rope;
    }

    /**
     * The rope settings of one object {@code where} (rope_type or type, rope_theta, the scaling's keys): its theta, or
     * {@code theta} where it names none; no object at all is the default rope.
     */
    private Rope ropeOf(JsonNode params, String where, double theta) {
        RopeScaling scaling = RopeScaling.NONE;
        if (params != null && params.isObject()) {
            JsonNode thetaNode = params.get("rope_theta");
            if (thetaNode != null && !thetaNode.isNull()) {
                theta = number(params, where, "rope_theta");
            }
            if (params.hasNonNull("partial_rotary_factor") && number(params, where, "partial_rotary_factor") != 1.0) {
                throw unsupported(where + ".partial_rotary_factor", params.get("partial_rotary_factor")
                        + " (only full-width rotary embedding is supported)");
            }
            String typeKey = params.has("rope_type") ? "rope_type" : "type";
            JsonNode type = params.get(typeKey);
            String name = type == null || type.isNull() ? "default" : type.asText();
            RopeScaling.Type t = RopeScaling.Type.fromHfName(name.equals("su") ? "longrope" : name); // Phi-3's old name
            if (t == null) {
                throw unsupported(where + "." + typeKey, "'" + name + "'; supported rope types: "
                        + RopeScaling.Type.supportedNames());
            }
            scaling = switch (t) {
                case DEFAULT -> RopeScaling.NONE;
                case LINEAR -> RopeScaling.linear(number(params, where, "factor"));
                case DYNAMIC -> RopeScaling.dynamic(number(params, where, "factor"));
                case LLAMA3 -> RopeScaling.llama3(number(params, where, "factor"),
                        number(params, where, "low_freq_factor"), number(params, where, "high_freq_factor"),
                        (int) number(params, where, "original_max_position_embeddings"));
                case LONGROPE -> RopeScaling.longrope(factors(params, where, "short_factor"),
                        factors(params, where, "long_factor"), params.hasNonNull("original_max_position_embeddings")
                                ? (int) number(params, where, "original_max_position_embeddings")
                                : requiredInt("original_max_position_embeddings"),
                        optionalInt("max_position_embeddings", 4096),
                        params.hasNonNull("factor") ? number(params, where, "factor") : 0,
                        params.hasNonNull("attention_factor") ? number(params, where, "attention_factor") : 0);
            };
        }
        return new Rope(theta, scaling);
    }

    /** A list of numbers inside the object {@code where}. */
    private List<Double> factors(JsonNode object, String where, String key) {
        JsonNode v = object.get(key);
        if (v == null || !v.isArray() || v.isEmpty()) {
            throw new UserError(file + ": key '" + where + "." + key + "' must be a list of numbers, which longrope needs");
        }
        List<Double> values = new java.util.ArrayList<>();
        for (JsonNode x : v) {
            if (!x.isNumber()) {
                throw new UserError(file + ": key '" + where + "." + key + "' must hold numbers only, got " + x);
            }
            values.add(x.asDouble());
        }
        return values;
    }

    /** A required number inside the object {@code where}. */
    private double number(JsonNode object, String where, String key) {
        JsonNode v = object.get(key);
        if (v == null || v.isNull()) {
            throw new UserError(file + ": missing key '" + where + "." + key + "', which the rope type needs");
        }
        if (!v.isNumber()) {
            throw new UserError(file + ": key '" + where + "." + key + "' must be a number, got " + v);
        }
        return v.asDouble();
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
