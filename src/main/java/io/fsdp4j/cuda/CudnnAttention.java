package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Cudnn.*;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/**
 * cuDNN's fused flash attention over fsdp4j's packed qkv: causal grouped-query attention, forward (with the softmax
 * statistics) and backward, each an execution plan built once per shape from backend descriptors and cached.
 *
 * <p>The graphs are those cudnn-frontend's {@code sdpa} and {@code sdpa_backward} nodes build for cuDNN 9.x before
 * 9.21 (composite softmax, the causal mask and the sliding window's left bound as a diagonal band of pointwise
 * operations), which cuDNN's heuristics map onto its fused kernels:
 * <pre>
 *   forward   S = (Q K^T) * scale, masked to -inf; M = max S; E = exp(S - M); Z = sum E;
 *             stats = M + log Z (fp32, = fsdp4j's lse); P = E / Z (bf16); O = P V
 *   backward  delta = sum(dO * O); P = exp((Q K^T) * scale - stats), masked; dV = P^T dO;
 *             dS = P * (dO V^T - delta) * scale; dK = dS^T Q; dQ = dS K (fp32, then bf16)
 * </pre>
 * with a group's dK and dV summed over its query heads. Q, K and V are strided views of the packed qkv
 * ([B, T, (NH + 2 NKV) HS] bf16: query heads, key heads, value heads), dQ, dK and dV of the packed dQkv; out is
 * [B, T, NH HS] bf16 and the statistics [B, NH, T] fp32: the same tensors, in the same meaning, as fsdp4j's kernels
 * (attention_tc.cu), so either engine's backward takes either engine's forward. A query at t sees keys k with
 * {@code k <= t} and, with a window W, {@code k > t - W}.
 *
 * <p>Plans belong to the device of the {@link Cudnn} handle; a shape cuDNN cannot run (a head size it lacks, say)
 * is found when its plans are first built and reported by {@link #unsupported}. Use one instance per stream.
 */
public final class CudnnAttention implements AutoCloseable {

    /** One attention call's shape: B, T, NH, NKV, HS, the window (0: none) and the factor of q.k. */
    public record Shape(int batch, int seqLen, int heads, int kvHeads, int headDim, int window, float scale) {
        public Shape {
            if (batch < 1 || seqLen < 1 || kvHeads < 1 || heads % kvHeads != 0 || headDim < 1 || window < 0) {
                throw new IllegalArgumentException("attention shape " + batch + "x" + seqLen + ", " + heads + "/"
                        + kvHeads + " heads of " + headDim + ", window " + window);
            }
        }

        long qkvWidth() {
            return (long) (heads + 2 * kvHeads) * headDim;
        }
    }

    // uids of the tensors that the variant pack names
    private static final long Q = 1, K = 2, V = 3, O = 4, STATS = 5, D_O = 6, D_Q = 7, D_K = 8, D_V = 9, SCALE = 10,
            NEG_INF = 11, ONE = 12, WINDOW = 13, DELTA = 14, DQ_ACCUM = 15;
    private static final long VIRTUAL_UIDS = 1000;
    private static final long ALIGN = 256;

    private final Cudnn cudnn;
    private final Map<Shape, Plans> plans = new HashMap<>();
    private boolean closed;

    /** On the current device, with a handle of its own. */
    public CudnnAttention() {
        this.cudnn = new Cudnn();
    }

    /** A shape's two plans, or why cuDNN cannot run it. */
    private record Plans(Built forward, Built backward, String unsupported, Cudnn.Descriptors descriptors) {}

    private record Built(long plan, long workspace, String engine) {}

    /** The reason cuDNN cannot run {@code s} (its plans fail to build), or empty when it can. Builds them once. */
    public synchronized Optional<String> unsupported(Shape s) {
        return Optional.ofNullable(plans(s).unsupported());
    }

    /** The engines cuDNN's heuristics chose, for a log line: "forward engine 2, backward engine 2". */
    public synchronized String engines(Shape s) {
        Plans p = plans(s);
        return p.unsupported() != null ? "unsupported" : "forward " + p.forward().engine() + ", backward "
                + p.backward().engine();
    }

