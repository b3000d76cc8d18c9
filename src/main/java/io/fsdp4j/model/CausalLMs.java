package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import java.util.List;

/**
 * The one place where a config's architecture picks its {@link CausalLM} implementation: every caller that builds
 * a model or needs its layout (training, scoring, export, checkpoints) goes through here.
 */
public final class CausalLMs {
    private CausalLMs() {}

    /** The model of {@code config}'s architecture on {@code backend}. */
    public static CausalLM create(ModelConfig config, Backend backend) {
        return switch (config.architecture()) {
            case LLAMA, QWEN2, MISTRAL, QWEN3, PHI3, GEMMA2, GEMMA3 -> new LlamaModel(config, backend);
            case BLOOM -> new BloomModel(config, backend);
        };
    }

    /**
     * The model with low-rank adapters ({@code lora}, on linears of the family's, {@link LoraSpec#linears}; null:
     * none, as {@link #create(ModelConfig, Backend)}).
     */
    public static CausalLM create(ModelConfig config, Backend backend, LoraSpec lora) {
        return create(config, backend, lora, BlockLinears.PARAM_DTYPE);
    }

    /** As above, the blocks' linear layers computing as {@code linears} says (fp8 or the parameters' type). */
    public static CausalLM create(ModelConfig config, Backend backend, LoraSpec lora, BlockLinears linears) {
        return switch (config.architecture()) {
            case LLAMA, QWEN2, MISTRAL, QWEN3, PHI3, GEMMA2, GEMMA3 -> new LlamaModel(config, backend, lora, linears);
            case BLOOM -> new BloomModel(config, backend, lora, linears);
        };
    }

    /** The units of {@code config}'s architecture, with Hugging Face names, without building the model. */
    public static List<UnitLayout> layout(ModelConfig config) {
        return switch (config.architecture()) {
            case LLAMA, QWEN2, MISTRAL, QWEN3, PHI3, GEMMA2, GEMMA3 -> LlamaModel.layout(config);
            case BLOOM -> BloomModel.layout(config);
        };
    }

    /**
     * The units of {@code config}'s architecture with LoRA's adapters appended to each block ({@code lora}; null:
     * none, as {@link #layout(ModelConfig)}), without building the model.
     */
    public static List<UnitLayout> layout(ModelConfig config, LoraSpec lora) {
        return switch (config.architecture()) {
            case LLAMA, QWEN2, MISTRAL, QWEN3, PHI3, GEMMA2, GEMMA3 -> LlamaModel.layout(config, lora);
            case BLOOM -> BloomModel.layout(config, lora);
        };
    }

    /**
     * The activations of {@code config}'s architecture for one micro-batch of {@code batch} sequences of {@code seq}
     * tokens, activations of {@code elementBytes} bytes an element (the gathered parameters' dtype), without
     * building the model.
     */
    public static ActivationSizes activationSizes(ModelConfig config, int seq, int batch, int elementBytes) {
        return switch (config.architecture()) {
            case LLAMA, QWEN2, MISTRAL, QWEN3, PHI3, GEMMA2, GEMMA3 ->
                    LlamaBlock.activationSizes(config, seq, batch, elementBytes);
            case BLOOM -> BloomModel.activationSizes(config, seq, batch, elementBytes);
        };
    }
}
