package io.fsdp4j.backend.cpu;

/**
 * SwiGLU, silu(gate) * up, forward and backward over rows of (gate | up) halves, and e^(x - shift) over a run of
 * values (attention's probabilities), with {@link Exp}'s e^x: vectorised ({@link VectorActivations}) where the JVM
 * has jdk.incubator.vector, the scalar form for the last values of a row and otherwise, both the same bits. A row is
 * one parallel item; every value depends on its own inputs only. GELU (tanh approximation), GeGLU and the soft cap
 * cap * tanh(x / cap), forward and backward, element by element.
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

    // ---- GELU (tanh approximation), GeGLU, soft cap -----------------------------------------------------------

    private static final float GELU_K = (float) Math.sqrt(2.0 / Math.PI);
    private static final float GELU_C = 0.044715f;

    /** 0.5 x (1 + tanh(k (x + c x^3))), k = sqrt(2/pi), c = 0.044715. */
    static float gelu(float x) {
        float t = (float) Math.tanh(GELU_K * (x + GELU_C * x * x * x));
        return 0.5f * x * (1f + t);
    }

    /** 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3c x^2), t = tanh(k (x + c x^3)). */
    static float geluDerivative(float x) {
        float t = (float) Math.tanh(GELU_K * (x + GELU_C * x * x * x));
        return 0.5f * (1f + t) + 0.5f * x * (1f - t * t) * GELU_K * (1f + 3f * GELU_C * x * x);
    }

    /** o[oo + i] = gelu(x[xo + i]) for i < count. */
    public static void geluForward(float[] o, int oo, float[] xs, int xo, int count) {
        Parallel.forRanges(count, Parallel.GRAIN, 20, (from, to) -> {
            for (int i = from; i < to; i++) {
                o[oo + i] = gelu(xs[xo + i]);
            }
        });
    }

    /** d[dO + i] = dOut * gelu'(x) for i < count. */
    public static void geluBackward(float[] d, int dO, float[] g, int go, float[] xs, int xo, int count) {
        Parallel.forRanges(count, Parallel.GRAIN, 30, (from, to) -> {
            for (int i = from; i < to; i++) {
                d[dO + i] = g[go + i] * geluDerivative(xs[xo + i]);
            }
        });
    }

    /** out (rows, f) = gelu(gate) * up, gate and up the halves of each row of gateUp (rows, 2f). */
    public static void gegluForward(float[] o, int oo, float[] gu, int go, int rows, int f) {
        Parallel.forEach(rows, 24L * f, r -> {
            for (int j = 0; j < f; j++) {
                o[oo + r * f + j] = gelu(gu[go + r * 2 * f + j]) * gu[go + r * 2 * f + f + j];
            }
        });
    }

    /** dGateUp (rows, 2f): the gradients of gate and up from dOut (rows, f). */
    public static void gegluBackward(float[] d, int dO, float[] g, int go, float[] gu, int guo, int rows, int f) {
        Parallel.forEach(rows, 40L * f, r -> {
            for (int j = 0; j < f; j++) {
                float gate = gu[guo + r * 2 * f + j], up = gu[guo + r * 2 * f + f + j], dy = g[go + r * f + j];
                d[dO + r * 2 * f + j] = dy * up * geluDerivative(gate);
                d[dO + r * 2 * f + f + j] = dy * gelu(gate);
            }
        });
    }

    /** d[o + i] = cap * tanh(d[o + i] / cap) for i < n, in place. */
    public static void softcapForward(float[] d, int o, int n, float cap) {
        int chunk = 4096;
        Parallel.forEach((n + chunk - 1) / chunk, 20L * chunk, c -> {
            for (int i = c * chunk; i < Math.min(n, (c + 1) * chunk); i++) {
                d[o + i] = cap * (float) Math.tanh(d[o + i] / cap);
            }
        });
    }

    /** d[o + i] *= 1 - (capped / cap)^2 for i < n: the cap's slope, from its output. */
    public static void softcapBackward(float[] d, int o, float[] c, int co, int n, float cap) {
        for (int i = 0; i < n; i++) {
            float t = c[co + i] / cap;
            d[o + i] *= 1f - t * t;
        }
    }
}
