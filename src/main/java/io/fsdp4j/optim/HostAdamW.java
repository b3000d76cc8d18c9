package io.fsdp4j.optim;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.stream.IntStream;

/**
 * The AdamW update on fp32 values in host memory (the optimizer of offloaded shards), in parallel over chunks of
 * {@value #CHUNK} elements. The arithmetic is the CPU backend's {@code adamw}, operation for operation (fp32, with the
 * square root and its bias correction in double), so offloaded training on CPU ranks follows the same trajectory
 * bit for bit. Each chunk runs {@link VectorAdamW} (jdk.incubator.vector, about ten times faster, the same bits)
 * when the JVM has that module ({@code --add-modules jdk.incubator.vector}, which bin/fsdp4j adds when offloading),
 * else the scalar loop here. Offsets and counts are in floats; the segments must be native memory.
 */
public final class HostAdamW {
    static final int CHUNK = 1 << 14;
    private static final ValueLayout.OfFloat F = ValueLayout.JAVA_FLOAT;
    private static final boolean VECTORISED = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent()
            && !Boolean.getBoolean("fsdp4j.scalarAdamW");

    private HostAdamW() {}

    /** How the host update runs here, for the job's log. */
    public static String describe() {
        return VECTORISED ? "vectorised (" + VectorAdamW.describe() + ")"
                : "scalar (start the JVM with --add-modules jdk.incubator.vector for the vectorised loop)";
    }

    /** The hyperparameters of one update, with PyTorch's bias corrections folded in as the CPU backend does. */
    record Update(float beta1, float beta2, float eps, float stepSize, float decay, double bc2Sqrt) {
        static Update of(float lr, float beta1, float beta2, float eps, float weightDecay, long step) {
            double bc1 = 1 - Math.pow(beta1, step);
            return new Update(beta1, beta2, eps, (float) (lr / bc1), 1f - lr * weightDecay,
                    Math.sqrt(1 - Math.pow(beta2, step)));
        }
    }

    /** One step over {@code count} elements from {@code first} of param, grad, m and v (the same offsets in each). */
    static void step(MemorySegment param, MemorySegment grad, MemorySegment m, MemorySegment v, long first, long count,
                     float lr, float beta1, float beta2, float eps, float weightDecay, long step) {
        Update u = Update.of(lr, beta1, beta2, eps, weightDecay, step);
        int chunks = Math.toIntExact((count + CHUNK - 1) / CHUNK);
        IntStream.range(0, chunks).parallel().forEach(c -> {
            long from = first + (long) c * CHUNK, to = first + Math.min(count, (long) (c + 1) * CHUNK);
            if (VECTORISED) {
                VectorAdamW.update(param, grad, m, v, from, to, u);
            } else {
                scalar(param, grad, m, v, from, to, u);
            }
        });
    }

    /** Elements [from, to), one at a time. */
    static void scalar(MemorySegment param, MemorySegment grad, MemorySegment m, MemorySegment v, long from, long to,
                       Update u) {
        for (long i = from; i < to; i++) {
            float gi = grad.getAtIndex(F, i);
            float mi = u.beta1() * m.getAtIndex(F, i) + (1 - u.beta1()) * gi;
            float vi = u.beta2() * v.getAtIndex(F, i) + (1 - u.beta2()) * gi * gi;
            m.setAtIndex(F, i, mi);
            v.setAtIndex(F, i, vi);
            float denom = (float) (Math.sqrt(vi) / u.bc2Sqrt()) + u.eps();
            param.setAtIndex(F, i, param.getAtIndex(F, i) * u.decay() - u.stepSize() * mi / denom);
        }
    }
}
