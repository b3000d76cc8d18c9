package io.fsdp4j.optim;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.stream.IntStream;

/**
 * The AdamW update on fp32 values in host memory (the optimizer of offloaded shards), in parallel over chunks of
 * {@value #CHUNK} elements. The arithmetic is the CPU backend's {@code adamw}, operation for operation (fp32, with the
 * square root and its bias correction in double), so offloaded training on CPU ranks follows the same trajectory
 * bit for bit. Offsets and counts are in floats.
 */
final class HostAdamW {
    static final int CHUNK = 1 << 14;
    private static final ValueLayout.OfFloat F = ValueLayout.JAVA_FLOAT;

    private HostAdamW() {}

    /** One step over {@code count} elements from {@code first} of param, grad, m and v (the same offsets in each). */
    static void step(MemorySegment param, MemorySegment grad, MemorySegment m, MemorySegment v, long first, long count,
                     float lr, float beta1, float beta2, float eps, float weightDecay, long step) {
        double bc1 = 1 - Math.pow(beta1, step);
        double bc2Sqrt = Math.sqrt(1 - Math.pow(beta2, step));
        float stepSize = (float) (lr / bc1);
        float decay = 1f - lr * weightDecay;
        int chunks = Math.toIntExact((count + CHUNK - 1) / CHUNK);
        IntStream.range(0, chunks).parallel().forEach(c -> {
            long from = first + (long) c * CHUNK, to = first + Math.min(count, (long) (c + 1) * CHUNK);
            for (long i = from; i < to; i++) {
                float gi = grad.getAtIndex(F, i);
                float mi = beta1 * m.getAtIndex(F, i) + (1 - beta1) * gi;
                float vi = beta2 * v.getAtIndex(F, i) + (1 - beta2) * gi * gi;
                m.setAtIndex(F, i, mi);
                v.setAtIndex(F, i, vi);
                float denom = (float) (Math.sqrt(vi) / bc2Sqrt) + eps;
                param.setAtIndex(F, i, param.getAtIndex(F, i) * decay - stepSize * mi / denom);
            }
        });
    }
}
