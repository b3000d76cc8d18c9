package io.fsdp4j.backend.cpu;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link CpuAdamW}'s loop with the Vector API (loaded only when the JVM has jdk.incubator.vector): the scalar
 * formula's operations in the same order, lane by lane, the square root and its division by the bias correction in
 * double as there (a float vector widened to two double vectors, each correctly rounded, then narrowed): the same
 * bits as the scalar loop.
 */
final class VectorAdamW {
    private static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Double> DOUBLES = DoubleVector.SPECIES_PREFERRED;
    /** The upper half of a float vector's lanes: where the second double vector's values go. */
    private static final VectorMask<Float> UPPER = FLOATS.indexInRange(FLOATS.length() / 2, FLOATS.length()).not();

    private VectorAdamW() {}

    /** Whether the loop applies: a float vector is two double vectors. */
    static boolean usable() {
        return DOUBLES.length() * 2 == FLOATS.length();
    }

    /** Values [from, to) as {@link CpuAdamW#step}; returns the first index left to the scalar loop. */
    static int step(float[] p, int po, float[] g, int go, float[] ms, int mo, float[] vs, int vo, int from, int to,
                    float beta1, float beta2, float eps, float gradScale, double bc2Sqrt, float stepSize,
                    float decay) {
        int l = FLOATS.length(), i = from;
        float oneMinusBeta1 = 1 - beta1, oneMinusBeta2 = 1 - beta2;
        for (; i + l <= to; i += l) {
            FloatVector gi = FloatVector.fromArray(FLOATS, g, go + i).mul(gradScale);
            FloatVector mi = FloatVector.fromArray(FLOATS, ms, mo + i).mul(beta1).add(gi.mul(oneMinusBeta1));
            FloatVector vi = FloatVector.fromArray(FLOATS, vs, vo + i).mul(beta2)
                    .add(gi.mul(oneMinusBeta2).mul(gi));
            mi.intoArray(ms, mo + i);
            vi.intoArray(vs, vo + i);
            DoubleVector low = (DoubleVector) vi.convertShape(VectorOperators.F2D, DOUBLES, 0);
            DoubleVector high = (DoubleVector) vi.convertShape(VectorOperators.F2D, DOUBLES, 1);
            FloatVector root = (FloatVector) low.sqrt().div(bc2Sqrt).convertShape(VectorOperators.D2F, FLOATS, 0);
            root = root.blend((FloatVector) high.sqrt().div(bc2Sqrt).convertShape(VectorOperators.D2F, FLOATS, -1),
                    UPPER);
            FloatVector denom = root.add(eps);
            FloatVector pi = FloatVector.fromArray(FLOATS, p, po + i);
            pi.mul(decay).sub(mi.mul(stepSize).div(denom)).intoArray(p, po + i);
        }
        return i;
    }
}
