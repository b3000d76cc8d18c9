package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.tensor.Tensor;

/**
 * A Llama-family model's rotary tables on its device, each uploaded once: the config's (its rope base and scaling);
 * longrope's short factors for sequences of at most original_max_position_embeddings tokens; and Gemma's sliding
 * layers' own (rope_local_base_freq, unscaled), which Gemma 2 shares with its global layers.
 */
final class LlamaRope {
    /** cos and sin, (P, HS/2) each. */
    record Tables(Tensor cos, Tensor sin) {}

    private final ModelConfig config;
    private final Tables main;
    /** longrope's tables for sequences of at most original_max_position_embeddings tokens (null for other ropes). */
    private final Tables shortSeqs;
    /** The tables of Gemma's sliding layers; null for the other families. */
    private final Tables local;

    LlamaRope(ModelConfig config, Backend backend) {
        this.config = config;
        this.main = upload(backend, RopeTable.of(config, config.maxPositions()));
        RopeScaling scaling = config.ropeScaling();
        this.shortSeqs = scaling.type() == RopeScaling.Type.LONGROPE
                && scaling.originalMaxPositions() < config.maxPositions()
                ? upload(backend, RopeTable.of(config, config.maxPositions(), scaling.originalMaxPositions())) : null;
        ModelConfig.Gemma gemma = config.gemma();
        boolean sameRope = gemma != null && gemma.localRopeTheta() == config.ropeTheta()
                && config.ropeScaling().type() == RopeScaling.Type.DEFAULT; // Gemma 2: one rope for every layer
        if (sameRope) {
            this.local = main;
        } else if (gemma != null && gemma.slidingLayers().contains(true)) {
            this.local = upload(backend, RopeTable.of(new ModelConfig(Architecture.LLAMA, config.vocabSize(),
                    config.hidden(), config.intermediate(), config.layers(), config.heads(), config.kvHeads(),
                    config.headDim(), gemma.localRopeTheta(), config.rmsNormEps(), config.tieEmbeddings(), false, 0,
                    config.maxPositions()), config.maxPositions()));
        } else {
            this.local = null;
        }
    }

    private static Tables upload(Backend backend, RopeTable table) {
        return new Tables(backend.upload(table.cos(), table.positions(), table.half()),
                backend.upload(table.sin(), table.positions(), table.half()));
    }

    /**
     * The tables of layer {@code layer} for sequences of {@code length} tokens: Gemma's sliding layers' own;
     * longrope's short factors up to original_max_position_embeddings and the long ones beyond, as transformers
     * chooses by the batch's length.
     */
    Tables of(int layer, int length) {
        ModelConfig.Gemma gemma = config.gemma();
        if (gemma != null && gemma.slidingLayers().get(layer)) {
            return local;
        }
        boolean shortSeq = shortSeqs != null && length <= config.ropeScaling().originalMaxPositions();
        return shortSeq ? shortSeqs : main;
    }
}
