package io.fsdp4j.backend.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link CpuActivations}' row loops with the Vector API (loaded only when the JVM has jdk.incubator.vector): the
 * scalar formulas' operations in the same order, lane by lane. Each returns the first index it left to the caller's
 * scalar loop.
 */
final class VectorActivations {
    private static final VectorSpecies<Float> FLOATS = FloatVector.SPECIES_PREFERRED;

    private VectorActivations() {}

    static int swigluForward(float[] out, int o, float[] gateUp, int g, int f) {
        int l = FLOATS.length(), j = 0;
        for (; j + l <= f; j += l) {
            FloatVector gate = FloatVector.fromArray(FLOATS, gateUp, g + j);
            FloatVector up = FloatVector.fromArray(FLOATS, gateUp, g + f + j);
            gate.div(VectorExp.exp(gate.neg()).add(1f)).mul(up).intoArray(out, o + j);
        }
        return j;
    }

    static int swigluBackward(float[] dGateUp, int d, float[] dOut, int g, float[] gateUp, int gu, int f) {
        int l = FLOATS.length(), j = 0;
        for (; j + l <= f; j += l) {
            FloatVector gate = FloatVector.fromArray(FLOATS, gateUp, gu + j);
            FloatVector up = FloatVector.fromArray(FLOATS, gateUp, gu + f + j);
            FloatVector dy = FloatVector.fromArray(FLOATS, dOut, g + j);
            FloatVector one = gate.broadcast(1f);
            FloatVector sig = one.div(VectorExp.exp(gate.neg()).add(1f));
            dy.mul(up).mul(sig).mul(gate.mul(one.sub(sig)).add(1f)).intoArray(dGateUp, d + j);
            dy.mul(gate.mul(sig)).intoArray(dGateUp, d + f + j);
        }
        return j;
    }

    static int expShifted(float[] a, int from, int to, float shift) {
        int l = FLOATS.length(), i = from;
        for (; i + l <= to; i += l) {
            VectorExp.exp(FloatVector.fromArray(FLOATS, a, i).sub(shift)).intoArray(a, i);
        }
        return i;
    }
}
