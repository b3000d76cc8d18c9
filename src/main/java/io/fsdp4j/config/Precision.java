package io.fsdp4j.config;

import io.fsdp4j.tensor.DType;

/**
 * {@code fsdp.param_dtype}, {@code fsdp.reduce_dtype}: the float type of gathered parameters or of reductions.
 * {@code fp16} has the range of neither bf16 nor fp32 (largest finite 65504): training in it scales the loss
 * ({@code fsdp.loss_scale}) so that small gradients do not vanish, and skips a step whose gradients overflowed.
 * {@code fp8} (parameters only) gathers and computes in bf16 as {@code bf16} does, but for the decoder blocks' linear
 * layers, whose products run in fp8 (e4m3 and e5m2 with a scale per tensor: {@code io.fsdp4j.model.BlockLinears});
 * on GPUs from sm_89 on (Ada, Hopper), and emulated exactly on CPU ranks.
 */
public enum Precision implements ConfigChoice {
    BF16(DType.BF16),
    FP32(DType.F32),
    FP16(DType.F16),
    FP8(DType.BF16);

    private final DType dtype;

    Precision(DType dtype) {
        this.dtype = dtype;
    }

    /** The tensor type of this precision. */
    public DType dtype() {
        return dtype;
    }

    /** Whether values travel in 16 bits (rounded from the fp32 masters or accumulators). */
    public boolean isHalf() {
        return this != FP32;
    }

    @Override
    public String toString() {
        return spelling();
    }
}
