package io.fsdp4j.backend.cpu;

/**
 * SwiGLU, silu(gate) * up, forward and backward over rows of (gate | up) halves, and e^(x - shift) over a run of
 * values (attention's probabilities), with {@link Exp}'s e^x: vectorised ({@link VectorActivations}) where the JVM
 * has jdk.incubator.vector, the scalar form for the last values of a row and otherwise, both the same bits. A row is
 * one parallel item; every value depends on its own inputs only.
 */
public final class CpuActivations {
    private static final boolean VECTORISED = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent();

    private CpuActivations() {}

    /** out (rows, f) = silu(gate) * up, gate and up the halves of each row of gateUp (rows, 2f). */
    public static void swigluForward(float[] out, int oo, float[] gateUp, int go, int rows, int f) {
        Parallel.forEach(rows, 8L * f, r -> {
            int o = oo + r * f, g = go + r * 2 * f, j = 0;
            if (VECTORISED) {
                j = VectorActivations.swigluForward(out, o, gateUp, g, f);
            }
            for (; j < f; j++) {
                out[o + j] = swiglu(gateUp[g + j], gateUp[g + f + j]);
            }
        });
    }

    /** dGateUp (rows, 2f): the gradients of gate and up from dOut (rows, f). */
    public static void swigluBackward(float[] dGateUp, int dO, float[] dOut, int go, float[] gateUp, int guo, int rows,
                                      int f) {
        Parallel.forEach(rows, 10L * f, r -> {
            int d = dO + r * 2 * f, g = go + r * f, gu = guo + r * 2 * f, j = 0;
            if (VECTORISED) {
                j = VectorActivations.swigluBackward(dGateUp, d, dOut, g, gateUp, gu, f);
            }
            for (; j < f; j++) {
                float gate = gateUp[gu + j], up = gateUp[gu + f + j], dy = dOut[g + j];
                float sig = 1f / (1f + Exp.exp(-gate));
                dGateUp[d + j] = dy * up * sig * (1f + gate * (1f - sig));
                dGateUp[d + f + j] = dy * (gate * sig);
            }
        });
    }

    /** a[i] = e^(a[i] - shift) for i in [from, to), on the calling thread. */
    static void expShifted(float[] a, int from, int to, float shift) {
        int i = from;
        if (VECTORISED) {
            i = VectorActivations.expShifted(a, from, to, shift);
        }
        for (; i < to; i++) {
            a[i] = Exp.exp(a[i] - shift);
        }
    }

    /** gate / (1 + e^-gate) * up. */
    static float swiglu(float gate, float up) {
        return gate / (1f + Exp.exp(-gate)) * up;
    }
}
