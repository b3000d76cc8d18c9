package io.fsdp4j.backend;

import io.fsdp4j.backend.cpu.CpuActivations;
import io.fsdp4j.backend.cpu.CpuAdamW;
import io.fsdp4j.backend.cpu.CpuAttention;
import io.fsdp4j.backend.cpu.CpuEmbeddings;
import io.fsdp4j.backend.cpu.CpuLoss;
import io.fsdp4j.backend.cpu.CpuMatmul;
import io.fsdp4j.backend.cpu.CpuMemory;
import io.fsdp4j.backend.cpu.CpuNorms;
import io.fsdp4j.backend.cpu.HostFloats;
import io.fsdp4j.backend.cpu.Parallel;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.HostStorage;
import io.fsdp4j.tensor.Nf4;
import io.fsdp4j.tensor.Fp8Scaling;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The reference backend: plain Java on heap arrays, fp32 compute (bf16 and fp16 tensors are stored rounded and
 * widened when read), parallel over the cores and deterministic. Every other backend is tested against it.
 */
public final class CpuBackend implements Backend {
    public static final CpuBackend INSTANCE = new CpuBackend();

    /** Linear backwards that computed a weight gradient (the dW product), counted for {@link #weightGradients}. */
    private final java.util.concurrent.atomic.AtomicLong weightGradients = new java.util.concurrent.atomic.AtomicLong();

    private CpuBackend() {}

    /** A backend of its own, computing as {@link #INSTANCE} does, its counts from zero (for tests that count work). */
    public static CpuBackend counting() {
        return new CpuBackend();
    }

    /** How many linear backwards of this backend computed a weight gradient (a frozen weight's computes none). */
    public long weightGradients() {
        return weightGradients.get();
    }

    @Override
    public String name() {
        return "cpu";
    }

    // ---- access to host arrays ------------------------------------------------------------------------

    /** The fp32 array behind an F32 tensor (its elements start at {@link #off}). */
    public static float[] f32(Tensor t) {
        if (t.storage() instanceof HostStorage.F32(float[] data)) {
            return data;
        }
        throw new IllegalArgumentException("expected an F32 host tensor, got " + t);
    }

    public static int[] i32(Tensor t) {
        if (t.storage() instanceof HostStorage.I32(int[] data)) {
            return data;
        }
        throw new IllegalArgumentException("expected an I32 host tensor, got " + t);
    }

    public static short[] bf16(Tensor t) {
        if (t.storage() instanceof HostStorage.Bf16(short[] data)) {
            return data;
        }
        throw new IllegalArgumentException("expected a BF16 host tensor, got " + t);
    }

    /** The raw 16-bit elements behind a BF16 or F16 tensor (their type: {@link Tensor#dtype}). */
    public static short[] halves(Tensor t) {
        return switch (t.storage()) {
            case HostStorage.Bf16(short[] data) -> data;
            case HostStorage.F16(short[] data) -> data;
            default -> throw new IllegalArgumentException("expected a BF16 or F16 host tensor, got " + t);
        };
    }

    public static int off(Tensor t) {
        return Math.toIntExact(t.offset());
    }

    private static int n(Tensor t) {
        return Math.toIntExact(t.numel());
    }

    private static void requireSameSize(Tensor a, Tensor b) {
        if (a.numel() != b.numel()) {
            throw new IllegalArgumentException("size mismatch: " + a + " vs " + b);
        }
    }

    // ---- memory -------------------------------------------------------------------------------------

    @Override
    public boolean computesIn(DType dtype) {
        return dtype == DType.F32;
    }

    /** A scope whose arrays later allocations on the closing thread reuse ({@link CpuMemory}). */
    @Override
    public MemoryScope newScope() {
        return CpuMemory.newScope(POISON);
    }

    @Override
    public Tensor allocate(DType dtype, int... shape) {
        return new Tensor(dtype, shape, CpuMemory.allocate(dtype, Math.toIntExact(Tensor.product(shape)), true), 0);
    }