    /** Device memory {@link #forward} needs as its workspace. */
    public synchronized long forwardWorkspaceBytes(Shape s) {
        return Math.max(ALIGN, plans(supported(s)).forward().workspace());
    }

    /**
     * Device memory {@link #backward} needs as its workspace: delta (B*NH*T fp32), dQ's fp32 accumulator
     * (B*NH*T*HS) and the plan's own.
     */
    public synchronized long backwardWorkspaceBytes(Shape s) {
        return deltaBytes(s) + accumBytes(s) + Math.max(ALIGN, plans(supported(s)).backward().workspace());
    }

    private static long deltaBytes(Shape s) {
        return roundUp(4L * s.batch() * s.heads() * s.seqLen());
    }

    private static long accumBytes(Shape s) {
        return roundUp(4L * s.batch() * s.heads() * s.seqLen() * s.headDim());
    }

    private static long roundUp(long bytes) {
        return (bytes + ALIGN - 1) / ALIGN * ALIGN;
    }

    /** out (B,T,NH*HS) bf16 and lse (B,NH,T) fp32 from qkv, on {@code stream}; {@code workspace}: see above. */
    public synchronized void forward(long out, long lse, long qkv, Shape s, long stream, long workspace) {
        Built plan = plans(supported(s)).forward();
        long bf16 = 2, kOffset = bf16 * s.heads() * s.headDim(), vOffset = bf16 * (s.heads() + s.kvHeads()) * s.headDim();
        try (Arena call = Arena.ofConfined()) {
            var pack = new Pack(call, 8);
            pack.put(Q, qkv).put(K, qkv + kOffset).put(V, qkv + vOffset).put(O, out).put(STATS, lse);
            pack.scalar(SCALE, s.scale()).scalar(NEG_INF, Float.NEGATIVE_INFINITY);
            if (s.window() > 0) {
                pack.scalar(WINDOW, s.window());
            }
            run(plan, pack, workspace, stream, "forward");
        }
    }

    /**
     * dQkv (B,T,W) bf16, written whole, from dOut (B,T,NH*HS), qkv, out and lse (either engine's forward's), on
     * {@code stream}.
     */
    public synchronized void backward(long dQkv, long dOut, long qkv, long out, long lse, Shape s, long stream,
                                      long workspace) {
        Built plan = plans(supported(s)).backward();
        long bf16 = 2, kOffset = bf16 * s.heads() * s.headDim(), vOffset = bf16 * (s.heads() + s.kvHeads()) * s.headDim();
        try (Arena call = Arena.ofConfined()) {
            var pack = new Pack(call, 16);
            pack.put(Q, qkv).put(K, qkv + kOffset).put(V, qkv + vOffset).put(O, out).put(D_O, dOut).put(STATS, lse);
            pack.put(D_Q, dQkv).put(D_K, dQkv + kOffset).put(D_V, dQkv + vOffset);
            pack.put(DELTA, workspace).put(DQ_ACCUM, workspace + deltaBytes(s));
            pack.scalar(SCALE, s.scale()).scalar(NEG_INF, Float.NEGATIVE_INFINITY).scalar(ONE, 1f);
            if (s.window() > 0) {
                pack.scalar(WINDOW, s.window());
            }
            run(plan, pack, workspace + deltaBytes(s) + accumBytes(s), stream, "backward");
        }
    }

