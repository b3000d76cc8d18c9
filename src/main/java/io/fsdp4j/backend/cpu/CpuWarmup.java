package io.fsdp4j.backend.cpu;

import io.fsdp4j.backend.AttentionShape;
import java.lang.foreign.MemorySegment;

/**
 * Runs the CPU kernels on small made-up inputs, on a thread of its own, while the process starts (parsing the config,
 * reading the data, building the model: one thread's work, with a core to spare on a machine of two), so that the JIT
 * has compiled them when the ranks' first forward comes. Until C2 has compiled a kernel, its Vector API operations run
 * as Java loops over lanes, ten or more times slower, and the compiler's queue fills with those loops' own methods:
 * in the demo, the held-out evaluation before training and the first steps ran so.
 *
 * <p>A round is one step of a small Llama block (the {@code tiny} preset's widths, one sequence of {@value #T}
 * tokens): embedding, RMSNorm, the q|k|v, o, gate|up and down products with their rotary embedding, attention and
 * SwiGLU, the head's product and cross-entropy, every backward, AdamW, the gradient norm's sums, and a generation
 * step over a cache. The thread runs rounds until a rank starts ({@link Parallel#holdingCore}, the first rank thread)
 * or {@value #MAX_ROUNDS} rounds are done, each of its loops alone ({@link Parallel#runLoopsAlone}), on its own
 * arrays: the ranks' results are the same bits as without it, only sooner computed by compiled code.
 */
public final class CpuWarmup {
    /** Rounds at most: a model that takes long to load (a checkpoint's weights) leaves the thread no longer. */
    static final int MAX_ROUNDS = 400;
    /** Tokens of the round's sequence. */
    static final int T = 16;
    private static final int C = 32, F = 48, V = 64, NH = 2, NKV = 1, HS = 16, W = (NH + 2 * NKV) * HS;
    private static final AttentionShape SHAPE = new AttentionShape(1, T, NH, NKV, HS, 0);
    /** Sequences of the generation step (one query each, at position {@value #GEN_POSITION}). */
    private static final int GEN = 6, GEN_POSITION = 10;

    private static Thread thread;

    private CpuWarmup() {}

    /**
     * Starts the warm-up thread (once per process; later calls do nothing), on a machine of two cores or more (on
     * one, it would take the core that sets the run up). For a run whose ranks are CPU threads, as early as the run
     * knows it.
     */
    public static synchronized void start() {
        if (thread != null || Runtime.getRuntime().availableProcessors() < 2) {
            return;
        }
        thread = Thread.ofPlatform().daemon().name("fsdp4j-cpu-warmup").start(() -> {
            Parallel.runLoopsAlone();
            Round round = new Round();
            for (int i = 0; i < MAX_ROUNDS && !Parallel.ranksRunning(); i++) {
                round.run(i);
            }
        });
    }

    /** Waits for the thread (started or not) to end, at most {@code millis}: for tests. */
    static synchronized boolean awaitEnd(long millis) throws InterruptedException {
        if (thread == null) {
            return true;
        }
        thread.join(millis);
        return !thread.isAlive();
    }

    /** The arrays of one round, filled once with small values; each round writes over them. */
    static final class Round {
        final float[] table = values(V * C, 0.5f), x = new float[T * C], h = new float[T * C], rstd = new float[T];
        final float[] normW = values(C, 1f), wQkv = values(W * C, 0.1f), qkv = new float[T * W];
        final float[] cos = values(T * HS / 2, 1f), sin = values(T * HS / 2, 1f), attn = new float[T * NH * HS];
        final float[] lse = new float[NH * T], wO = values(C * NH * HS, 0.1f), y = new float[T * C];
        final float[] wGateUp = values(2 * F * C, 0.1f), gateUp = new float[T * 2 * F], act = new float[T * F];
        final float[] wDown = values(C * F, 0.1f), logits = new float[T * V];
        final float[] dTable = new float[V * C], dNormW = new float[C], dQkv = new float[T * W];
        final float[] dWQkv = new float[W * C], dAttn = new float[T * NH * HS], dWO = new float[C * NH * HS];
        final float[] dGateUp = new float[T * 2 * F], dWGateUp = new float[2 * F * C], dAct = new float[T * F];
        final float[] dWDown = new float[C * F], dY = new float[T * C], dH = new float[T * C];
        final float[] m = new float[W * C], v = new float[W * C], keys = new float[GEN * T * NKV * HS];
        final float[] values = new float[GEN * T * NKV * HS], genQkv = values(GEN * W, 0.5f);
        final float[] genOut = new float[GEN * NH * HS];
        final int[] ids = new int[T], targets = new int[T], positions = new int[T], genPositions = new int[GEN];
        final double[] rowLoss = new double[T];

        Round() {
            for (int t = 0; t < T; t++) {
                ids[t] = t * 37 % V;
                targets[t] = t % 5 == 0 ? -100 : (t * 11 + 3) % V; // some positions without loss, as prompts
                positions[t] = t;
            }
            java.util.Arrays.fill(genPositions, GEN_POSITION);
        }

