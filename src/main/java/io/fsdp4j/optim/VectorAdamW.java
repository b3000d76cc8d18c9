package io.fsdp4j.optim;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link HostAdamW}'s update with the Vector API: the same operations in the same order on lanes (no fused
 * multiply-add; the square root and its division in double, through two double vectors per float vector), so every
 * element gets exactly the scalar loop's bits. The only class that uses jdk.incubator.vector: it is loaded only when
 * the JVM has that module.
 */
final class VectorAdamW {
    private static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Double> DOUBLES = DoubleVector.SPECIES_PREFERRED;
    private static final ByteOrder ORDER = ByteOrder.nativeOrder();

    private VectorAdamW() {}

    static String describe() {
        return "jdk.incubator.vector, " + FLOATS.length() + " floats a vector";
    }

    /** Elements [from, to): whole vectors, then the scalar loop for the tail. */
    static void update(MemorySegment param, MemorySegment grad, MemorySegment m, MemorySegment v, long from, long to,
                       HostAdamW.Update u) {
        int lanes = FLOATS.length();
        if (DOUBLES.length() * 2 != lanes) { // a float vector must be exactly two double vectors
            HostAdamW.scalar(param, grad, m, v, from, to, u);
            return;
        }
        long i = from;
        for (; i + lanes <= to; i += lanes) {
            long at = i * Float.BYTES;
            FloatVector g = FloatVector.fromMemorySegment(FLOATS, grad, at, ORDER);
            FloatVector mi = FloatVector.fromMemorySegment(FLOATS, m, at, ORDER).mul(u.beta1())
                    .add(g.mul(1 - u.beta1()));
            FloatVector vi = FloatVector.fromMemorySegment(FLOATS, v, at, ORDER).mul(u.beta2())
                    .add(g.mul(1 - u.beta2()).mul(g));
            mi.intoMemorySegment(m, at, ORDER);
            vi.intoMemorySegment(v, at, ORDER);
            // denom = (float) (sqrt((double) v) / bc2Sqrt) + eps, in two halves of double lanes
            DoubleVector low = ((DoubleVector) vi.convertShape(VectorOperators.F2D, DOUBLES, 0)).sqrt().div(u.bc2Sqrt());
            DoubleVector high = ((DoubleVector) vi.convertShape(VectorOperators.F2D, DOUBLES, 1)).sqrt().div(u.bc2Sqrt());
            FloatVector denom = ((FloatVector) low.convertShape(VectorOperators.D2F, FLOATS, 0))
                    .add((FloatVector) high.convertShape(VectorOperators.D2F, FLOATS, -1)) // lanes of the other half are 0
                    .add(u.eps());
            FloatVector p = FloatVector.fromMemorySegment(FLOATS, param, at, ORDER);
            p.mul(u.decay()).sub(mi.mul(u.stepSize()).div(denom)).intoMemorySegment(param, at, ORDER);
        }
        HostAdamW.scalar(param, grad, m, v, i, to, u);
    }
}
