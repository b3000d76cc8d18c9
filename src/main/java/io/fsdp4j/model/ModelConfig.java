package io.fsdp4j.model;

/**
 * What a decoder-only transformer of the Llama family looks like: everything needed to lay out its parameters
 * and run it. Presets are static factories; {@link io.fsdp4j.hf.HfConfig} reads one from a Hugging Face
 * config.json.
 *
 * @param vocabSize V
 * @param hidden C
 * @param intermediate F, the MLP width
 * @param layers L
 * @param heads NH
 * @param kvHeads NKV
 * @param headDim HS
 * @param qkvBias whether q/k/v projections have biases (Qwen2)
 * @param slidingWindow attention window in tokens, 0 for none (Mistral)
 */
public record ModelConfig(Architecture architecture, int vocabSize, int hidden, int intermediate, int layers,
                          int heads, int kvHeads, int headDim, double ropeTheta, double rmsNormEps,
                          boolean tieEmbeddings, boolean qkvBias, int slidingWindow, int maxPositions) {

    public ModelConfig {
        require(vocabSize > 0, "vocab_size must be positive");
        require(hidden > 0 && intermediate > 0 && layers > 0, "hidden_size, intermediate_size and num_hidden_layers must be positive");
        require(heads > 0 && kvHeads > 0 && heads % kvHeads == 0,
                "num_attention_heads (" + heads + ") must be a positive multiple of num_key_value_heads (" + kvHeads + ")");
        require(headDim > 0 && headDim % 2 == 0, "head_dim must be positive and even, got " + headDim);
        require(ropeTheta > 0, "rope_theta must be positive");
        require(maxPositions > 0, "max_position_embeddings must be positive");
    }

    private static void require(boolean ok, String message) {
        if (!ok) {
            throw new io.fsdp4j.UserError("model config: " + message);
        }
    }

    /** Width of the packed q|k|v projection output. */
    public int qkvWidth() {
        return (heads + 2 * kvHeads) * headDim;
    }

    /** A small Llama-style model for demos and tests (about 0.9M parameters, byte vocabulary). */
    public static ModelConfig tiny() {
        return new ModelConfig(Architecture.LLAMA, 256, 128, 352, 4, 4, 2, 32, 10000.0, 1e-5, true, false, 0, 1024);
    }

    /** Qwen2.5-0.5B's architecture. */
    public static ModelConfig qwen25_0_5b() {
        return new ModelConfig(Architecture.QWEN2, 151936, 896, 4864, 24, 14, 2, 64, 1e6, 1e-6, true, true, 0, 32768);
    }

    /** Qwen2.5-1.5B's architecture. */
    public static ModelConfig qwen25_1_5b() {
        return new ModelConfig(Architecture.QWEN2, 151936, 1536, 8960, 28, 12, 2, 128, 1e6, 1e-6, true, true, 0, 32768);
    }

    /** Qwen2.5-7B's architecture. */
    public static ModelConfig qwen25_7b() {
        return new ModelConfig(Architecture.QWEN2, 152064, 3584, 18944, 28, 28, 4, 128, 1e6, 1e-6, false, true, 0, 32768);
    }

    /** Mistral-7B (v0.1)'s architecture. */
    public static ModelConfig mistral7b() {
        return new ModelConfig(Architecture.MISTRAL, 32000, 4096, 14336, 32, 32, 8, 128, 10000.0, 1e-5, false, false, 4096, 32768);
    }

    /** Llama-3-8B's architecture. */
    public static ModelConfig llama3_8b() {
        return new ModelConfig(Architecture.LLAMA, 128256, 4096, 14336, 32, 32, 8, 128, 500000.0, 1e-5, false, false, 0, 8192);
    }

    /** A preset by its user-facing name, or a UserError listing the names. */
    public static ModelConfig preset(String name) {
        return switch (name) {
            case "tiny" -> tiny();
            case "qwen2.5-0.5b" -> qwen25_0_5b();
            case "qwen2.5-1.5b" -> qwen25_1_5b();
            case "qwen2.5-7b" -> qwen25_7b();
            case "mistral-7b" -> mistral7b();
            case "llama-3-8b" -> llama3_8b();
            default -> throw new io.fsdp4j.UserError("unknown model preset '" + name
                    + "'; presets: tiny, qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-7b, mistral-7b, llama-3-8b");
        };
    }
}