        /** One round; {@code i} only varies the optimizer's step. */
        void run(int i) {
            // forward: embedding, norm, q|k|v with rotary embedding, attention, o, norm, gate|up, SwiGLU, down, head
            CpuEmbeddings.forward(x, 0, ids, 0, table, 0, T, C, V);
            CpuNorms.rmsForward(h, 0, rstd, 0, x, 0, normW, 0, T, C, 1e-5f);
            CpuMatmul.forward(qkv, 0, h, 0, wQkv, 0, null, 0, T, C, W);
            CpuEmbeddings.rotate(qkv, 0, W, positions, 0, T, cos, 0, sin, 0, HS / 2, NH + NKV, 1f);
            CpuAttention.forward(attn, 0, lse, 0, qkv, 0, null, SHAPE);
            CpuMatmul.forward(y, 0, attn, 0, wO, 0, null, 0, T, NH * HS, C);
            CpuMatmul.forward(gateUp, 0, h, 0, wGateUp, 0, null, 0, T, C, 2 * F);
            CpuActivations.swigluForward(act, 0, gateUp, 0, T, F);
            CpuMatmul.forward(y, 0, act, 0, wDown, 0, null, 0, T, F, C);
            CpuMatmul.forward(logits, 0, y, 0, table, 0, null, 0, T, C, V);
            CpuLoss.crossEntropy(logits, 0, targets, 0, T, V, 1f / T, rowLoss);
            // backward, in reverse
            CpuMatmul.backwardInput(dY, 0, logits, 0, table, 0, T, C, V);
            CpuMatmul.backwardWeight(dTable, 0, null, 0, logits, 0, y, 0, T, C, V);
            CpuMatmul.backwardInput(dAct, 0, dY, 0, wDown, 0, T, F, C);
            CpuMatmul.backwardWeight(dWDown, 0, null, 0, dY, 0, act, 0, T, F, C);
            CpuActivations.swigluBackward(dGateUp, 0, dAct, 0, gateUp, 0, T, F);
            CpuMatmul.backwardInput(dH, 0, dGateUp, 0, wGateUp, 0, T, C, 2 * F);
            CpuMatmul.backwardWeight(dWGateUp, 0, null, 0, dGateUp, 0, h, 0, T, C, 2 * F);
            CpuMatmul.backwardInput(dAttn, 0, dY, 0, wO, 0, T, NH * HS, C);
            CpuMatmul.backwardWeight(dWO, 0, null, 0, dY, 0, attn, 0, T, NH * HS, C);
            CpuAttention.backward(dQkv, 0, dAttn, 0, qkv, 0, attn, 0, lse, 0, null, SHAPE);
            CpuEmbeddings.rotate(dQkv, 0, W, positions, 0, T, cos, 0, sin, 0, HS / 2, NH + NKV, -1f);
            CpuMatmul.backwardInput(dH, 0, dQkv, 0, wQkv, 0, T, C, W);
            CpuMatmul.backwardWeight(dWQkv, 0, null, 0, dQkv, 0, h, 0, T, C, W);
            CpuNorms.rmsBackward(dY, 0, dNormW, 0, dH, 0, x, 0, normW, 0, rstd, 0, T, C);
            CpuEmbeddings.backward(dTable, 0, ids, 0, dY, 0, T, C);
            // the gradient norm's sums and scaling, then AdamW (on a copy of the weight, kept small)
            double norm = HostFloats.sumOfSquares(MemorySegment.ofArray(dWQkv), 0, dWQkv.length);
            HostFloats.scale(MemorySegment.ofArray(dWQkv), 0, dWQkv.length, (float) (1 / Math.sqrt(norm + 1)));
            System.arraycopy(wQkv, 0, dWGateUp, 0, wQkv.length);
            CpuAdamW.step(dWGateUp, 0, dWQkv, 0, m, 0, v, 0, W * C, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, i % 100 + 1, 1f);
            // a generation step: the new tokens' keys and values to the cache, attention over it, the greedy pick
            AttentionShape gen = new AttentionShape(GEN, 1, NH, NKV, HS, 0);
            CpuAttention.cacheAppend(keys, 0, values, 0, genQkv, 0, genPositions, 0, GEN, T, gen);
            CpuAttention.cached(genOut, 0, genQkv, 0, keys, 0, values, 0, genPositions, T, gen);
            CpuLoss.argmaxRows(logits, 0, GEN, V);
        }

        /** n values in (-scale, scale), the same every time. */
        private static float[] values(int n, float scale) {
            float[] a = new float[n];
            int s = 12345;
            for (int i = 0; i < n; i++) {
                s = s * 1103515245 + 12345;
                a[i] = scale * ((s >>> 8) / (float) (1 << 24) * 2 - 1);
            }
            return a;
        }
    }
}
