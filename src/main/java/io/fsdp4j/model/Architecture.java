package io.fsdp4j.model;

import java.util.Arrays;
import java.util.stream.Collectors;

/** The Hugging Face model classes fsdp4j can load, by their {@code architectures} name in config.json. */
public enum Architecture {
    QWEN2("Qwen2ForCausalLM"),
    LLAMA("LlamaForCausalLM"),
    MISTRAL("MistralForCausalLM"),
    /** Qwen3 (dense): the Llama block with RMSNorms of each query and key head (q_norm, k_norm) before rotation. */
    QWEN3("Qwen3ForCausalLM"),
    /**
     * Phi-3: the Llama block with q|k|v fused in one qkv_proj and gate|up in one gate_up_proj, as the checkpoint
     * stores them; long-context variants rotate with longrope.
     */
    PHI3("Phi3ForCausalLM"),
    /**
     * Gemma 2: scaled embeddings, (1 + w) RMSNorms, four norms a block, GeGLU, sliding and global layers alternating,
     * soft-capped attention scores and logits ({@link LlamaModel}'s Gemma form).
     */
    GEMMA2("Gemma2ForCausalLM"),
    /**
     * Gemma 3 (text): Gemma 2's block with q/k head norms instead of the attention soft cap, and a rope base of its own
     * for the sliding layers ({@link LlamaModel}'s Gemma form).
     */
    GEMMA3("Gemma3ForCausalLM"),
    /** BLOOM: LayerNorms with biases, ALiBi instead of rotary embeddings, a GELU MLP ({@link BloomModel}). */
    BLOOM("BloomForCausalLM");

    private final String hfName;

    Architecture(String hfName) {
        this.hfName = hfName;
    }

    public String hfName() {
        return hfName;
    }

    /** Whether the architecture rotates q and k (the Llama family); BLOOM uses ALiBi biases instead. */
    public boolean usesRope() {
        return this != BLOOM;
    }

    /**
     * Whether the block has Gemma's form: embeddings scaled by sqrt(C), RMSNorms of (1 + w), norms after attention and
     * after the MLP too, GeGLU, sliding and global layers ({@link ModelConfig.Gemma}).
     */
    public boolean gemma() {
        return this == GEMMA2 || this == GEMMA3;
    }

    /** Whether each query and key head is RMS-normalised (q_norm, k_norm, weights of HS) before rotation. */
    public boolean normsQueriesAndKeys() {
        return this == QWEN3 || this == GEMMA3;
    }

    public static Architecture fromHfName(String name) {
        for (Architecture a : values()) {
            if (a.hfName.equals(name)) {
                return a;
            }
        }
        return null;
    }

    public static String supportedNames() {
        return Arrays.stream(values()).map(Architecture::hfName).collect(Collectors.joining(", "));
    }
}
