package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.Fp8Casts;
import io.fsdp4j.config.Fp8Recipe;
import io.fsdp4j.config.Precision;
import io.fsdp4j.tensor.Fp8Scaling;
import io.fsdp4j.tensor.Tensor;

/**
 * How the decoder blocks' linear layers (q|k|v, o, gate|up, down; BLOOM's four) compute: in the type of the gathered
 * parameters, or in fp8 ({@code fsdp.param_dtype: fp8}, {@link Backend#fp8LinearForward}: e4m3 operands, e5m2 output
 * gradients, a scale per tensor or, {@code fsdp.fp8_recipe: rowwise}, per row). Everything else, the embeddings, norms, attention, the head and the loss, LoRA's
 * adapters, stays in the parameters' type (bf16), as torchao's float8 training leaves them.
 */
public enum BlockLinears {
    /** The products in the type of the gathered parameters. */
    PARAM_DTYPE,
    /** The products in fp8, torchao's "tensorwise" recipe. */
    FP8,
    /** The products in fp8, torchao's "rowwise" recipe ({@link Fp8Scaling#ROW}). */
    FP8_ROWWISE;

    /** The blocks' linears for {@code fsdp.param_dtype}, tensorwise in fp8. */
    public static BlockLinears of(Precision paramDtype) {
        return of(paramDtype, Fp8Recipe.TENSORWISE);
    }

    /** The blocks' linears for {@code fsdp.param_dtype} and, in fp8, {@code fsdp.fp8_recipe}. */
    public static BlockLinears of(Precision paramDtype, Fp8Recipe recipe) {
        if (paramDtype != Precision.FP8) {
            return PARAM_DTYPE;
        }
        return recipe == Fp8Recipe.ROWWISE ? FP8_ROWWISE : FP8;
    }

    /**
     * A store for the fp8 casts of a block's forward recomputed for its backward ({@link Fp8Casts}): in fp8 a new one
     * ({@code weightGradients}: whether that backward computes the linears' weight gradients), else none (null).
     */
    Fp8Casts castsFor(boolean weightGradients) {
        return this == PARAM_DTYPE ? null : new Fp8Casts(weightGradients);
    }

    /**
     * A store for the inputs' amaxes of a block's forward whose activations the backward reads as they are
     * ({@link Fp8Casts#amaxesOnly}): in fp8 a new one, else none (null).
     */
    Fp8Casts amaxesFor(boolean weightGradients) {
        return this == PARAM_DTYPE ? null : Fp8Casts.amaxesOnly(weightGradients);
    }

    /** out (N,O) = x (N,I) @ weight (O,I)^T + bias (O, may be null). */
    void forward(Backend be, Tensor out, Tensor x, Tensor weight, Tensor bias) {
        forward(be, out, x, weight, bias, null);
    }

    /** {@link #forward(Backend, Tensor, Tensor, Tensor, Tensor)}, the fp8 casts kept in {@code casts} (may be null). */
    void forward(Backend be, Tensor out, Tensor x, Tensor weight, Tensor bias, Fp8Casts casts) {
        switch (this) {
            case PARAM_DTYPE -> be.linearForward(out, x, weight, bias);
            case FP8 -> be.fp8LinearForward(out, x, weight, bias, casts, Fp8Scaling.TENSOR);
            case FP8_ROWWISE -> be.fp8LinearForward(out, x, weight, bias, casts, Fp8Scaling.ROW);
        }
    }

    /** The backward of {@link #forward}: dx written, dWeight and dBias (+)= as {@link Backend#linearBackward}'s. */
    void backward(Backend be, Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                  boolean accumulate) {
        backward(be, dx, dWeight, dBias, dOut, x, weight, accumulate, null);
    }

    /** {@link #backward(Backend, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, boolean)}, reusing the forward's casts. */
    void backward(Backend be, Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                  boolean accumulate, Fp8Casts casts) {
        switch (this) {
            case PARAM_DTYPE -> be.linearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate);
            case FP8 -> be.fp8LinearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate, casts, Fp8Scaling.TENSOR);
            case FP8_ROWWISE -> be.fp8LinearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate, casts,
                    Fp8Scaling.ROW);
        }
    }
}
