package io.fsdp4j.backend.cpu;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link HostFloats}' chunk loops with the Vector API (loaded only when the JVM has jdk.incubator.vector), and the
 * cross-entropy's row maximum ({@link CpuLoss#max}). The sum
 * of squares widens each float vector to two double vectors and accumulates per lane, then adds the lanes: a fixed
 * order for a given vector width, so its results are deterministic on a machine. A heap segment (the CPU backend's
 * {@code float[]} tensors) is read through its array, a native one (offloaded shards) directly: the same lanes and
 * the same sums either way.
 */
final class VectorFloats {
    private static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Double> DOUBLES = DoubleVector.SPECIES_PREFERRED;
    private static final ByteOrder ORDER = ByteOrder.nativeOrder();

    private VectorFloats() {}

    /** Whether the loops apply: a float vector is two double vectors. */
    static boolean usable() {
        return DOUBLES.length() * 2 == FLOATS.length();
    }

    /** The float vector at element i of s. */
    private static FloatVector load(MemorySegment s, float[] heap, long i) {
        return heap != null ? FloatVector.fromArray(FLOATS, heap, Math.toIntExact(s.address() / Float.BYTES + i))
                : FloatVector.fromMemorySegment(FLOATS, s, i * Float.BYTES, ORDER);
    }

    private static float[] heapArray(MemorySegment s) {
        return s.heapBase().map(base -> base instanceof float[] a ? a : null).orElse(null);
    }

    /** Whether {@code s} is native memory or a heap float[]: the memory these loops read. */
    static boolean readable(MemorySegment s) {
        return s.isNative() || heapArray(s) != null;
    }

    /** Sum of squares of floats [from, to), in double. */
    static double sumOfSquares(MemorySegment s, long from, long to) {
        int lanes = FLOATS.length();
        float[] heap = heapArray(s);
        DoubleVector low = DoubleVector.zero(DOUBLES), high = DoubleVector.zero(DOUBLES);
        long i = from;
        for (; i + lanes <= to; i += lanes) {
            FloatVector v = load(s, heap, i);
            DoubleVector a = (DoubleVector) v.convertShape(VectorOperators.F2D, DOUBLES, 0);
            DoubleVector b = (DoubleVector) v.convertShape(VectorOperators.F2D, DOUBLES, 1);
            low = low.add(a.mul(a));
            high = high.add(b.mul(b));
        }
        // the lanes in index order (reduceLanes leaves the order of a floating-point sum unspecified)
        double[] lanesOf = low.add(high).toArray();
        double sum = 0;
        for (double l : lanesOf) {
            sum += l;
        }
        for (; i < to; i++) {
            double v = s.getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT, i);
            sum += v * v;
        }
        return sum;
    }

    /** Floats [from, to) times factor. */
    static void scale(MemorySegment s, long from, long to, float factor) {
        int lanes = FLOATS.length();
        float[] heap = heapArray(s);
        long i = from;
        for (; i + lanes <= to; i += lanes) {
            FloatVector v = load(s, heap, i).mul(factor);
            if (heap != null) {
                v.intoArray(heap, Math.toIntExact(s.address() / Float.BYTES + i));
            } else {
                v.intoMemorySegment(s, i * Float.BYTES, ORDER);
            }
        }
        for (; i < to; i++) {
            s.setAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT, i, s.getAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT, i) * factor);
        }
    }

    /** {@link CpuLoss#max} of a[from, to): lane by lane, then across the lanes, then the tail. */
    static float max(float[] a, int from, int to) {
        int lanes = FLOATS.length();
        FloatVector m = FloatVector.broadcast(FLOATS, Float.NEGATIVE_INFINITY);
        int i = from;
        for (; i + lanes <= to; i += lanes) {
            m = m.max(FloatVector.fromArray(FLOATS, a, i));
        }
        float max = m.reduceLanes(VectorOperators.MAX);
        for (; i < to; i++) {
            max = Math.max(max, a[i]);
        }
        return max;
    }
}
