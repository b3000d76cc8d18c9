package io.fsdp4j.model;

/**
 * Model FLOPs utilisation as the PyTorch peer benchmark counts it: 6 FLOPs per parameter per token (forward and
 * backward) plus causal attention, 12 * L * NH * HS * T / 2 per token (T: the sequence, or the documents packed into
 * it, whose tokens attend within their own), against the GPU's dense bf16 peak
 * (989 TFLOP/s for an H100 or H200 SXM; recomputation under activation checkpointing is not counted).
 */
public final class Flops {
    public static final double HOPPER_BF16_PEAK = 989e12;

    private Flops() {}

    public static double perToken(ModelConfig model, long parameters, int seqLen) {
        return 6.0 * parameters + 12.0 * model.layers() * model.heads() * model.headDim() * seqLen / 2;
    }

    /** MFU of one device, or NaN on CPU ranks (no peak to compare with). */
    public static double mfu(double flopsPerToken, double tokensPerSecondPerDevice, boolean gpu) {
        return gpu ? flopsPerToken * tokensPerSecondPerDevice / HOPPER_BF16_PEAK : Double.NaN;
    }
}
