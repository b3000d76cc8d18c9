package io.fsdp4j.backend.cpu;

/**
 * AdamW's update of fp32 parameters from their gradients and moments, in PyTorch's order of operations (the bias
 * corrections in double), in ranges of {@link Parallel#GRAIN} values: each value's arithmetic depends on its own
 * inputs only. Vectorised ({@link VectorAdamW}) where the JVM has jdk.incubator.vector, with the same bits.
 */
public final class CpuAdamW {
    private static final boolean VECTORISED = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent()
            && VectorAdamW.usable();

    private CpuAdamW() {}

    /** One step over {@code count} values: p, m and v updated in place from g * gradScale. */
    public static void step(float[] p, int po, float[] g, int go, float[] ms, int mo, float[] vs, int vo, int count,
                            float lr, float beta1, float beta2, float eps, float weightDecay, long step,
                            float gradScale) {
        step(p, po, g, go, ms, mo, vs, vo, count, lr, beta1, beta2, eps, weightDecay, step, gradScale, true);
    }

    /** As above; {@code vectorised} false runs the scalar loop only (tests compare the two). */
    static void step(float[] p, int po, float[] g, int go, float[] ms, int mo, float[] vs, int vo, int count,
                     float lr, float beta1, float beta2, float eps, float weightDecay, long step, float gradScale,
                     boolean vectorised) {
        double bc1 = 1 - Math.pow(beta1, step);
        double bc2Sqrt = Math.sqrt(1 - Math.pow(beta2, step));
        float stepSize = (float) (lr / bc1);
        float decay = 1f - lr * weightDecay;
        Parallel.forRanges(count, Parallel.GRAIN, 12, (from, to) -> {
            int first = VECTORISED && vectorised ? VectorAdamW.step(p, po, g, go, ms, mo, vs, vo, from, to, beta1,
                    beta2, eps, gradScale, bc2Sqrt, stepSize, decay) : from;
            for (int i = first; i < to; i++) {
                float gi = g[go + i] * gradScale;
                float mi = beta1 * ms[mo + i] + (1 - beta1) * gi;
                float vi = beta2 * vs[vo + i] + (1 - beta2) * gi * gi;
                ms[mo + i] = mi;
                vs[vo + i] = vi;
                float denom = (float) (Math.sqrt(vi) / bc2Sqrt) + eps;
                p[po + i] = p[po + i] * decay - stepSize * mi / denom;
            }
        });
    }
}