    /**
     * Set (the test suite sets it) to fill every {@link #allocateForWrite} buffer with NaN: an element that the op
     * said it writes but does not then shows in every number computed from it.
     */
    public static final String POISON_PROPERTY = "fsdp4j.poisonUnwritten";
    private static final boolean POISON = Boolean.getBoolean(POISON_PROPERTY);

    @Override
    public Tensor allocateForWrite(DType dtype, int... shape) {
        Tensor t = new Tensor(dtype, shape, CpuMemory.allocate(dtype, Math.toIntExact(Tensor.product(shape)), false), 0);
        if (POISON && dtype != DType.I32) {
            fill(t, Float.NaN);
        }
        return t;
    }

    @Override
    public Tensor upload(float[] values, int... shape) {
        return new Tensor(DType.F32, shape, new HostStorage.F32(values.clone()), 0);
    }

    @Override
    public Tensor uploadInts(int[] values, int... shape) {
        return new Tensor(DType.I32, shape, new HostStorage.I32(values.clone()), 0);
    }

    @Override
    public float[] toFloats(Tensor t) {
        float[] result = new float[n(t)];
        switch (t.storage()) {
            case HostStorage.F32(float[] d) -> System.arraycopy(d, off(t), result, 0, result.length);
            case HostStorage.Bf16(short[] d) -> {
                for (int i = 0; i < result.length; i++) {
                    result[i] = Half.fromBf16(d[off(t) + i]);
                }
            }
            case HostStorage.F16(short[] d) -> {
                for (int i = 0; i < result.length; i++) {
                    result[i] = Half.fromF16(d[off(t) + i]);
                }
            }
            default -> throw new IllegalArgumentException("not a float host tensor: " + t);
        }
        return result;
    }

    @Override
    public int[] toInts(Tensor t) {
        int[] result = new int[n(t)];
        System.arraycopy(i32(t), off(t), result, 0, result.length);
        return result;
    }

    @Override
    public MemorySegment allocateHost(long floats) {
        return Arena.ofAuto().allocate(ValueLayout.JAVA_FLOAT, floats); // zero-filled
    }

    @Override
    public HostCopy copyFromHost(MemorySegment src, Tensor dst) {
        MemorySegment.copy(src, ValueLayout.JAVA_FLOAT, 0, f32(dst), off(dst), n(dst));
        return () -> { };
    }

    @Override
    public HostCopy copyToHost(Tensor src, MemorySegment dst) {
        MemorySegment.copy(f32(src), off(src), dst, ValueLayout.JAVA_FLOAT, 0, n(src));
        return () -> { };
    }

    @Override
    public void waitForHostCopies() {
        // copies on the CPU backend are done when they return
    }

    @Override
    public void fill(Tensor t, float value) {
        switch (t.storage()) {
            case HostStorage.F32(float[] d) -> java.util.Arrays.fill(d, off(t), off(t) + n(t), value);
            case HostStorage.Bf16(short[] d) -> java.util.Arrays.fill(d, off(t), off(t) + n(t), Half.toBf16(value));
            case HostStorage.F16(short[] d) -> java.util.Arrays.fill(d, off(t), off(t) + n(t), Half.toF16(value));
            case HostStorage.I32(int[] d) -> java.util.Arrays.fill(d, off(t), off(t) + n(t), (int) value);
            default -> throw new IllegalArgumentException("not a host tensor: " + t);
        }
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        requireSameSize(src, dst);
        int count = n(src), so = off(src), dO = off(dst);
        switch (src.storage()) {
            case HostStorage.F32(float[] s) when dst.storage() instanceof HostStorage.F32(float[] d) ->
                    System.arraycopy(s, so, d, dO, count);
            case HostStorage.Bf16(short[] s) when dst.storage() instanceof HostStorage.Bf16(short[] d) ->
                    System.arraycopy(s, so, d, dO, count);
            case HostStorage.F16(short[] s) when dst.storage() instanceof HostStorage.F16(short[] d) ->
                    System.arraycopy(s, so, d, dO, count);
            case HostStorage.I32(int[] s) when dst.storage() instanceof HostStorage.I32(int[] d) ->
                    System.arraycopy(s, so, d, dO, count);
            case HostStorage.F32(float[] s) when dst.storage() instanceof HostStorage.Bf16(short[] d) ->
                    Parallel.forRanges(count, Parallel.GRAIN, 4, (from, to) -> {
                        for (int i = from; i < to; i++) {
                            d[dO + i] = Half.toBf16(s[so + i]);
                        }
                    });
            case HostStorage.Bf16(short[] s) when dst.storage() instanceof HostStorage.F32(float[] d) ->
                    Parallel.forRanges(count, Parallel.GRAIN, 4, (from, to) -> {
                        for (int i = from; i < to; i++) {
                            d[dO + i] = Half.fromBf16(s[so + i]);
                        }
                    });
            case HostStorage.F32(float[] s) when dst.storage() instanceof HostStorage.F16(short[] d) ->
                    Parallel.forRanges(count, Parallel.GRAIN, 4, (from, to) -> {
                        for (int i = from; i < to; i++) {
                            d[dO + i] = Half.toF16(s[so + i]);
                        }
                    });
            case HostStorage.F16(short[] s) when dst.storage() instanceof HostStorage.F32(float[] d) ->
                    Parallel.forRanges(count, Parallel.GRAIN, 4, (from, to) -> {
                        for (int i = from; i < to; i++) {
                            d[dO + i] = Half.fromF16(s[so + i]);
                        }
                    });
            default -> throw new IllegalArgumentException("cannot copy " + src + " to " + dst);
        }
    }

