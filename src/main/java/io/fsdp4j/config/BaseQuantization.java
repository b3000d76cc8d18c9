package io.fsdp4j.config;

/**
 * {@code lora.quantize}: how a LoRA run holds its frozen base's block linears (bitsandbytes' {@code load_in_4bit}
 * with {@code bnb_4bit_quant_type}).
 */
public enum BaseQuantization implements ConfigChoice {
    /** As every frozen parameter: in {@code fsdp.param_dtype} (the default). */
    NONE,
    /**
     * QLoRA: 4-bit NormalFloat as bitsandbytes stores it ({@code bnb_4bit_quant_type="nf4"}, blocks of 64 with an
     * fp32 absmax each, no double quantization; {@code io.fsdp4j.tensor.Nf4}), quantized when the base is loaded and
     * dequantized to {@code fsdp.param_dtype} after each gather. Embeddings, norms, biases and the head stay in
     * {@code fsdp.param_dtype}, as bitsandbytes leaves them.
     */
    NF4
}
