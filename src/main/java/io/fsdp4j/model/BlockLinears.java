package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.config.Precision;
import io.fsdp4j.tensor.Tensor;

/**
 * How the decoder blocks' linear layers (q|k|v, o, gate|up, down; BLOOM's four) compute: in the type of the gathered
 * parameters, or in fp8 ({@code fsdp.param_dtype: fp8}, {@link Backend#fp8LinearForward}: e4m3 operands, e5m2 output
 * gradients, a scale per tensor). Everything else, the embeddings, norms, attention, the head and the loss, LoRA's
 * adapters, stays in the parameters' type (bf16), as torchao's float8 training leaves them.
 *
 * <p>Under fp8 a product smaller than {@code fsdp.fp8_min_gflops} (2 x rows x inputs x outputs) stays in bf16, forward
 * and backward alike: casting both operands (an amax pass and a cast pass each, every call) costs more than fp8's
 * faster product saves on a small one (on an H200 at 2048 tokens, Qwen2.5-7B's q|k|v and o products ran 0.85x and
 * 0.30x in fp8, its MLP's 1.26x and 1.09x; docs/benchmarks.md), as torchao leaves such layers out of its float8
 * conversion. The choice depends on the shapes alone, so every backend and rank makes it alike.
 *
 * @param fp8      whether the products run in fp8 (where large enough)
 * @param minFlops the smallest product, in floating-point operations, that runs in fp8
 */
public record BlockLinears(boolean fp8, double minFlops) {
    /** The products in the type of the gathered parameters. */
    public static final BlockLinears PARAM_DTYPE = new BlockLinears(false, 0);

    /** The blocks' linears for {@code fsdp.param_dtype} and {@code fsdp.fp8_min_gflops}. */
    public static BlockLinears of(Precision paramDtype, double fp8MinGflops) {
        return paramDtype == Precision.FP8 ? new BlockLinears(true, fp8MinGflops * 1e9) : PARAM_DTYPE;
    }

    /** Whether the product of {@code rows} rows of {@code in} inputs by {@code out} outputs runs in fp8. */
    public boolean inFp8(long rows, long in, long out) {
        return fp8 && 2.0 * rows * in * out >= minFlops;
    }

    /** out (N,O) = x (N,I) @ weight (O,I)^T + bias (O, may be null). */
    void forward(Backend be, Tensor out, Tensor x, Tensor weight, Tensor bias) {
        if (inFp8(x.numel() / weight.dim(1), weight.dim(1), weight.dim(0))) {
            be.fp8LinearForward(out, x, weight, bias);
        } else {
            be.linearForward(out, x, weight, bias);
        }
    }

    /** The backward of {@link #forward}: dx written, dWeight and dBias (+)= as {@link Backend#linearBackward}'s. */
    void backward(Backend be, Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                  boolean accumulate) {
        if (inFp8(x.numel() / weight.dim(1), weight.dim(1), weight.dim(0))) {
            be.fp8LinearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate);
        } else {
            be.linearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate);
        }
    }
}