    @Override
    public void add(Tensor dst, Tensor src) {
        requireSameSize(src, dst);
        int count = n(src), so = off(src), dO = off(dst);
        float[] s = src.dtype() == DType.F32 ? f32(src) : toFloats(src);
        int sOff = src.dtype() == DType.F32 ? so : 0;
        switch (dst.storage()) {
            case HostStorage.F32(float[] d) -> {
                for (int i = 0; i < count; i++) {
                    d[dO + i] += s[sOff + i];
                }
            }
            case HostStorage.Bf16(short[] d) -> {
                for (int i = 0; i < count; i++) {
                    d[dO + i] = Half.toBf16(Half.fromBf16(d[dO + i]) + s[sOff + i]);
                }
            }
            case HostStorage.F16(short[] d) -> {
                for (int i = 0; i < count; i++) {
                    d[dO + i] = Half.toF16(Half.fromF16(d[dO + i]) + s[sOff + i]);
                }
            }
            default -> throw new IllegalArgumentException("cannot add into " + dst);
        }
    }

    @Override
    public void scale(Tensor t, float factor) {
        HostFloats.scale(MemorySegment.ofArray(f32(t)), off(t), n(t), factor);
    }

    /** Summed as {@link HostFloats#sumOfSquares}: the same sum as that of offloaded gradient shards. */
    @Override
    public double sumOfSquares(Tensor t) {
        float[] d = t.dtype() == DType.F32 ? f32(t) : toFloats(t);
        int o = t.dtype() == DType.F32 ? off(t) : 0;
        return HostFloats.sumOfSquares(MemorySegment.ofArray(d), o, n(t));
    }

    // ---- ops ----------------------------------------------------------------------------------------

    @Override
    public void embeddingForward(Tensor out, Tensor ids, Tensor table) {
        CpuEmbeddings.forward(f32(out), off(out), i32(ids), off(ids), f32(table), off(table), n(ids), table.dim(1),
                table.dim(0));
    }

    @Override
    public void embeddingBackward(Tensor dTable, Tensor ids, Tensor dOut) {
        CpuEmbeddings.backward(f32(dTable), off(dTable), i32(ids), off(ids), f32(dOut), off(dOut), n(ids),
                dTable.dim(1));
    }

