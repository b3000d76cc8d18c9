package io.fsdp4j.backend.cpu;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Loops over fp32 values in memory segments (native memory, or a heap {@code float[]} seen as a segment), split
 * across the cores ({@link Parallel}, which shares them with the rank threads) in fixed chunks of {@value #CHUNK}
 * values. Reductions add each chunk's partial sum in chunk order, so results depend only on the values, never on
 * scheduling: the CPU backend's gradient norms and those of offloaded (host-resident) gradient shards are the same
 * sums. Each chunk runs {@link VectorFloats} when the JVM has
 * jdk.incubator.vector, else the scalar loop (the sums then differ in their last bits from the vectorised ones, the
 * same for both kinds of memory still). Offsets and counts are in floats.
 */
public final class HostFloats {
    /** Values per parallel task (and per partial sum). */
    public static final int CHUNK = 1 << 16;
    private static final ValueLayout.OfFloat F = ValueLayout.JAVA_FLOAT;
    private static final boolean VECTORISED = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent()
            && VectorFloats.usable();

    private HostFloats() {}

    private static int chunks(long count) {
        return Math.toIntExact((count + CHUNK - 1) / CHUNK);
    }

    private static boolean vectorised(MemorySegment s) {
        return VECTORISED && VectorFloats.readable(s);
    }

    /** Sum of squares of {@code count} floats from {@code first}, accumulated in double. */
    public static double sumOfSquares(MemorySegment s, long first, long count) {
        int chunks = chunks(count);
        double[] partial = new double[chunks];
        Parallel.forEach(chunks, 2L * CHUNK, c -> {
            long from = first + (long) c * CHUNK, to = first + Math.min(count, (long) (c + 1) * CHUNK);
            if (vectorised(s)) {
                partial[c] = VectorFloats.sumOfSquares(s, from, to);
                return;
            }
            double sum = 0;
            for (long i = from; i < to; i++) {
                double v = s.getAtIndex(F, i);
                sum += v * v;
            }
            partial[c] = sum;
        });
        double total = 0;
        for (double p : partial) {
            total += p;
        }
        return total;
    }

    /** Multiplies {@code count} floats from {@code first} by {@code factor}. */
    public static void scale(MemorySegment s, long first, long count, float factor) {
        Parallel.forEach(chunks(count), CHUNK, c -> {
            long from = first + (long) c * CHUNK, to = first + Math.min(count, (long) (c + 1) * CHUNK);
            if (vectorised(s)) {
                VectorFloats.scale(s, from, to, factor);
                return;
            }
            for (long i = from; i < to; i++) {
                s.setAtIndex(F, i, s.getAtIndex(F, i) * factor);
            }
        });
    }
}
