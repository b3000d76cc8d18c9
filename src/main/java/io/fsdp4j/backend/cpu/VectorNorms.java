package io.fsdp4j.backend.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link CpuNorms}' element loops with the Vector API (loaded only when the JVM has jdk.incubator.vector): the loops
 * in which each value depends on its own inputs (a row's statistics, summed in order, stay scalar), the scalar
 * formulas' operations in the same order lane by lane. Each returns the first index it left to the caller's scalar
 * loop.
 */
final class VectorNorms {
    private static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;

    private VectorNorms() {}

    /** o[oo + j] = x[xo + j] * inv * w[wo + j] for j < c. */
    static int scaled(float[] o, int oo, float[] x, int xo, float inv, float[] w, int wo, int c) {
        int l = FLOATS.length(), j = 0;
        for (; j + l <= c; j += l) {
            FloatVector.fromArray(FLOATS, x, xo + j).mul(inv).mul(FloatVector.fromArray(FLOATS, w, wo + j))
                    .intoArray(o, oo + j);
        }
        return j;
    }

    /** dx[dxo + j] = inv * (g[go + j] * w[wo + j] - x[xo + j] * inv * mean) for j < c. */
    static int rmsInputGradient(float[] dx, int dxo, float[] g, int go, float[] w, int wo, float[] x, int xo,
                                float inv, float mean, int c) {
        int l = FLOATS.length(), j = 0;
        for (; j + l <= c; j += l) {
            FloatVector gw = FloatVector.fromArray(FLOATS, g, go + j).mul(FloatVector.fromArray(FLOATS, w, wo + j));
            FloatVector xhat = FloatVector.fromArray(FLOATS, x, xo + j).mul(inv);
            gw.sub(xhat.mul(mean)).mul(inv).intoArray(dx, dxo + j);
        }
        return j;
    }

    /** dw[dwo + j] += g[go + j] * x[xo + j] * inv for j < len. */
    static int rmsWeightGradient(float[] dw, int dwo, float[] g, int go, float[] x, int xo, float inv, int len) {
        int l = FLOATS.length(), j = 0;
        for (; j + l <= len; j += l) {
            FloatVector.fromArray(FLOATS, g, go + j).mul(FloatVector.fromArray(FLOATS, x, xo + j)).mul(inv)
                    .add(FloatVector.fromArray(FLOATS, dw, dwo + j)).intoArray(dw, dwo + j);
        }
        return j;
    }
}