    @Override
    public void rmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) {
        int c = weight.dim(0);
        CpuNorms.rmsForward(f32(out), off(out), f32(rstd), off(rstd), f32(x), off(x), f32(weight), off(weight),
                n(x) / c, c, eps);
    }

    @Override
    public void rmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd) {
        int c = weight.dim(0);
        CpuNorms.rmsBackward(f32(dx), off(dx), f32(dWeight), off(dWeight), f32(dOut), off(dOut), f32(x), off(x),
                f32(weight), off(weight), f32(rstd), off(rstd), n(x) / c, c);
    }

    @Override
    public void layerNormForward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias, float eps) {
        int c = weight.dim(0);
        CpuNorms.layerForward(f32(out), off(out), f32(mean), off(mean), f32(rstd), off(rstd), f32(x), off(x),
                f32(weight), off(weight), f32(bias), off(bias), n(x) / c, c, eps);
    }

    @Override
    public void layerNormBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                                  Tensor mean, Tensor rstd) {
        int c = weight.dim(0);
        CpuNorms.layerBackward(f32(dx), off(dx), f32(dWeight), off(dWeight), f32(dBias), off(dBias), f32(dOut),
                off(dOut), f32(x), off(x), f32(weight), off(weight), f32(mean), off(mean), f32(rstd), off(rstd),
                n(x) / c, c);
    }

    @Override
    public void linearForward(Tensor out, Tensor x, Tensor weight, Tensor bias) {
        int o = weight.dim(0), in = weight.dim(1), rows = n(x) / in;
        CpuMatmul.forward(f32(out), off(out), f32(x), off(x), f32(weight), off(weight),
                bias == null ? null : f32(bias), bias == null ? 0 : off(bias), rows, in, o);
    }

    /**
     * Whether a linear's backward is asked for no parameter gradient (dWeight null: a frozen weight); a bias gradient
     * without the weight's is refused. Both backends' linearBackward ask it.
     */
    static boolean frozenWeight(Tensor dWeight, Tensor dBias) {
        if (dWeight == null && dBias != null) {
            throw new IllegalArgumentException("a linear's bias gradient without its weight's: pass both or neither");
        }
        return dWeight == null;
    }

    @Override
    public void linearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight) {
        int o = weight.dim(0), in = weight.dim(1), rows = n(x) / in;
        if (dx != null) {
            CpuMatmul.backwardInput(f32(dx), off(dx), f32(dOut), off(dOut), f32(weight), off(weight), rows, in, o);
        }
        if (frozenWeight(dWeight, dBias)) {
            return;
        }
        weightGradients.incrementAndGet();
        CpuMatmul.backwardWeight(f32(dWeight), off(dWeight), dBias == null ? null : f32(dBias),
                dBias == null ? 0 : off(dBias), f32(dOut), off(dOut), f32(x), off(x), rows, in, o);
    }

    @Override
    public void fp8LinearForward(Tensor out, Tensor x, Tensor weight, Tensor bias, Fp8Casts casts,
                                 Fp8Scaling scaling) {
        if (!Fp8Products.applies(x.numel() / weight.dim(1), weight.dim(1), weight.dim(0))) {
            linearForward(out, x, weight, bias);
            return;
        }
        Fp8Products.forward(out, x, weight, bias, cpuStore(casts), scaling);
    }

    /** The store a CPU product uses: none for one that keeps only amaxes ({@link Fp8Casts#amaxesOnly}). */
    private static Fp8Casts cpuStore(Fp8Casts casts) {
        return casts == null || casts.amaxesOnly() ? null : casts;
    }

    @Override
    public void fp8LinearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                                  boolean accumulate, Fp8Casts casts, Fp8Scaling scaling) {
        if (!Fp8Products.applies(x.numel() / weight.dim(1), weight.dim(1), weight.dim(0))) {
            linearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate);
            return;
        }
        if (!frozenWeight(dWeight, dBias)) {
            weightGradients.incrementAndGet();
        }
        Fp8Products.backward(dx, dWeight, dBias, dOut, x, weight, accumulate, cpuStore(casts), scaling);
    }

    @Override
    public void ropeForward(Tensor x, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin) {
        rotate(x, rotatedHeads, positions, cos, sin, 1f);
    }

    @Override
    public void ropeBackward(Tensor dx, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin) {
        rotate(dx, rotatedHeads, positions, cos, sin, -1f);
    }

    /** Rotation by +angle (forward) or -angle (backward: the transpose of a rotation is its inverse). */
        private static void rotate(Tensor x, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin, float sign) {
        int rows = n(positions);
        CpuEmbeddings.rotate(f32(x), off(x), n(x) / rows, i32(positions), off(positions), rows, f32(cos), off(cos),
                f32(sin), off(sin), cos.dim(1), rotatedHeads, sign);
    }

    @Override
    public void attentionForward(Tensor out, Tensor lse, Tensor qkv, Tensor documentStarts, AttentionShape shape) {
        CpuAttention.forward(f32(out), off(out), f32(lse), off(lse), f32(qkv), off(qkv), starts(documentStarts), shape);
    }

    @Override
    public void attentionBackward(Tensor dQkv, Tensor dOut, Tensor qkv, Tensor out, Tensor lse, Tensor documentStarts,
                                  AttentionShape shape) {
        CpuAttention.backward(f32(dQkv), off(dQkv), f32(dOut), off(dOut), f32(qkv), off(qkv), f32(out), off(out),
                f32(lse), off(lse), starts(documentStarts), shape);
    }

    /** The document start of each row, or null when every sequence is one document. */
    private static int[] starts(Tensor documentStarts) {
        return documentStarts == null ? null : CpuBackend.INSTANCE.toInts(documentStarts);
    }

    @Override
    public void kvCacheAppend(Tensor keys, Tensor values, Tensor qkv, Tensor positions, AttentionShape shape) {
        CpuAttention.cacheAppend(f32(keys), off(keys), f32(values), off(values), f32(qkv), off(qkv), i32(positions),
                off(positions), n(qkv) / shape.qkvWidth(), keys.dim(1), shape);
    }

    @Override
    public void attentionCached(Tensor out, Tensor qkv, Tensor keys, Tensor values, Tensor positions,
                                AttentionShape shape) {
        int[] pos = java.util.Arrays.copyOfRange(i32(positions), off(positions), off(positions) + n(positions));
        CpuAttention.cached(f32(out), off(out), f32(qkv), off(qkv), f32(keys), off(keys), f32(values), off(values),
                pos, keys.dim(1), shape);
    }

    @Override
    public void swigluForward(Tensor out, Tensor gateUp) {
        int f = gateUp.dim(-1) / 2, rows = n(gateUp) / (2 * f);
        CpuActivations.swigluForward(f32(out), off(out), f32(gateUp), off(gateUp), rows, f);
    }

    @Override
    public void swigluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp) {
        int f = gateUp.dim(-1) / 2, rows = n(gateUp) / (2 * f);
        CpuActivations.swigluBackward(f32(dGateUp), off(dGateUp), f32(dOut), off(dOut), f32(gateUp), off(gateUp), rows,
                f);
    }

    @Override
    public void geluForward(Tensor out, Tensor x) {
        CpuActivations.geluForward(f32(out), off(out), f32(x), off(x), n(x));
    }

    @Override
    public void geluBackward(Tensor dx, Tensor dOut, Tensor x) {
        CpuActivations.geluBackward(f32(dx), off(dx), f32(dOut), off(dOut), f32(x), off(x), n(x));
    }


    @Override
    public int[] argmaxRows(Tensor logits) {
        int vocab = logits.dim(-1), rows = n(logits) / vocab;
        return CpuLoss.argmaxRows(f32(logits), off(logits), rows, vocab);
    }

    @Override
    public double crossEntropy(Tensor logits, Tensor targets, float gradScale, Tensor lossPerRow) {
        int vocab = logits.dim(-1), rows = n(logits) / vocab;
        double[] rowLoss = new double[rows];
        double total = CpuLoss.crossEntropy(f32(logits), off(logits), i32(targets), off(targets), rows, vocab,
                gradScale, rowLoss);
        if (lossPerRow != null) {
            float[] l = f32(lossPerRow);
            for (int r = 0; r < rows; r++) {
                l[off(lossPerRow) + r] = (float) rowLoss[r];
            }
        }
        return total;
    }

    @Override
    public void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, float lr, float beta1, float beta2, float eps,
                      float weightDecay, long step, float gradScale) {
        requireSameSize(param, grad);
        CpuAdamW.step(f32(param), off(param), f32(grad), off(grad), f32(m), off(m), f32(v), off(v), n(param), lr, beta1,
                beta2, eps, weightDecay, step, gradScale);
    }

    // ---- ops added for the model families of 2026 (Qwen3, Gemma 3) --------------------------------------

    @Override
    public void headRmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, int firstHead, float eps) {
        int rows = rstd.dim(0);
        requireSameSize(out, x);
        CpuNorms.headRmsForward(f32(out), off(out), f32(rstd), off(rstd), f32(x), off(x), f32(weight), off(weight),
                rows, rstd.dim(1), weight.dim(0), n(x) / rows, firstHead, eps);
    }

    /** dWeight first, then dx: dx may be dOut, whose values the weight gradient needs. */
    @Override
    public void headRmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd,
                                    int firstHead, boolean accumulate) {
        int rows = rstd.dim(0);
        requireSameSize(dx, x);
        requireSameSize(dOut, x);
        CpuNorms.headRmsBackward(f32(dx), off(dx), f32(dWeight), off(dWeight), f32(dOut), off(dOut), f32(x), off(x),
                f32(weight), off(weight), f32(rstd), off(rstd), rows, rstd.dim(1), weight.dim(0), n(x) / rows,
                firstHead, accumulate);
    }

    @Override
    public void gegluForward(Tensor out, Tensor gateUp) {
        int f = gateUp.dim(-1) / 2;
        CpuActivations.gegluForward(f32(out), off(out), f32(gateUp), off(gateUp), n(gateUp) / (2 * f), f);
    }

    @Override
    public void gegluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp) {
        int f = gateUp.dim(-1) / 2;
        CpuActivations.gegluBackward(f32(dGateUp), off(dGateUp), f32(dOut), off(dOut), f32(gateUp), off(gateUp),
                n(gateUp) / (2 * f), f);
    }

    @Override
    public void softcapForward(Tensor x, float cap) {
        CpuActivations.softcapForward(f32(x), off(x), n(x), cap);
    }

    @Override
    public void softcapBackward(Tensor dx, Tensor capped, float cap) {
        CpuActivations.softcapBackward(f32(dx), off(dx), f32(capped), off(capped), n(dx), cap);
    }

    @Override
    public void dropout(Tensor out, Tensor x, double p, long seed, long firstIndex) {
        requireSameSize(out, x);
        int threshold = DropoutMask.threshold(p);
        float scale = DropoutMask.scale(p);
        float[] o = f32(out), xs = f32(x);
        int oo = off(out), xo = off(x);
        Parallel.forRanges(n(x), Parallel.GRAIN, 16, (from, to) -> {
            for (int e = from; e < to; e++) {
                o[oo + e] = DropoutMask.keeps(seed, firstIndex + e, threshold) ? xs[xo + e] * scale : 0f;
            }
        });
    }

    @Override
    public void dequantizeNf4(Tensor out, Tensor codes, Tensor absmax) {
        int n = n(out);
        if (n % Nf4.BLOCK != 0 || codes.numel() * 8 != n || absmax.numel() * Nf4.BLOCK != n) {
            throw new IllegalArgumentException("NF4 dequantization of " + codes + " and " + absmax + " into " + out);
        }
        int[] c = i32(codes);
        float[] a = f32(absmax);
        int co = off(codes), ao = off(absmax), oo = off(out);
        float[] f = out.dtype() == DType.F32 ? f32(out) : null;
        short[] h = f == null ? halves(out) : null;
        Parallel.forRanges(n / Nf4.BLOCK, 64, Nf4.BLOCK, (from, to) -> {
            for (int e = from * Nf4.BLOCK; e < to * Nf4.BLOCK; e++) { // byte e / 2: element e even in its high nibble
                int b = c[co + (e >>> 3)] >>> (8 * ((e >>> 1) & 3)) & 0xff;
                float v = Nf4.value((e & 1) == 0 ? b >>> 4 : b & 0xf) * a[ao + e / Nf4.BLOCK];
                if (f != null) {
                    f[oo + e] = v;
                } else {
                    h[oo + e] = Half.toBits(out.dtype(), v);
                }
            }
        });
    }
}
