package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.function.UnaryOperator;

/**
 * The Llama family's RMSNorm: rmsnorm(x) * w, or Gemma's rmsnorm(x) * (1 + w) ({@link #weight}: C values in w's type
 * made before each use; since d(1 + w)/dw = 1 the gradient goes to w unchanged).
 */
final class LlamaNorm {
    private final Backend backend;
    private final ModelConfig config;
    private final boolean onePlusWeight;

    LlamaNorm(Backend backend, ModelConfig config) {
        this.backend = backend;
        this.config = config;
        this.onePlusWeight = config.gemma() != null;
    }

    float eps() {
        return (float) config.rmsNormEps();
    }

    /** The weight an RMSNorm multiplies by: w, or Gemma's 1 + w (in w's type). */
    Tensor weight(Tensor w) {
        if (!onePlusWeight) {
            return w;
        }
        Tensor t = backend.allocateForWrite(w.dtype(), w.shape());
        backend.fill(t, 1f);
        backend.add(t, w);
        return t;
    }

    /** out = rmsnorm(x) * weight (w or 1 + w); rstd saved. */
    void forward(Tensor out, Tensor rstd, Tensor x, Tensor w) {
        backend.rmsNormForward(out, rstd, x, weight(w), eps());
    }

    /** dx written, dw accumulated (or written): the gradient of 1 + w is w's. */
    void backward(Tensor dx, Tensor dw, Tensor dOut, Tensor x, Tensor w, Tensor rstd, boolean acc) {
        backend.rmsNormBackward(dx, dw, dOut, x, weight(w), rstd, acc);
    }

    /**
     * A base norm weight's gradient: its view of the unit's gradients, or when the base is frozen (base null) a
     * scratch of its {@code size} values, dropped (the norm's backward computes it beside dx, an N*C pass).
     */
    Tensor grad(Tensor base, UnaryOperator<Tensor> view, int size) {
        return base != null ? view.apply(base) : backend.allocateForWrite(DType.F32, size);
    }
}
