package io.fsdp4j.model;

import java.util.List;

/**
 * What a decoder-only transformer looks like: everything needed to lay out its parameters and run it. Presets are
 * static factories; {@link io.fsdp4j.hf.HfConfig} reads one from a Hugging Face config.json.
 *
 * @param vocabSize V
 * @param hidden C
 * @param intermediate F, the MLP width (4C for BLOOM)
 * @param layers L
 * @param heads NH
 * @param kvHeads NKV (NH for BLOOM)
 * @param headDim HS
 * @param ropeTheta the rotary base (unused, 0, for architectures without rotary embedding: BLOOM)
 * @param rmsNormEps the norms' epsilon: RMSNorm's, or LayerNorm's layer_norm_epsilon for BLOOM
 * @param qkvBias whether q/k/v projections have biases (Qwen2; BLOOM has biases everywhere)
 * @param slidingWindow attention window in tokens, 0 for none (Mistral)
 * @param maxPositions max_position_embeddings (BLOOM, whose ALiBi has no such limit, keeps its training length)
 * @param ropeScaling how rotary frequencies are scaled ({@link RopeScaling#NONE} for none; Gemma 3: its global
 *     layers')
 * @param gemma what only Gemma 2 and 3 have (null for the other architectures)
 */
public record ModelConfig(Architecture architecture, int vocabSize, int hidden, int intermediate, int layers,
                          int heads, int kvHeads, int headDim, double ropeTheta, double rmsNormEps,
                          boolean tieEmbeddings, boolean qkvBias, int slidingWindow, int maxPositions,
                          RopeScaling ropeScaling, Gemma gemma) {

    /**
     * Gemma 2's and 3's settings beyond the Llama family's: its rope theta and {@link #slidingWindow} apply to its
     * global (full-attention) layers and its sliding layers respectively.
     *
     * @param localRopeTheta rope_local_base_freq: the rotary base of the sliding layers (unscaled; Gemma 2: rope_theta)
     * @param queryPreAttnScalar query_pre_attn_scalar: attention scores are q.k / sqrt(this), not / sqrt(HS)
     * @param slidingLayers for each layer, whether it attends within the sliding window (layer_types)
     * @param padTokenId pad_token_id, the embedding's padding_idx: looking it up gives its row no gradient (-1: none)
     * @param attnSoftcap attn_logit_softcapping: scores become c * tanh(score / c) before the mask (0: none)
     * @param finalSoftcap final_logit_softcapping: logits become c * tanh(logit / c) (0: none)
     */
    public record Gemma(double localRopeTheta, double queryPreAttnScalar, List<Boolean> slidingLayers,
                        int padTokenId, double attnSoftcap, double finalSoftcap) {
        public Gemma {
            slidingLayers = List.copyOf(slidingLayers);
            require(localRopeTheta > 0, "rope_local_base_freq must be positive");
            require(queryPreAttnScalar > 0, "query_pre_attn_scalar must be positive");
            require(attnSoftcap >= 0, "attn_logit_softcapping must be positive (or null: none)");
            require(finalSoftcap >= 0, "final_logit_softcapping must be positive (or null: none)");
        }

        /** Settings without soft-capping (Gemma 3's). */
        public Gemma(double localRopeTheta, double queryPreAttnScalar, List<Boolean> slidingLayers, int padTokenId) {
            this(localRopeTheta, queryPreAttnScalar, slidingLayers, padTokenId, 0, 0);
        }

        /** These settings for the first {@code n} layers. */
        Gemma firstLayers(int n) {
            return new Gemma(localRopeTheta, queryPreAttnScalar, slidingLayers.subList(0, n), padTokenId, attnSoftcap,
                    finalSoftcap);
        }

        /** The layer pattern of Gemma 3's configs before layer_types: every n-th layer global, the others sliding. */
        public static List<Boolean> pattern(int layers, int n) {
            List<Boolean> sliding = new java.util.ArrayList<>();
            for (int i = 0; i < layers; i++) {
                sliding.add((i + 1) % n != 0);
            }
            return sliding;
        }
    }

    public ModelConfig {
        require(vocabSize > 0, "vocab_size must be positive");
        require(hidden > 0 && intermediate > 0 && layers > 0, "hidden_size, intermediate_size and num_hidden_layers must be positive");
        require(heads > 0 && kvHeads > 0 && heads % kvHeads == 0,
                "num_attention_heads (" + heads + ") must be a positive multiple of num_key_value_heads (" + kvHeads + ")");
        require(maxPositions > 0, "max_position_embeddings must be positive");
        if (ropeScaling == null) { // configs saved before rope scaling existed (checkpoint index.json)
            ropeScaling = RopeScaling.NONE;
        }
        require((gemma != null) == architecture.gemma(), "Gemma's settings are Gemma's alone");
        if (gemma != null) {
            require(gemma.slidingLayers().size() == layers, "layer_types has " + gemma.slidingLayers().size()
                    + " entries for " + layers + " layers");
            require(gemma.padTokenId() < vocabSize, "pad_token_id " + gemma.padTokenId() + " is outside the vocabulary");
        }
        if (architecture.usesRope()) {
            require(headDim > 0 && headDim % 2 == 0, "head_dim must be positive and even, got " + headDim);
            require(ropeTheta > 0, "rope_theta must be positive");
        } else {
            require(headDim > 0 && heads * headDim == hidden,
                    "hidden_size (" + hidden + ") must be num_attention_heads (" + heads + ") times the head size");
            require(kvHeads == heads, "BLOOM has one key/value head per query head");
            require(ropeScaling.type() == RopeScaling.Type.DEFAULT, "rope scaling on a model without rotary embedding");
        }
    }

    /** The canonical form without rope scaling (the Llama family's configs before scaling was supported). */
    public ModelConfig(Architecture architecture, int vocabSize, int hidden, int intermediate, int layers, int heads,
                       int kvHeads, int headDim, double ropeTheta, double rmsNormEps, boolean tieEmbeddings,
                       boolean qkvBias, int slidingWindow, int maxPositions) {
        this(architecture, vocabSize, hidden, intermediate, layers, heads, kvHeads, headDim, ropeTheta, rmsNormEps,
                tieEmbeddings, qkvBias, slidingWindow, maxPositions, RopeScaling.NONE);
    }

    /** A config of an architecture other than Gemma 3's. */
    public ModelConfig(Architecture architecture, int vocabSize, int hidden, int intermediate, int layers, int heads,
                       int kvHeads, int headDim, double ropeTheta, double rmsNormEps, boolean tieEmbeddings,
                       boolean qkvBias, int slidingWindow, int maxPositions, RopeScaling ropeScaling) {
        this(architecture, vocabSize, hidden, intermediate, layers, heads, kvHeads, headDim, ropeTheta, rmsNormEps,
                tieEmbeddings, qkvBias, slidingWindow, maxPositions, ropeScaling, null);
    }

    /** This config with only its first {@code n} decoder blocks (1 to {@link #layers}). */
    public ModelConfig withLayers(int n) {
        if (n < 1 || n > layers) {
            throw new io.fsdp4j.UserError("model.layers=" + n + " is outside 1.." + layers + ", this model's blocks");
        }
        Gemma g = gemma == null ? null : gemma.firstLayers(n);
        return new ModelConfig(architecture, vocabSize, hidden, intermediate, n, heads, kvHeads, headDim,
                ropeTheta, rmsNormEps, tieEmbeddings, qkvBias, slidingWindow, maxPositions, ropeScaling, g);
    }

    /** This config with another rope scaling. */
    public ModelConfig withRopeScaling(RopeScaling scaling) {
        return new ModelConfig(architecture, vocabSize, hidden, intermediate, layers, heads, kvHeads, headDim,
                ropeTheta, rmsNormEps, tieEmbeddings, qkvBias, slidingWindow, maxPositions, scaling, gemma);
    }

    /**
     * A BLOOM config: C = hidden, F = 4C, NKV = NH, HS = C / NH, biases everywhere, no rotary embedding.
     *
     * @param layerNormEps layer_norm_epsilon
     * @param maxPositions the training length kept as max_position_embeddings (ALiBi sets no limit)
     */
    public static ModelConfig bloom(int vocabSize, int hidden, int layers, int heads, double layerNormEps,
                                    boolean tieEmbeddings, int maxPositions) {
        if (heads <= 0 || hidden % heads != 0) {
            throw new io.fsdp4j.UserError("model config: hidden_size (" + hidden
                    + ") must be a multiple of n_head (" + heads + ")");
        }
        return new ModelConfig(Architecture.BLOOM, vocabSize, hidden, 4 * hidden, layers, heads, heads,
                hidden / heads, 0.0, layerNormEps, tieEmbeddings, true, 0, maxPositions, RopeScaling.NONE);
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

    /**
     * Qwen2.5-7B's shapes with 20 of its 28 layers (5.75B parameters): 92 GB of fp32 training state (16 bytes a
     * parameter), more than one 80 GB GPU holds and less than a 128 GiB host: the model that trains on one such GPU
     * only with fsdp.cpu_offload.
     */
    public static ModelConfig qwen25_7b_20layers() {
        return new ModelConfig(Architecture.QWEN2, 152064, 3584, 18944, 20, 28, 4, 128, 1e6, 1e-6, false, true, 0, 32768);
    }

    /** Mistral-7B (v0.1)'s architecture. */
    public static ModelConfig mistral7b() {
        return new ModelConfig(Architecture.MISTRAL, 32000, 4096, 14336, 32, 32, 8, 128, 10000.0, 1e-5, false, false, 4096, 32768);
    }

    /** Llama-3-8B's architecture. */
    public static ModelConfig llama3_8b() {
        return new ModelConfig(Architecture.LLAMA, 128256, 4096, 14336, 32, 32, 8, 128, 500000.0, 1e-5, false, false, 0, 8192);
    }

    /** Llama-3.1-8B's architecture: Llama 3 with llama3 rope scaling to 128K positions. */
    public static ModelConfig llama31_8b() {
        return new ModelConfig(Architecture.LLAMA, 128256, 4096, 14336, 32, 32, 8, 128, 500000.0, 1e-5, false, false, 0,
                131072, RopeScaling.llama3(8.0, 1.0, 4.0, 8192));
    }

    /**
     * A Qwen3 (dense) config as the released checkpoints have it: vocabulary 151936, head size 128 (whatever C / NH
     * is), 8 key/value heads, rope theta 1e6, RMSNorm eps 1e-6, 40960 positions, no biases.
     */
    private static ModelConfig qwen3(int hidden, int intermediate, int layers, int heads, boolean tied) {
        return new ModelConfig(Architecture.QWEN3, 151936, hidden, intermediate, layers, heads, 8, 128, 1e6, 1e-6, tied,
                false, 0, 40960);
    }

    /** Qwen3-0.6B's architecture (tied embeddings; NH * HS = 2048 is twice C). */
    public static ModelConfig qwen3_0_6b() {
        return qwen3(1024, 3072, 28, 16, true);
    }

    /** Qwen3-1.7B's architecture (tied embeddings). */
    public static ModelConfig qwen3_1_7b() {
        return qwen3(2048, 6144, 28, 16, true);
    }

    /** Qwen3-4B's architecture (tied embeddings). */
    public static ModelConfig qwen3_4b() {
        return qwen3(2560, 9728, 36, 32, true);
    }

    /** Qwen3-8B's architecture. */
    public static ModelConfig qwen3_8b() {
        return qwen3(4096, 12288, 36, 32, false);
    }

    /** Qwen3-14B's architecture. */
    public static ModelConfig qwen3_14b() {
        return qwen3(5120, 17408, 40, 40, false);
    }

    /** Qwen3-32B's architecture (NH * HS = 8192 against C = 5120). */
    public static ModelConfig qwen3_32b() {
        return qwen3(5120, 25600, 64, 64, false);
    }

    /**
     * A Gemma 3 text config as the released checkpoints have it: RMSNorm eps 1e-6, rope theta 1e6 for the global
     * layers (with linear scaling 8 from 4B up), 1e4 for the sliding ones, one global layer in six, tied embeddings,
     * pad_token_id 0.
     */
    private static ModelConfig gemma3(int vocab, int hidden, int intermediate, int layers, int heads, int kvHeads,
                                      int headDim, double queryPreAttnScalar, int window, int maxPositions,
                                      RopeScaling scaling) {
        return new ModelConfig(Architecture.GEMMA3, vocab, hidden, intermediate, layers, heads, kvHeads, headDim, 1e6,
                1e-6, true, false, window, maxPositions, scaling,
                new Gemma(10000.0, queryPreAttnScalar, Gemma.pattern(layers, 6), 0));
    }

    /** Gemma-3-1B's architecture (Gemma3ForCausalLM). */
    public static ModelConfig gemma3_1b() {
        return gemma3(262144, 1152, 6912, 26, 4, 1, 256, 256, 512, 32768, RopeScaling.NONE);
    }

    /** Gemma-3-4B's language model. */
    public static ModelConfig gemma3_4b() {
        return gemma3(262208, 2560, 10240, 34, 8, 4, 256, 256, 1024, 131072, RopeScaling.linear(8.0));
    }

    /** Gemma-3-12B's language model. */
    public static ModelConfig gemma3_12b() {
        return gemma3(262208, 3840, 15360, 48, 16, 8, 256, 256, 1024, 131072, RopeScaling.linear(8.0));
    }

    /** Gemma-3-27B's language model (head size 128, query_pre_attn_scalar 168 = hidden / heads). */
    public static ModelConfig gemma3_27b() {
        return gemma3(262208, 5376, 21504, 62, 32, 16, 128, 168, 1024, 131072, RopeScaling.linear(8.0));
    }

    /**
     * A Gemma 2 config as the released checkpoints have it: vocabulary 256000, RMSNorm eps 1e-6, rope theta 1e4 for
     * every layer, sliding (4096 tokens) and global layers alternating, scores soft-capped at 50 and logits at 30, 8192
     * positions, tied embeddings, pad_token_id 0.
     */
    private static ModelConfig gemma2(int hidden, int intermediate, int layers, int heads, int kvHeads, int headDim,
                                      double queryPreAttnScalar) {
        return new ModelConfig(Architecture.GEMMA2, 256000, hidden, intermediate, layers, heads, kvHeads, headDim,
                10000.0, 1e-6, true, false, 4096, 8192, RopeScaling.NONE,
                new Gemma(10000.0, queryPreAttnScalar, Gemma.pattern(layers, 2), 0, 50.0, 30.0));
    }

    /** Gemma-2-2B's architecture. */
    public static ModelConfig gemma2_2b() {
        return gemma2(2304, 9216, 26, 8, 4, 256, 256);
    }

    /** Gemma-2-9B's architecture. */
    public static ModelConfig gemma2_9b() {
        return gemma2(3584, 14336, 42, 16, 8, 256, 256);
    }

    /** Gemma-2-27B's architecture (head size 128, query_pre_attn_scalar 144 = hidden / heads). */
    public static ModelConfig gemma2_27b() {
        return gemma2(4608, 36864, 46, 32, 16, 128, 144);
    }

    /**
     * Phi-3-mini-4k's architecture (head size 96, 32 key/value heads, a sliding window of 2047 tokens). The 128k
     * variant differs in its longrope factors, which a config.json brings (model.path), not a preset.
     */
    public static ModelConfig phi3Mini() {
        return new ModelConfig(Architecture.PHI3, 32064, 3072, 8192, 32, 32, 32, 96, 10000.0, 1e-5, false, false, 2047,
                4096);
    }

    /** Phi-3-medium-4k's architecture (40 query heads, 10 key/value heads of 128). */
    public static ModelConfig phi3Medium() {
        return new ModelConfig(Architecture.PHI3, 32064, 5120, 17920, 40, 40, 10, 128, 10000.0, 1e-5, false, false,
                2047, 4096);
    }

    /** BLOOM-560m's architecture. */
    public static ModelConfig bloom560m() {
        return bloom(250880, 1024, 24, 16, 1e-5, true, 2048);
    }

    /** A preset by its user-facing name, or a UserError listing the names. */
    public static ModelConfig preset(String name) {
        return switch (name) {
            case "tiny" -> tiny();
            case "qwen2.5-0.5b" -> qwen25_0_5b();
            case "qwen2.5-1.5b" -> qwen25_1_5b();
            case "qwen2.5-7b" -> qwen25_7b();
            case "qwen2.5-7b-20l" -> qwen25_7b_20layers();
            case "mistral-7b" -> mistral7b();
            case "llama-3-8b" -> llama3_8b();
            case "llama-3.1-8b" -> llama31_8b();
            case "qwen3-0.6b" -> qwen3_0_6b();
            case "qwen3-1.7b" -> qwen3_1_7b();
            case "qwen3-4b" -> qwen3_4b();
            case "qwen3-8b" -> qwen3_8b();
            case "qwen3-14b" -> qwen3_14b();
            case "qwen3-32b" -> qwen3_32b();
            case "gemma-2-2b" -> gemma2_2b();
            case "gemma-2-9b" -> gemma2_9b();
            case "gemma-2-27b" -> gemma2_27b();
            case "gemma-3-1b" -> gemma3_1b();
            case "gemma-3-4b" -> gemma3_4b();
            case "gemma-3-12b" -> gemma3_12b();
            case "gemma-3-27b" -> gemma3_27b();
            case "phi-3-mini" -> phi3Mini();
            case "phi-3-medium" -> phi3Medium();
            case "bloom-560m" -> bloom560m();
            default -> throw new io.fsdp4j.UserError("unknown model preset '" + name
                    + "'; presets: tiny, qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-7b, qwen2.5-7b-20l, mistral-7b, llama-3-8b, llama-3.1-8b, "
                    + "qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3-14b, qwen3-32b, gemma-2-2b, gemma-2-9b, gemma-2-27b, "
                    + "gemma-3-1b, gemma-3-4b, "
                    + "gemma-3-12b, gemma-3-27b, phi-3-mini, phi-3-medium, bloom-560m");
        };
    }
}
