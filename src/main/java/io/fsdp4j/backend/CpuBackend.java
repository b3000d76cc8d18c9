package io.fsdp4j.backend;

import io.fsdp4j.backend.cpu.CpuActivations;
import io.fsdp4j.backend.cpu.CpuAttention;
import io.fsdp4j.backend.cpu.CpuMatmul;
import io.fsdp4j.backend.cpu.CpuMemory;
import io.fsdp4j.backend.cpu.HostFloats;
import io.fsdp4j.backend.cpu.Parallel;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.HostStorage;
import io.fsdp4j.tensor.Nf4;
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
        int rows = n(ids), c = table.dim(1), vocab = table.dim(0);
        int[] id = i32(ids);
        float[] o = f32(out), w = f32(table);
        for (int r = 0; r < rows; r++) {
            int tok = id[off(ids) + r];
            if (tok < 0 || tok >= vocab) {
                throw new io.fsdp4j.UserError("token id " + tok + " is outside the vocabulary of " + vocab
                        + " tokens (valid ids are 0.." + (vocab - 1) + ")");
            }
            System.arraycopy(w, off(table) + tok * c, o, off(out) + r * c, c);
        }
    }

    @Override
    public void embeddingBackward(Tensor dTable, Tensor ids, Tensor dOut) {
        int rows = n(ids), c = dTable.dim(1);
        int[] id = i32(ids);
        float[] g = f32(dOut), dw = f32(dTable);
        for (int r = 0; r < rows; r++) { // sequential: repeated ids accumulate in a fixed order
            int dst = off(dTable) + id[off(ids) + r] * c, src = off(dOut) + r * c;
            for (int j = 0; j < c; j++) {
                dw[dst + j] += g[src + j];
            }
        }
    }

    @Override
    public void rmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) {
        int c = weight.dim(0), rows = n(x) / c;
        float[] o = f32(out), xs = f32(x), w = f32(weight), rs = f32(rstd);
        int oo = off(out), xo = off(x), wo = off(weight), ro = off(rstd);
        Parallel.forEach(rows, 3L * c, r -> {
            double ss = 0;
            for (int j = 0; j < c; j++) {
                float v = xs[xo + r * c + j];
                ss += v * v;
            }
            float inv = (float) (1.0 / Math.sqrt(ss / c + eps));
            rs[ro + r] = inv;
            for (int j = 0; j < c; j++) {
                o[oo + r * c + j] = xs[xo + r * c + j] * inv * w[wo + j];
            }
        });
    }

    @Override
    public void rmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd) {
        int c = weight.dim(0), rows = n(x) / c;
        float[] dxs = f32(dx), dw = f32(dWeight), g = f32(dOut), xs = f32(x), w = f32(weight), rs = f32(rstd);
        int dxo = off(dx), dwo = off(dWeight), go = off(dOut), xo = off(x), wo = off(weight), ro = off(rstd);
        Parallel.forEach(rows, 4L * c, r -> {
            float inv = rs[ro + r];
            // y = x * inv * w ; dx = inv * (g*w - xhat * mean(g*w*xhat)), xhat = x * inv
            double dot = 0;
            for (int j = 0; j < c; j++) {
                dot += (double) g[go + r * c + j] * w[wo + j] * xs[xo + r * c + j] * inv;
            }
            float mean = (float) (dot / c);
            for (int j = 0; j < c; j++) {
                float xhat = xs[xo + r * c + j] * inv;
                dxs[dxo + r * c + j] = inv * (g[go + r * c + j] * w[wo + j] - xhat * mean);
            }
        });
        int chunk = 64, chunks = (c + chunk - 1) / chunk;
        Parallel.forEach(chunks, (long) rows * chunk, ch -> {
            int j0 = ch * chunk, j1 = Math.min(c, j0 + chunk);
            for (int r = 0; r < rows; r++) {
                float inv = rs[ro + r];
                for (int j = j0; j < j1; j++) {
                    dw[dwo + j] += g[go + r * c + j] * xs[xo + r * c + j] * inv;
                }
            }
        });
    }

    @Override
    public void layerNormForward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias, float eps) {
        int c = weight.dim(0), rows = n(x) / c;
        float[] o = f32(out), xs = f32(x), w = f32(weight), b = f32(bias), ms = f32(mean), rs = f32(rstd);
        int oo = off(out), xo = off(x), wo = off(weight), bo = off(bias), mo = off(mean), ro = off(rstd);
        Parallel.forEach(rows, 4L * c, r -> {
            int row = xo + r * c;
            double sum = 0;
            for (int j = 0; j < c; j++) {
                sum += xs[row + j];
            }
            double mu = sum / c, ss = 0;
            for (int j = 0; j < c; j++) {
                double d = xs[row + j] - mu;
                ss += d * d;
            }
            float m = (float) mu, inv = (float) (1.0 / Math.sqrt(ss / c + eps));
            ms[mo + r] = m;
            rs[ro + r] = inv;
            for (int j = 0; j < c; j++) {
                o[oo + r * c + j] = (xs[row + j] - m) * inv * w[wo + j] + b[bo + j];
            }
        });
    }

    @Override
    public void layerNormBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                                  Tensor mean, Tensor rstd) {
        int c = weight.dim(0), rows = n(x) / c;
        float[] dxs = f32(dx), dw = f32(dWeight), db = f32(dBias), g = f32(dOut), xs = f32(x), w = f32(weight);
        float[] ms = f32(mean), rs = f32(rstd);
        int dxo = off(dx), dwo = off(dWeight), dbo = off(dBias), go = off(dOut), xo = off(x), wo = off(weight);
        int mo = off(mean), ro = off(rstd);
        Parallel.forEach(rows, 6L * c, r -> {
            float m = ms[mo + r], inv = rs[ro + r];
            // y = xhat * w + b, xhat = (x - mean) * inv ; dx = inv * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g*w
            double sumGw = 0, sumGwXhat = 0;
            for (int j = 0; j < c; j++) {
                float gw = g[go + r * c + j] * w[wo + j];
                sumGw += gw;
                sumGwXhat += (double) gw * ((xs[xo + r * c + j] - m) * inv);
            }
            float meanGw = (float) (sumGw / c), meanGwXhat = (float) (sumGwXhat / c);
            for (int j = 0; j < c; j++) {
                float xhat = (xs[xo + r * c + j] - m) * inv;
                dxs[dxo + r * c + j] = inv * (g[go + r * c + j] * w[wo + j] - meanGw - xhat * meanGwXhat);
            }
        });
        int chunk = 64, chunks = (c + chunk - 1) / chunk;
        Parallel.forEach(chunks, (long) rows * chunk * 2, ch -> {
            int j0 = ch * chunk, j1 = Math.min(c, j0 + chunk);
            for (int r = 0; r < rows; r++) {
                float m = ms[mo + r], inv = rs[ro + r];
                for (int j = j0; j < j1; j++) {
                    float gj = g[go + r * c + j];
                    dw[dwo + j] += gj * ((xs[xo + r * c + j] - m) * inv);
                    db[dbo + j] += gj;
                }
            }
        });
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
    public void ropeForward(Tensor x, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin) {
        rotate(x, rotatedHeads, positions, cos, sin, 1f);
    }

    @Override
    public void ropeBackward(Tensor dx, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin) {
        rotate(dx, rotatedHeads, positions, cos, sin, -1f);
    }

    /** Rotation by +angle (forward) or -angle (backward: the transpose of a rotation is its inverse). */
    private static void rotate(Tensor x, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin, float sign) {
        int half = cos.dim(1), hs = 2 * half, rows = n(positions), width = n(x) / rows;
        float[] xs = f32(x), cs = f32(cos), sn = f32(sin);
        int[] pos = i32(positions);
        int xo = off(x), co = off(cos), so = off(sin), po = off(positions);
        Parallel.forEach(rows, 6L * rotatedHeads * hs, r -> {
            int p = pos[po + r];
            for (int h = 0; h < rotatedHeads; h++) {
                int base = xo + r * width + h * hs;
                for (int j = 0; j < half; j++) {
                    float c = cs[co + p * half + j], s = sign * sn[so + p * half + j];
                    float x1 = xs[base + j], x2 = xs[base + half + j];
                    xs[base + j] = x1 * c - x2 * s;
                    xs[base + half + j] = x2 * c + x1 * s;
                }
            }
        });
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
        int width = shape.qkvWidth(), hs = shape.headDim(), kvWidth = shape.kvHeads() * hs;
        int rows = n(qkv) / width, perSequence = shape.seqLen(), capacity = keys.dim(1);
        float[] src = f32(qkv), k = f32(keys), v = f32(values);
        int[] pos = i32(positions);
        for (int r = 0; r < rows; r++) {
            int row = off(qkv) + r * width;
            int cacheRow = (r / perSequence * capacity + pos[off(positions) + r]) * kvWidth;
            for (int h = 0; h < shape.kvHeads(); h++) {
                System.arraycopy(src, row + shape.keyColumn(h), k, off(keys) + cacheRow + h * hs, hs);
                System.arraycopy(src, row + shape.valueColumn(h), v, off(values) + cacheRow + h * hs, hs);
            }
        }
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
        int count = n(x);
        float[] o = f32(out), xs = f32(x);
        int oo = off(out), xo = off(x);
        Parallel.forRanges(count, Parallel.GRAIN, 20, (from, to) -> {
            for (int i = from; i < to; i++) {
                o[oo + i] = gelu(xs[xo + i]);
            }
        });
    }

    @Override
    public void geluBackward(Tensor dx, Tensor dOut, Tensor x) {
        int count = n(x);
        float[] d = f32(dx), g = f32(dOut), xs = f32(x);
        int dO = off(dx), go = off(dOut), xo = off(x);
        Parallel.forRanges(count, Parallel.GRAIN, 30, (from, to) -> {
            for (int i = from; i < to; i++) {
                d[dO + i] = g[go + i] * geluDerivative(xs[xo + i]);
            }
        });
    }

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

    @Override
    public double crossEntropy(Tensor logits, Tensor targets, float gradScale, Tensor lossPerRow) {
        int vocab = logits.dim(-1), rows = n(logits) / vocab;
        float[] z = f32(logits);
        int[] tg = i32(targets);
        int zo = off(logits), to = off(targets);
        double[] rowLoss = new double[rows];
        Parallel.forEach(rows, 4L * vocab, r -> {
            int target = tg[to + r];
            int base = zo + r * vocab;
            if (target == -100) {
                if (gradScale != 0f) {
                    java.util.Arrays.fill(z, base, base + vocab, 0f);
                }
                return;
            }
            if (target < 0 || target >= vocab) {
                throw new io.fsdp4j.UserError("label " + target + " is outside the vocabulary of " + vocab
                        + " tokens (use -100 for positions without loss)");
            }
            float max = Float.NEGATIVE_INFINITY;
            for (int j = 0; j < vocab; j++) {
                max = Math.max(max, z[base + j]);
            }
            float targetLogit = z[base + target];
            double sum = 0;
            for (int j = 0; j < vocab; j++) { // one exp per logit: kept in place for the gradient
                double e = Math.exp(z[base + j] - max);
                sum += e;
                if (gradScale != 0f) {
                    z[base + j] = (float) e;
                }
            }
            double logSum = max + Math.log(sum);
            rowLoss[r] = logSum - targetLogit;
            if (gradScale != 0f) {
                double factor = gradScale / sum; // softmax times the scale
                for (int j = 0; j < vocab; j++) {
                    z[base + j] = (float) (z[base + j] * factor);
                }
                z[base + target] -= gradScale;
            }
        });
        double total = 0;
        for (int r = 0; r < rows; r++) {
            total += rowLoss[r];
        }
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
        float[] p = f32(param), g = f32(grad), ms = f32(m), vs = f32(v);
        int po = off(param), go = off(grad), mo = off(m), vo = off(v);
        double bc1 = 1 - Math.pow(beta1, step);
        double bc2Sqrt = Math.sqrt(1 - Math.pow(beta2, step));
        float stepSize = (float) (lr / bc1);
        float decay = 1f - lr * weightDecay;
        Parallel.forRanges(n(param), Parallel.GRAIN, 12, (from, to) -> {
            for (int i = from; i < to; i++) {
                float gi = g[go + i] * gradScale;
                float mi = beta1 * ms[mo + i] + (1 - beta1) * gi;
                float vi = beta2 * vs[vo + i] + (1 - beta2) * gi * gi;
                ms[mo + i] = mi;
                vs[vo + i] = vi;
                float denom = (float) (Math.sqrt(vi) / bc2Sqrt) + eps;
                p[po + i] = p[po + i] * decay - stepSize * mi / denom;
            }
        });
    }

    // ---- ops added for the model families of 2026 (Qwen3, Gemma 3) --------------------------------------

    @Override
    public void headRmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, int firstHead, float eps) {
        int hs = weight.dim(0), rows = rstd.dim(0), heads = rstd.dim(1), width = n(x) / rows;
        requireSameSize(out, x);
        float[] o = f32(out), xs = f32(x), w = f32(weight), rs = f32(rstd);
        int oo = off(out), xo = off(x), wo = off(weight), ro = off(rstd);
        Parallel.forEach(rows, 3L * heads * hs, r -> {
            for (int h = 0; h < heads; h++) {
                int col = r * width + (firstHead + h) * hs;
                double ss = 0;
                for (int j = 0; j < hs; j++) {
                    float v = xs[xo + col + j];
                    ss += v * v;
                }
                float inv = (float) (1.0 / Math.sqrt(ss / hs + eps));
                rs[ro + r * heads + h] = inv;
                for (int j = 0; j < hs; j++) {
                    o[oo + col + j] = xs[xo + col + j] * inv * w[wo + j];
                }
            }
        });
    }

    /** dWeight first, then dx: dx may be dOut, whose values the weight gradient needs. */
    @Override
    public void headRmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd,
                                    int firstHead, boolean accumulate) {
        int hs = weight.dim(0), rows = rstd.dim(0), heads = rstd.dim(1), width = n(x) / rows;
        requireSameSize(dx, x);
        requireSameSize(dOut, x);
        float[] dxs = f32(dx), dw = f32(dWeight), g = f32(dOut), xs = f32(x), w = f32(weight), rs = f32(rstd);
        int dxo = off(dx), dwo = off(dWeight), go = off(dOut), xo = off(x), wo = off(weight), ro = off(rstd);
        // dWeight[j] (+)= sum over rows, then heads, of dOut * x * rstd: one column per task, a fixed order
        Parallel.forEach(hs, 3L * rows * heads, j -> {
            float sum = accumulate ? dw[dwo + j] : 0f;
            for (int r = 0; r < rows; r++) {
                for (int h = 0; h < heads; h++) {
                    int col = r * width + (firstHead + h) * hs + j;
                    sum += g[go + col] * xs[xo + col] * rs[ro + r * heads + h];
                }
            }
            dw[dwo + j] = sum;
        });
        // dx = rstd * (g*w - xhat * mean(g*w*xhat)), xhat = x * rstd, head by head
        Parallel.forEach(rows, 4L * heads * hs, r -> {
            for (int h = 0; h < heads; h++) {
                int col = r * width + (firstHead + h) * hs;
                float inv = rs[ro + r * heads + h];
                double dot = 0;
                for (int j = 0; j < hs; j++) {
                    dot += (double) g[go + col + j] * w[wo + j] * xs[xo + col + j] * inv;
                }
                float mean = (float) (dot / hs);
                for (int j = 0; j < hs; j++) {
                    float xhat = xs[xo + col + j] * inv;
                    dxs[dxo + col + j] = inv * (g[go + col + j] * w[wo + j] - xhat * mean);
                }
            }
        });
    }

    @Override
    public void gegluForward(Tensor out, Tensor gateUp) {
        int f = gateUp.dim(-1) / 2, rows = n(gateUp) / (2 * f);
        float[] o = f32(out), gu = f32(gateUp);
        int oo = off(out), go = off(gateUp);
        Parallel.forEach(rows, 24L * f, r -> {
            for (int j = 0; j < f; j++) {
                o[oo + r * f + j] = gelu(gu[go + r * 2 * f + j]) * gu[go + r * 2 * f + f + j];
            }
        });
    }

    @Override
    public void gegluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp) {
        int f = gateUp.dim(-1) / 2, rows = n(gateUp) / (2 * f);
        float[] d = f32(dGateUp), g = f32(dOut), gu = f32(gateUp);
        int dO = off(dGateUp), go = off(dOut), guo = off(gateUp);
        Parallel.forEach(rows, 40L * f, r -> {
            for (int j = 0; j < f; j++) {
                float gate = gu[guo + r * 2 * f + j], up = gu[guo + r * 2 * f + f + j], dy = g[go + r * f + j];
                d[dO + r * 2 * f + j] = dy * up * geluDerivative(gate);
                d[dO + r * 2 * f + f + j] = dy * gelu(gate);
            }
        });
    }

    @Override
    public void softcapForward(Tensor x, float cap) {
        float[] d = f32(x);
        int o = off(x);
        int n = n(x), chunk = 4096;
        Parallel.forEach((n + chunk - 1) / chunk, 20L * chunk, c -> {
            for (int i = c * chunk; i < Math.min(n, (c + 1) * chunk); i++) {
                d[o + i] = cap * (float) Math.tanh(d[o + i] / cap);
            }
        });
    }

    @Override
    public void softcapBackward(Tensor dx, Tensor capped, float cap) {
        float[] d = f32(dx), c = f32(capped);
        int o = off(dx), co = off(capped);
        for (int i = 0; i < n(dx); i++) {
            float t = c[co + i] / cap;
            d[o + i] *= 1f - t * t;
        }
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