    /** How many shapes have plans (or a recorded failure). */
    public synchronized int cachedShapes() {
        return plans.size();
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            plans.values().forEach(p -> p.descriptors().close());
            plans.clear();
            cudnn.close();
        }
    }

    // ---- execution ----------------------------------------------------------------------------------

    /** A variant pack's uids and pointers; scalars live in the call's arena (cuDNN reads them at execution). */
    private static final class Pack {
        private final Arena arena;
        private final MemorySegment uids, pointers;
        private int count;

        Pack(Arena arena, int capacity) {
            this.arena = arena;
            this.uids = arena.allocate(ValueLayout.JAVA_LONG, capacity);
            this.pointers = arena.allocate(ValueLayout.JAVA_LONG, capacity);
        }

        Pack put(long uid, long pointer) {
            uids.setAtIndex(ValueLayout.JAVA_LONG, count, uid);
            pointers.setAtIndex(ValueLayout.JAVA_LONG, count, pointer);
            count++;
            return this;
        }

        Pack scalar(long uid, float value) {
            return put(uid, arena.allocateFrom(ValueLayout.JAVA_FLOAT, value).address());
        }
    }

    private void run(Built plan, Pack pack, long workspace, long stream, String what) {
        if (closed) {
            throw new IllegalStateException("cuDNN attention is closed");
        }
        long variant = create(VARIANT_PACK_DESCRIPTOR);
        try (Arena arena = Arena.ofConfined()) {
            set(variant, ATTR_VARIANT_PACK_UNIQUE_IDS, TYPE_INT64, pack.count, pack.uids);
            set(variant, ATTR_VARIANT_PACK_DATA_POINTERS, TYPE_VOID_PTR, pack.count, pack.pointers);
            set(variant, ATTR_VARIANT_PACK_WORKSPACE, TYPE_VOID_PTR, 1, arena.allocateFrom(ValueLayout.JAVA_LONG,
                    workspace));
            Cudnn.finalize(variant, "variant pack");
            cudnn.setStream(stream);
            OpTimeline.around("cudnn attention " + what, stream, () -> cudnn.execute(plan.plan(), variant));
        } finally {
            destroy(variant);
        }
    }

    // ---- graphs -------------------------------------------------------------------------------------

    private Shape supported(Shape s) {
        String why = plans(s).unsupported();
        if (why != null) {
            throw new UnsupportedOperationException("cuDNN cannot run attention of shape " + s + ": " + why);
        }
        return s;
    }

    private Plans plans(Shape s) {
        if (closed) {
            throw new IllegalStateException("cuDNN attention is closed");
        }
        Plans p = plans.get(s);
        if (p == null) {
            var descriptors = new Cudnn.Descriptors();
            try {
                var forward = new Graph(descriptors, cudnn.handle());
                forward.forward(s);
                Built fwd = forward.plan();
                var backward = new Graph(descriptors, cudnn.handle());
                backward.backward(s);
                p = new Plans(fwd, backward.plan(), null, descriptors);
            } catch (CudaException | UnsupportedOperationException e) {
                descriptors.close();
                p = new Plans(null, null, e.getMessage(), new Cudnn.Descriptors());
            }
            plans.put(s, p);
        }
        return p;
    }

    /** The operations of one graph, as descriptors; {@link #plan} finalizes it and picks the first engine that builds. */
    static final class Graph {
        private final Cudnn.Descriptors d;
        private final long handle;
        private final java.util.List<Long> ops = new java.util.ArrayList<>();
        private long nextVirtual = VIRTUAL_UIDS;

        Graph(Cudnn.Descriptors d, long handle) {
            this.d = d;
            this.handle = handle;
        }

        long tensor(long uid, int type, long[] dims, long[] strides, boolean isVirtual, boolean byValue) {
            long t = d.make(TENSOR_DESCRIPTOR);
            d.setEnum(t, ATTR_TENSOR_DATA_TYPE, TYPE_DATA_TYPE, type);
            d.setLongs(t, ATTR_TENSOR_DIMENSIONS, dims);
            d.setLongs(t, ATTR_TENSOR_STRIDES, strides);
            d.setLongs(t, ATTR_TENSOR_UNIQUE_ID, uid);
            d.setLongs(t, ATTR_TENSOR_BYTE_ALIGNMENT, 16);
            if (isVirtual) {
                d.setBoolean(t, ATTR_TENSOR_IS_VIRTUAL, true);
            }
            if (byValue) {
                d.setBoolean(t, ATTR_TENSOR_IS_BY_VALUE, true);
            }
            Cudnn.finalize(t, "tensor " + uid);
            return t;
        }

        long real(long uid, int type, long[] dims, long[] strides) {
            return tensor(uid, type, dims, strides, false, false);
        }

        long virtual(int type, long[] dims, long[] strides) {
            return tensor(nextVirtual++, type, dims, strides, true, false);
        }

        long scalar(long uid) {
            return tensor(uid, DATA_FLOAT, new long[] {1, 1, 1, 1}, new long[] {1, 1, 1, 1}, false, true);
        }

        /** y = mode(x [, b [, t]]) at precision {@code prec}; {@code axis} for GEN_INDEX (else -1). */
        void pointwise(int mode, int prec, long x, long b, long t, long y, long axis) {
            long pw = d.make(POINTWISE_DESCRIPTOR);
            d.setEnum(pw, ATTR_POINTWISE_MODE, TYPE_POINTWISE_MODE, mode);
            d.setEnum(pw, ATTR_POINTWISE_MATH_PREC, TYPE_DATA_TYPE, prec);
            if (axis >= 0) {
                d.setLongs(pw, ATTR_POINTWISE_AXIS, axis);
            }
            Cudnn.finalize(pw, "pointwise " + mode);
            long op = d.make(OPERATION_POINTWISE_DESCRIPTOR);
            d.setDescriptors(op, ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
            d.setDescriptors(op, ATTR_OPERATION_POINTWISE_XDESC, x);
            if (b != 0) {
                d.setDescriptors(op, ATTR_OPERATION_POINTWISE_BDESC, b);
            }
            if (t != 0) {
                d.setDescriptors(op, ATTR_OPERATION_POINTWISE_TDESC, t);
            }
            d.setDescriptors(op, ATTR_OPERATION_POINTWISE_YDESC, y);
            d.setFloat(op, ATTR_OPERATION_POINTWISE_ALPHA1, 1f);
            d.setFloat(op, ATTR_OPERATION_POINTWISE_ALPHA2, 1f);
            Cudnn.finalize(op, "pointwise operation " + mode);
            ops.add(op);
        }

        void pointwise(int mode, long x, long b, long y) {
            pointwise(mode, DATA_FLOAT, x, b, 0, y, -1);
        }

        void matmul(long a, long b, long c) {
            long md = d.make(MATMUL_DESCRIPTOR);
            d.setEnum(md, ATTR_MATMUL_COMP_TYPE, TYPE_DATA_TYPE, DATA_FLOAT);
            Cudnn.finalize(md, "matmul");
            long op = d.make(OPERATION_MATMUL_DESCRIPTOR);
            d.setDescriptors(op, ATTR_OPERATION_MATMUL_ADESC, a);
            d.setDescriptors(op, ATTR_OPERATION_MATMUL_BDESC, b);
            d.setDescriptors(op, ATTR_OPERATION_MATMUL_CDESC, c);
            d.setDescriptors(op, ATTR_OPERATION_MATMUL_DESC, md);
            Cudnn.finalize(op, "matmul operation");
            ops.add(op);
        }

        void reduction(int mode, long x, long y) {
            long rd = d.make(REDUCTION_DESCRIPTOR);
            d.setEnum(rd, ATTR_REDUCTION_COMP_TYPE, TYPE_DATA_TYPE, DATA_FLOAT);
            d.setEnum(rd, ATTR_REDUCTION_OPERATOR, TYPE_REDUCTION_OPERATOR_TYPE, mode);
            Cudnn.finalize(rd, "reduction");
            long op = d.make(OPERATION_REDUCTION_DESCRIPTOR);
            d.setDescriptors(op, ATTR_OPERATION_REDUCTION_DESC, rd);
            d.setDescriptors(op, ATTR_OPERATION_REDUCTION_XDESC, x);
            d.setDescriptors(op, ATTR_OPERATION_REDUCTION_YDESC, y);
            Cudnn.finalize(op, "reduction operation");
            ops.add(op);
        }

        void reshape(long x, long y) {
            long op = d.make(OPERATION_RESHAPE_DESCRIPTOR);
            d.setDescriptors(op, ATTR_OPERATION_RESHAPE_XDESC, x);
            d.setDescriptors(op, ATTR_OPERATION_RESHAPE_YDESC, y);
            Cudnn.finalize(op, "reshape operation");
            ops.add(op);
        }

        /**
         * The causal mask (keep row >= col) and, with a window, its left bound (keep col + W > row), each as
         * cudnn-frontend's composite diagonal band: index generators, a comparison, a select of -inf.
         */
        long mask(Shape s, long scores, long negInf, long window) {
            long[] sd = scoreDims(s), ss = scoreStrides(s);
            long row = virtual(DATA_INT32, sd, ss), col = virtual(DATA_INT32, sd, ss);
            pointwise(POINTWISE_GEN_INDEX, DATA_FLOAT, scores, 0, 0, row, 2);
            pointwise(POINTWISE_GEN_INDEX, DATA_FLOAT, scores, 0, 0, col, 3);
            long keep = virtual(DATA_BOOLEAN, sd, ss);
            pointwise(POINTWISE_CMP_GE, DATA_BOOLEAN, row, col, 0, keep, -1);
            long masked = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_BINARY_SELECT, DATA_FLOAT, scores, negInf, keep, masked, -1);
            if (s.window() == 0) {
                return masked;
            }
            long row2 = virtual(DATA_INT32, sd, ss), col2 = virtual(DATA_INT32, sd, ss);
            pointwise(POINTWISE_GEN_INDEX, DATA_FLOAT, masked, 0, 0, row2, 2);
            pointwise(POINTWISE_GEN_INDEX, DATA_FLOAT, masked, 0, 0, col2, 3);
            long shifted = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_ADD, DATA_FLOAT, col2, window, 0, shifted, 3);
            long keep2 = virtual(DATA_BOOLEAN, sd, ss);
            pointwise(POINTWISE_CMP_GT, DATA_BOOLEAN, shifted, row2, 0, keep2, -1);
            long windowed = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_BINARY_SELECT, DATA_FLOAT, masked, negInf, keep2, windowed, -1);
            return windowed;
        }

        void forward(Shape s) {
            long b = s.batch(), t = s.seqLen(), nh = s.heads(), nkv = s.kvHeads(), hs = s.headDim(), w = s.qkvWidth();
            long q = real(Q, DATA_BFLOAT16, dims(b, nh, t, hs), dims(t * w, hs, w, 1));
            long kt = real(K, DATA_BFLOAT16, dims(b, nkv, hs, t), dims(t * w, hs, 1, w));
            long v = real(V, DATA_BFLOAT16, dims(b, nkv, t, hs), dims(t * w, hs, w, 1));
            long o = real(O, DATA_BFLOAT16, dims(b, nh, t, hs), dims(t * nh * hs, hs, nh * hs, 1));
            long stats = real(STATS, DATA_FLOAT, rowDims(s), rowStrides(s));
            long scale = scalar(SCALE), negInf = scalar(NEG_INF), window = s.window() > 0 ? scalar(WINDOW) : 0;
            long[] sd = scoreDims(s), ss = scoreStrides(s);
            long s1 = virtual(DATA_FLOAT, sd, ss);
            matmul(q, kt, s1);
            long s2 = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_MUL, s1, scale, s2);
            long scores = mask(s, s2, negInf, window);
            long max = virtual(DATA_FLOAT, rowDims(s), rowStrides(s));
            reduction(REDUCE_MAX, scores, max);
            long shifted = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_SUB, scores, max, shifted);
            long e = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_EXP, shifted, 0, e);
            long sum = virtual(DATA_FLOAT, rowDims(s), rowStrides(s));
            reduction(REDUCE_ADD, e, sum);
            long log = virtual(DATA_FLOAT, rowDims(s), rowStrides(s));
            pointwise(POINTWISE_LOG, sum, 0, log);
            pointwise(POINTWISE_ADD, max, log, stats);
            long p = virtual(DATA_BFLOAT16, sd, ss);
            pointwise(POINTWISE_DIV, e, sum, p);
            matmul(p, v, o);
        }

        void backward(Shape s) {
            long b = s.batch(), t = s.seqLen(), nh = s.heads(), nkv = s.kvHeads(), hs = s.headDim(), w = s.qkvWidth();
            long q = real(Q, DATA_BFLOAT16, dims(b, nh, t, hs), dims(t * w, hs, w, 1));
            long kt = real(K, DATA_BFLOAT16, dims(b, nkv, hs, t), dims(t * w, hs, 1, w));
            long vt = real(V, DATA_BFLOAT16, dims(b, nkv, hs, t), dims(t * w, hs, 1, w));
            long o = real(O, DATA_BFLOAT16, dims(b, nh, t, hs), dims(t * nh * hs, hs, nh * hs, 1));
            long dO = real(D_O, DATA_BFLOAT16, dims(b, nh, t, hs), dims(t * nh * hs, hs, nh * hs, 1));
            long stats = real(STATS, DATA_FLOAT, rowDims(s), rowStrides(s));
            long dq = real(D_Q, DATA_BFLOAT16, dims(b, nh, t, hs), dims(t * w, hs, w, 1));
            long dk = real(D_K, DATA_BFLOAT16, dims(b, nkv, t, hs), dims(t * w, hs, w, 1));
            long dv = real(D_V, DATA_BFLOAT16, dims(b, nkv, t, hs), dims(t * w, hs, w, 1));
            long scale = scalar(SCALE), negInf = scalar(NEG_INF), one = scalar(ONE);
            long window = s.window() > 0 ? scalar(WINDOW) : 0;
            long[] sd = scoreDims(s), ss = scoreStrides(s), transposed = dims(nh * t * t, t * t, 1, t);
            long[] hd = dims(b, nh, t, hs), hstr = dims(nh * t * hs, t * hs, hs, 1);
            // delta = rowsum(dO * O), kept in the workspace
            long dOO = virtual(DATA_FLOAT, hd, dims(nh * t * hs, t * hs, nh * hs, 1));
            pointwise(POINTWISE_MUL, dO, o, dOO);
            long rowSum = virtual(DATA_FLOAT, rowDims(s), rowStrides(s));
            reduction(REDUCE_ADD, dOO, rowSum);
            long delta = real(DELTA, DATA_FLOAT, rowDims(s), rowStrides(s));
            pointwise(POINTWISE_MUL, rowSum, one, delta);
            // P = exp(scale * Q K^T - stats), masked
            long s1 = virtual(DATA_FLOAT, sd, ss);
            matmul(q, kt, s1);
            long s2 = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_MUL, s1, scale, s2);
            long s3 = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_SUB, s2, stats, s3);
            long scores = mask(s, s3, negInf, window);
            long p = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_EXP, scores, 0, p);
            // dV = P^T dO, summed over each key head's group of query heads
            long pt = virtual(DATA_BFLOAT16, sd, transposed);
            reshape(p, pt);
            groupSummed(s, pt, dO, dv, hd, hstr);
            // dS = P * (dO V^T - delta) * scale
            long dp = virtual(DATA_FLOAT, sd, ss);
            matmul(dO, vt, dp);
            long dp2 = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_SUB, dp, delta, dp2);
            long ds1 = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_MUL, dp2, p, ds1);
            long ds = virtual(DATA_FLOAT, sd, ss);
            pointwise(POINTWISE_MUL, ds1, scale, ds);
            // dK = dS^T Q, summed likewise
            long dst = virtual(DATA_BFLOAT16, sd, transposed);
            reshape(ds, dst);
            groupSummed(s, dst, q, dk, hd, hstr);
            // dQ = dS K, accumulated in fp32 in the workspace, then rounded
            long k = virtual(DATA_FLOAT, dims(b, nkv, t, hs), dims(t * w, hs, w, 1));
            reshape(kt, k);
            long accum = real(DQ_ACCUM, DATA_FLOAT, hd, hstr);
            matmul(ds, k, accum);
            pointwise(POINTWISE_IDENTITY, accum, 0, dq);
        }

        /** out = a b, or with grouped heads (NH > NKV) a b per query head (bf16) summed over each group. */
        private void groupSummed(Shape s, long a, long b, long out, long[] fullDims, long[] fullStrides) {
            if (s.heads() == s.kvHeads()) {
                matmul(a, b, out);
            } else {
                long full = virtual(DATA_BFLOAT16, fullDims, fullStrides);
                matmul(a, b, full);
                reduction(REDUCE_ADD, full, out);
            }
        }

        /** The operation graph finalized, and the first of the heuristics' engine configs that builds a plan. */
        Built plan() {
            long graph = d.make(OPERATIONGRAPH_DESCRIPTOR);
            d.setDescriptors(graph, ATTR_OPERATIONGRAPH_OPS, ops.stream().mapToLong(Long::longValue).toArray());
            d.setHandle(graph, ATTR_OPERATIONGRAPH_HANDLE, handle);
            Cudnn.finalize(graph, "operation graph");
            long heur = d.make(ENGINEHEUR_DESCRIPTOR);
            d.setDescriptors(heur, ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
            d.setEnum(heur, ATTR_ENGINEHEUR_MODE, TYPE_HEUR_MODE, HEUR_MODE_A);
            Cudnn.finalize(heur, "engine heuristics");
            long count = get(heur, ATTR_ENGINEHEUR_RESULTS, TYPE_BACKEND_DESCRIPTOR, 0, null);
            if (count == 0) {
                throw new UnsupportedOperationException("cuDNN's heuristics offer no engine");
            }
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment configs = arena.allocate(ValueLayout.JAVA_LONG, count);
                for (int i = 0; i < count; i++) {
                    configs.setAtIndex(ValueLayout.JAVA_LONG, i, d.make(ENGINECFG_DESCRIPTOR));
                }
                long got = get(heur, ATTR_ENGINEHEUR_RESULTS, TYPE_BACKEND_DESCRIPTOR, count, configs);
                var errors = new StringBuilder();
                for (int i = 0; i < got; i++) {
                    long config = configs.getAtIndex(ValueLayout.JAVA_LONG, i);
                    long plan = create(EXECUTION_PLAN_DESCRIPTOR);
                    d.setHandle(plan, ATTR_EXECUTION_PLAN_HANDLE, handle);
                    d.setDescriptors(plan, ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
                    int status = tryFinalize(plan);
                    if (status == 0) {
                        d.own(plan);
                        MemorySegment size = arena.allocate(ValueLayout.JAVA_LONG);
                        get(plan, ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, TYPE_INT64, 1, size);
                        return new Built(plan, size.get(ValueLayout.JAVA_LONG, 0), "engine " + engineIndex(config, arena));
                    }
                    errors.append(errors.isEmpty() ? "" : "; ").append(errorString(status)).append(lastError());
                    destroy(plan);
                }
                throw new UnsupportedOperationException("no engine of cuDNN's builds a plan: " + errors);
            }
        }

        private static long engineIndex(long config, Arena arena) {
            long engine = create(ENGINE_DESCRIPTOR);
            try {
                MemorySegment holder = arena.allocateFrom(ValueLayout.JAVA_LONG, engine);
                get(config, ATTR_ENGINECFG_ENGINE, TYPE_BACKEND_DESCRIPTOR, 1, holder);
                MemorySegment index = arena.allocate(ValueLayout.JAVA_LONG);
                get(engine, ATTR_ENGINE_GLOBAL_INDEX, TYPE_INT64, 1, index);
                return index.get(ValueLayout.JAVA_LONG, 0);
            } catch (CudaException unknown) {
                return -1;
            } finally {
                destroy(engine);
            }
        }

        private static long[] dims(long... values) {
            return values;
        }

        private static long[] scoreDims(Shape s) {
            return dims(s.batch(), s.heads(), s.seqLen(), s.seqLen());
        }

        private static long[] scoreStrides(Shape s) {
            long t = s.seqLen();
            return dims(s.heads() * t * t, t * t, t, 1);
        }

        private static long[] rowDims(Shape s) {
            return dims(s.batch(), s.heads(), s.seqLen(), 1);
        }

        private static long[] rowStrides(Shape s) {
            long t = s.seqLen();
            return dims(s.heads() * t, t, 1, 1);
        }
    }
}
