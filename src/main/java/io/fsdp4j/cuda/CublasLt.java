package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Native.INT;
import static io.fsdp4j.cuda.Native.LONG;
import static io.fsdp4j.cuda.Native.PTR;
import static io.fsdp4j.cuda.Native.lazy;

import io.fsdp4j.cuda.NativeLibraries.Library;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Fp8;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * cuBLASLt matrix products for row-major linear layers, on the device that was current when it was made. Inputs
 * are BF16 or F32, outputs BF16 or F32; products accumulate in fp32 ({@code CUBLAS_COMPUTE_32F}: for F32 inputs
 * this means true fp32, no TF32). One workspace serves every product, so use one instance per stream (a rank's
 * compute stream). The algorithm for each shape, type and alignment is chosen once and cached: cuBLASLt's heuristic's
 * first candidate, or, with {@link #timeCandidates}, the fastest of its first {@link #CANDIDATES} timed on the first
 * call's own operands ({@code matmul.algorithm: timed}), which every instance in the process then takes for that
 * product on that device.
 *
 * <p>cuBLASLt is column-major. A row-major (R, C) matrix with row stride C is, read column-major, the (C, R)
 * matrix that is its transpose, with leading dimension C. Hence, with shape letters N rows, I in, O out:
 * <pre>
 *   forward   out (N,O) = x (N,I) @ W (O,I)^T     col-major: out^T (O,N) = op_T(W^T (I,O)) . x^T (I,N)
 *             m=O n=N k=I, A=W (I x O, ld I) transposed, B=x (I x N, ld I), D=out (O x N, ld O), bias (O) per row of D
 *   backward  dX (N,I) = dY (N,O) @ W (O,I)       col-major: dX^T (I,N) = W^T (I,O) . dY^T (O,N)
 *             m=I n=N k=O, A=W (I x O, ld I), B=dY (O x N, ld O), D=dX (I x N, ld I)
 *   backward  dW (O,I) += dY^T (O,N) @ X (N,I)    col-major: dW^T (I,O) = X^T (I,N) . op_T(dY^T (O,N))
 *             m=I n=O k=N, A=x (I x N, ld I), B=dY (O x N, ld O) transposed, D=dW (I x O, ld I), beta=1 accumulates
 * </pre>
 */
public final class CublasLt implements AutoCloseable {
    private static final Library LIB = Library.CUBLASLT;
    private static final MethodHandle cublasLtCreate = lazy(LIB, "cublasLtCreate", INT, PTR);
    private static final MethodHandle cublasLtDestroy = lazy(LIB, "cublasLtDestroy", INT, LONG);
    private static final MethodHandle cublasLtGetVersion = lazy(LIB, "cublasLtGetVersion", LONG);
    private static final MethodHandle cublasLtGetStatusString = lazy(LIB, "cublasLtGetStatusString", PTR, INT);
    private static final MethodHandle cublasLtGetStatusName = lazy(LIB, "cublasLtGetStatusName", PTR, INT);
    private static final MethodHandle cublasLtMatmulDescCreate = lazy(LIB, "cublasLtMatmulDescCreate", INT, PTR, INT, INT);
    private static final MethodHandle cublasLtMatmulDescDestroy = lazy(LIB, "cublasLtMatmulDescDestroy", INT, LONG);
    private static final MethodHandle cublasLtMatmulDescSetAttribute = lazy(LIB, "cublasLtMatmulDescSetAttribute",
            INT, LONG, INT, PTR, LONG);
    private static final MethodHandle cublasLtMatrixLayoutCreate = lazy(LIB, "cublasLtMatrixLayoutCreate",
            INT, PTR, INT, LONG, LONG, LONG);
    private static final MethodHandle cublasLtMatrixLayoutDestroy = lazy(LIB, "cublasLtMatrixLayoutDestroy", INT, LONG);
    private static final MethodHandle cublasLtMatmulPreferenceCreate = lazy(LIB, "cublasLtMatmulPreferenceCreate", INT, PTR);
    private static final MethodHandle cublasLtMatmulPreferenceDestroy = lazy(LIB, "cublasLtMatmulPreferenceDestroy", INT, LONG);
    private static final MethodHandle cublasLtMatmulPreferenceSetAttribute = lazy(LIB,
            "cublasLtMatmulPreferenceSetAttribute", INT, LONG, INT, PTR, LONG);
    private static final MethodHandle cublasLtMatmulAlgoGetHeuristic = lazy(LIB, "cublasLtMatmulAlgoGetHeuristic",
            INT, LONG, LONG, LONG, LONG, LONG, LONG, LONG, INT, PTR, PTR);
    private static final MethodHandle cublasLtMatmul = lazy(LIB, "cublasLtMatmul", INT,
            LONG, LONG, PTR, LONG, LONG, LONG, LONG, PTR, LONG, LONG, LONG, LONG, PTR, LONG, LONG, LONG);

    // enum values from cublasLt.h, cublas_api.h and library_types.h
    private static final int CUBLAS_COMPUTE_32F = 68;
    private static final int CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14, CUDA_R_8F_E4M3 = 28,
            CUDA_R_8F_E5M2 = 29;
    private static final int CUBLAS_OP_N = 0, CUBLAS_OP_T = 1;
    private static final int DESC_TRANSA = 3, DESC_TRANSB = 4, DESC_EPILOGUE = 7, DESC_BIAS_POINTER = 8;
    private static final int DESC_A_SCALE_POINTER = 17, DESC_B_SCALE_POINTER = 18, DESC_FAST_ACCUM = 25;
    /** CUBLASLT_MATMUL_DESC_{A,B}_SCALE_MODE (cuBLASLt 12.9 and later) and CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F. */
    private static final int DESC_A_SCALE_MODE = 31, DESC_B_SCALE_MODE = 32, SCALE_OUTER_VEC_32F = 3;
    private static final int EPILOGUE_DEFAULT = 1, EPILOGUE_BIAS = 4;
    private static final int PREF_MAX_WORKSPACE_BYTES = 1;
    private static final int PREF_MIN_ALIGNMENT_A = 5, PREF_MIN_ALIGNMENT_B = 6, PREF_MIN_ALIGNMENT_C = 7,
            PREF_MIN_ALIGNMENT_D = 8;
    /** sizeof(cublasLtMatmulHeuristicResult_t): algo (64 bytes), workspaceSize, state, wavesCount, reserved[4]. */
    private static final long HEURISTIC_RESULT_BYTES = 96, ALGO_BYTES = 64;

    /** How many of the heuristic's candidates a timed choice runs. */
    static final int CANDIDATES = 8;
    /** A timed candidate replaces the heuristic's first only when its call takes at most this part of the first's. */
    static final double CLEARLY_FASTER = 0.98;
    /** Each candidate: one untimed call, then TIMINGS timings of TIMED_CALLS calls, the least kept. */
    private static final int TIMED_CALLS = 3, TIMINGS = 2;

    /** A timed product on a device: its key with {@code accumulate} false (beta is not part of the algorithm). */
    private record ChoiceKey(int device, PlanKey key) {}

    /** The algorithms timed choices picked, process-wide: every instance on a device takes the same for a product. */
    private static final Map<ChoiceKey, byte[]> CHOSEN = new ConcurrentHashMap<>();

    /** The default workspace, allocated once. */
    public static final long DEFAULT_WORKSPACE_BYTES = 32L << 20;

    private final long handle;
    private final long workspace;
    private final long workspaceBytes;
    private final int device;
    private final Arena arena = Arena.ofShared();
    private final Map<PlanKey, Plan> plans = new HashMap<>();
    private boolean closed;
    private boolean timeCandidates;
    private int timedPlans, fasterPlans;
    private double firstMs, chosenMs;

    /** A handle and a workspace of {@link #DEFAULT_WORKSPACE_BYTES} on the current device. */
    public CublasLt() {
        this(DEFAULT_WORKSPACE_BYTES);
    }

    public CublasLt(long workspaceBytes) {
        this.device = Cuda.getDevice();
        try {
            MemorySegment out = arena.allocate(PTR);
            check("cublasLtCreate", (int) cublasLtCreate.invokeExact(out));
            this.handle = out.get(LONG, 0);
        } catch (Throwable t) {
            arena.close();
            throw Native.rethrow(t);
        }
        this.workspaceBytes = workspaceBytes;
        this.workspace = workspaceBytes > 0 ? Cuda.malloc(workspaceBytes) : 0;
    }

    /** cublasLtGetVersion, e.g. 130100 for 13.1.0. */
    public static long version() {
        try {
            return (long) cublasLtGetVersion.invokeExact();
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    public int device() {
        return device;
    }

    /**
     * Whether products not yet planned time cuBLASLt's candidates on their first call and keep the fastest
     * ({@code matmul.algorithm: timed}) rather than take its heuristic's first ({@code heuristic}, the default of a
     * new instance). A product another instance already timed on this device takes that one's choice either way.
     */
    public synchronized void timeCandidates(boolean timed) {
        this.timeCandidates = timed;
    }

    /**
     * What this instance's timed choices found: products timed, how many of them run a candidate faster than the
     * heuristic's first, and the ms one call of each of those timed products takes on the first and on the chosen.
     */
    public record Timings(int timed, int faster, double firstMs, double chosenMs) {}

    public synchronized Timings timings() {
        return new Timings(timedPlans, fasterPlans, firstMs, chosenMs);
    }

    /** How many distinct product shapes have a cached algorithm. */
    public synchronized int cachedPlans() {
        return plans.size();
    }

    // ---- linear layers (row-major) ------------------------------------------------------------------

    /**
     * out (N,O) = x (N,I) @ w (O,I)^T [+ bias (O)]. {@code x} and {@code w} have {@code inType}; {@code out}
     * and {@code bias} (0 for none) have {@code outType}.
     */
    public void linearForward(long out, DType outType, long x, long w, DType inType, long bias,
                              int n, int in, int outFeatures, long stream) {
        matmul(true, false, outFeatures, n, in, 1f, w, inType, in, x, inType, in, 0f, out, outType, outFeatures,
                bias, stream);
    }

    /** dx (N,I) = beta * dx + dy (N,O) @ w (O,I); beta 0 writes, 1 accumulates. */
    public void linearBackwardInput(long dx, DType dxType, long dy, long w, DType inType,
                                    int n, int in, int outFeatures, float beta, long stream) {
        matmul(false, false, in, n, outFeatures, 1f, w, inType, in, dy, inType, outFeatures, beta, dx, dxType, in,
                0, stream);
    }

    /** dw (O,I) = beta * dw + dy (N,O)^T @ x (N,I); beta 1 accumulates (the backend's convention for weights). */
    public void linearBackwardWeight(long dw, DType dwType, long dy, long x, DType inType,
                                     int n, int in, int outFeatures, float beta, long stream) {
        matmul(false, true, in, outFeatures, n, 1f, x, inType, in, dy, inType, outFeatures, beta, dw, dwType, in,
                0, stream);
    }

    // ---- fp8 products (Hopper's and Ada's tensor cores) ------------------------------------------------

    /**
     * An fp8 operand: {@code pointer} to its bytes in {@code format}, {@code inverseScale} a device pointer to the
     * fp32 factor its values were scaled by, inverted (the product is multiplied by both operands'); with
     * {@code perRow}, to one such factor for each row of the operand along the product's kept dimension (m of them
     * for A, n for B: cuBLASLt's outer-vector scaling, element (i, j) of the product times A's i-th and B's j-th).
     */
    public record Fp8Operand(long pointer, Fp8 format, long inverseScale, boolean perRow) {
        /** One scale for the whole operand. */
        public Fp8Operand(long pointer, Fp8 format, long inverseScale) {
            this(pointer, format, inverseScale, false);
        }
    }

    /**
     * Column-major D (m x n, ld ldd) = (A^T B) * a.inverseScale * b.inverseScale + beta D [+ bias (m), D's type], the
     * one layout cuBLASLt's fp8 products take ("TN"): A stored (k x m), ld lda, and B stored (k x n), ld ldb, both
     * K-major; not both e5m2. m, n, k and the leading dimensions must be multiples of 16. {@code fastAccum}: the
     * tensor cores' own accumulator throughout, without promoting partial sums to fp32 (faster, less exact: torchao's
     * choice for the forward, not for the gradients).
     */
    public synchronized void fp8Matmul(int m, int n, int k, Fp8Operand a, int lda, Fp8Operand b, int ldb, float beta,
                                       long d, DType dType, int ldd, long bias, boolean fastAccum, long stream) {
        if (a.format() == Fp8.E5M2 && b.format() == Fp8.E5M2) {
            throw new IllegalArgumentException("cuBLASLt has no e5m2 x e5m2 product");
        }
        if (a.inverseScale() % 16 != 0 || b.inverseScale() % 16 != 0) { // else cublasLtMatmul: NOT_SUPPORTED
            throw new IllegalArgumentException("fp8 scale pointers must be 16-byte aligned: " + a + ", " + b);
        }
        if (a.perRow() != b.perRow()) {
            throw new IllegalArgumentException("fp8 operands are both scaled per row or neither: " + a + ", " + b);
        }
        var fp8 = new Fp8Key(a.format(), b.format(), fastAccum, a.perRow());
        product(new PlanKey(true, false, m, n, k, null, null, dType, lda, ldb, ldd, bias != 0, beta != 0f,
                alignment(a.pointer()), alignment(b.pointer()), alignment(d), bias == 0 ? 0 : alignment(bias), fp8),
                1f, a.pointer(), b.pointer(), beta, d, bias, a.inverseScale(), b.inverseScale(), stream);
    }

    /** A product's name in a profile: its shape, operand types and whether it accumulates. */
    private static String gemmName(PlanKey key) {
        String in = key.fp8() == null ? String.valueOf(key.aType())
                : key.fp8().a() + "x" + key.fp8().b() + (key.fp8().fastAccum() ? " fast" : "")
                        + (key.fp8().perRow() ? " rowwise" : "");
        return "gemm m" + key.m() + " n" + key.n() + " k" + key.k() + " " + in + "->" + key.dType()
                + (key.accumulate() ? " +=" : "");
    }

    // ---- general product (column-major) -------------------------------------------------------------

    /**
     * Column-major D (m x n, ld ldd) = alpha op(A) op(B) + beta D [+ bias (m), broadcast over columns], where
     * A is stored (m x k), or (k x m) when {@code transA}, with leading dimension lda; B likewise (k x n) or
     * (n x k). {@code bias} is 0 for none and has D's type.
     */
    public synchronized void matmul(boolean transA, boolean transB, int m, int n, int k,
                                    float alpha, long a, DType aType, int lda, long b, DType bType, int ldb,
                                    float beta, long d, DType dType, int ldd, long bias, long stream) {
        var key = new PlanKey(transA, transB, m, n, k, aType, bType, dType, lda, ldb, ldd, bias != 0, beta != 0f,
                alignment(a), alignment(b), alignment(d), bias == 0 ? 0 : alignment(bias), null);
        product(key, alpha, a, b, beta, d, bias, 0, 0, stream);
    }

    /** The product of {@code key} on these pointers (the fp8 operands' inverse scales: 0 for a product of others). */
    private void product(PlanKey key, float alpha, long a, long b, float beta, long d, long bias, long aScale,
                         long bScale, long stream) {
        if (closed) {
            throw new IllegalStateException("cuBLASLt handle is closed");
        }
        if (key.m() <= 0 || key.n() <= 0 || key.k() <= 0) {
            throw new IllegalArgumentException("matmul dimensions must be positive: m=" + key.m() + " n=" + key.n()
                    + " k=" + key.k());
        }
        try (Arena call = Arena.ofConfined()) {
            Plan plan = plans.get(key);
            if (plan == null) {
                plan = plan(key, alpha, a, b, d, bias, aScale, bScale, stream);
                plans.put(key, plan);
            }
            if (bias != 0) {
                setDesc(plan.desc, DESC_BIAS_POINTER, call.allocateFrom(LONG, bias));
            }
            if (key.fp8() != null) { // the scales' pointers change call by call, as the bias's
                setDesc(plan.desc, DESC_A_SCALE_POINTER, call.allocateFrom(LONG, aScale));
                setDesc(plan.desc, DESC_B_SCALE_POINTER, call.allocateFrom(LONG, bScale));
            }
            MemorySegment alphaHost = call.allocateFrom(ValueLayout.JAVA_FLOAT, alpha);
            MemorySegment betaHost = call.allocateFrom(ValueLayout.JAVA_FLOAT, beta);
            Plan chosen = plan;
            OpTimeline.around(gemmName(key), stream, () -> {
                try {
                    int status = (int) cublasLtMatmul.invokeExact(handle, chosen.desc, alphaHost, a, chosen.aLayout, b,
                            chosen.bLayout, betaHost, d, chosen.dLayout, d, chosen.dLayout, chosen.algo, workspace,
                            workspaceBytes, stream);
                    check("cublasLtMatmul(" + key + ")", status);
                } catch (Throwable t) {
                    throw Native.rethrow(t);
                }
            });
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** Largest power of two (at most 256) that divides the address: what the algorithm may assume. */
    private static int alignment(long address) {
        return (int) Math.min(256, Long.lowestOneBit(address | 256));
    }

    private record PlanKey(boolean transA, boolean transB, int m, int n, int k, DType aType, DType bType, DType dType,
                           int lda, int ldb, int ldd, boolean bias, boolean accumulate,
                           int alignA, int alignB, int alignD, int alignBias, Fp8Key fp8) {
        /** This product writing D (beta 0): the same descriptor, the same candidates. */
        PlanKey writing() {
            return new PlanKey(transA, transB, m, n, k, aType, bType, dType, lda, ldb, ldd, bias, false, alignA,
                    alignB, alignD, alignBias, fp8);
        }
    }

    /** An fp8 product's operand formats, accumulation and scales (null in the key of a product of other types). */
    private record Fp8Key(Fp8 a, Fp8 b, boolean fastAccum, boolean perRow) {}

    private record Plan(long desc, long aLayout, long bLayout, long dLayout, MemorySegment algo) {}

    /**
     * The descriptor, layouts and algorithm of a product; an fp8 one's scale pointers set before the heuristic is asked
     * (cuBLASLt may otherwise pick a kernel that takes no scales, and refuse the product when they are set).
     */
    private Plan plan(PlanKey key, float alpha, long a, long b, long d, long bias, long aScale, long bScale,
                      long stream) throws Throwable {
        try (Arena call = Arena.ofConfined()) {
            MemorySegment out = call.allocate(PTR);
            check("cublasLtMatmulDescCreate", (int) cublasLtMatmulDescCreate.invokeExact(out, CUBLAS_COMPUTE_32F, CUDA_R_32F));
            long desc = out.get(LONG, 0);
            setDesc(desc, DESC_TRANSA, call.allocateFrom(INT, key.transA ? CUBLAS_OP_T : CUBLAS_OP_N));
            setDesc(desc, DESC_TRANSB, call.allocateFrom(INT, key.transB ? CUBLAS_OP_T : CUBLAS_OP_N));
            setDesc(desc, DESC_EPILOGUE, call.allocateFrom(INT, key.bias ? EPILOGUE_BIAS : EPILOGUE_DEFAULT));
            if (key.bias) {
                setDesc(desc, DESC_BIAS_POINTER, call.allocateFrom(LONG, bias));
            }
            int aType = key.fp8 == null ? cudaType(key.aType) : cudaType(key.fp8.a());
            int bType = key.fp8 == null ? cudaType(key.bType) : cudaType(key.fp8.b());
            if (key.fp8 != null) {
                setDesc(desc, DESC_A_SCALE_POINTER, call.allocateFrom(LONG, aScale));
                setDesc(desc, DESC_B_SCALE_POINTER, call.allocateFrom(LONG, bScale));
                byte fast = (byte) (key.fp8.fastAccum() ? 1 : 0);
                setDesc(desc, DESC_FAST_ACCUM, call.allocateFrom(ValueLayout.JAVA_BYTE, fast));
                if (key.fp8.perRow()) {
                    setDesc(desc, DESC_A_SCALE_MODE, call.allocateFrom(INT, SCALE_OUTER_VEC_32F));
                    setDesc(desc, DESC_B_SCALE_MODE, call.allocateFrom(INT, SCALE_OUTER_VEC_32F));
                }
            }
            long aLayout = layout(aType, key.transA ? key.k : key.m, key.transA ? key.m : key.k, key.lda, call);
            long bLayout = layout(bType, key.transB ? key.n : key.k, key.transB ? key.k : key.n, key.ldb, call);
            long dLayout = layout(cudaType(key.dType), key.m, key.n, key.ldd, call);

            check("cublasLtMatmulPreferenceCreate", (int) cublasLtMatmulPreferenceCreate.invokeExact(out));
            long pref = out.get(LONG, 0);
            try {
                setPref(pref, PREF_MAX_WORKSPACE_BYTES, call.allocateFrom(LONG, workspaceBytes));
                setPref(pref, PREF_MIN_ALIGNMENT_A, call.allocateFrom(INT, key.alignA));
                setPref(pref, PREF_MIN_ALIGNMENT_B, call.allocateFrom(INT, key.alignB));
                setPref(pref, PREF_MIN_ALIGNMENT_C, call.allocateFrom(INT, key.alignD));
                setPref(pref, PREF_MIN_ALIGNMENT_D, call.allocateFrom(INT, key.alignD));
                MemorySegment results = call.allocate(HEURISTIC_RESULT_BYTES * CANDIDATES, 8);
                MemorySegment count = call.allocate(INT);
                check("cublasLtMatmulAlgoGetHeuristic(" + key + ")", (int) cublasLtMatmulAlgoGetHeuristic.invokeExact(
                        handle, desc, aLayout, bLayout, dLayout, dLayout, pref, CANDIDATES, results, count));
                int found = count.get(INT, 0);
                if (found < 1) {
                    throw new CudaException("cublasLtMatmulAlgoGetHeuristic", 15, "no algorithm for " + key);
                }
                MemorySegment algo = arena.allocate(ALGO_BYTES, 8);
                algo.copyFrom(results.asSlice(0, ALGO_BYTES));
                Plan plan = new Plan(desc, aLayout, bLayout, dLayout, algo);
                var choice = new ChoiceKey(device, key.accumulate() ? key.writing() : key);
                byte[] chosen = CHOSEN.get(choice);
                if (chosen != null) {
                    algo.copyFrom(MemorySegment.ofArray(chosen));
                } else if (timeCandidates && found > 1 && !key.accumulate()) { // timing writes D: not where it is read
                    float[] ms = candidateTimes(plan, results, found, alpha, a, b, d, stream);
                    int fastest = fastest(ms, CLEARLY_FASTER);
                    algo.copyFrom(results.asSlice(fastest * HEURISTIC_RESULT_BYTES, ALGO_BYTES));
                    CHOSEN.putIfAbsent(choice, algo.toArray(ValueLayout.JAVA_BYTE));
                    algo.copyFrom(MemorySegment.ofArray(CHOSEN.get(choice)));
                    timedPlans++;
                    fasterPlans += fastest != 0 ? 1 : 0;
                    firstMs += ms[0];
                    chosenMs += ms[fastest];
                }
                return plan;
            } finally {
                int ignored = (int) cublasLtMatmulPreferenceDestroy.invokeExact(pref);
            }
        }
    }

    /**
     * ms a call of each of the {@code found} candidates in {@code results} takes on the first call's own operands (D
     * written, not read: the call itself runs after, on the chosen one): one untimed call, then the least of
     * {@link #TIMINGS} timings of {@link #TIMED_CALLS} calls; infinite for a candidate cuBLASLt refuses to run.
     */
    private float[] candidateTimes(Plan plan, MemorySegment results, int found, float alpha, long a, long b, long d,
                                   long stream) throws Throwable {
        float[] ms = new float[found];
        long start = Cuda.eventCreate(true), end = Cuda.eventCreate(true);
        try (Arena call = Arena.ofConfined()) {
            MemorySegment alphaHost = call.allocateFrom(ValueLayout.JAVA_FLOAT, alpha);
            MemorySegment betaHost = call.allocateFrom(ValueLayout.JAVA_FLOAT, 0f);
            for (int i = 0; i < found; i++) {
                MemorySegment algo = results.asSlice(i * HEURISTIC_RESULT_BYTES, ALGO_BYTES);
                ms[i] = Float.POSITIVE_INFINITY;
                if ((int) cublasLtMatmul.invokeExact(handle, plan.desc, alphaHost, a, plan.aLayout, b, plan.bLayout,
                        betaHost, d, plan.dLayout, d, plan.dLayout, algo, workspace, workspaceBytes, stream) != 0) {
                    continue;
                }
                for (int t = 0; t < TIMINGS; t++) {
                    Cuda.eventRecord(start, stream);
                    for (int c = 0; c < TIMED_CALLS; c++) {
                        int ignored = (int) cublasLtMatmul.invokeExact(handle, plan.desc, alphaHost, a, plan.aLayout,
                                b, plan.bLayout, betaHost, d, plan.dLayout, d, plan.dLayout, algo, workspace,
                                workspaceBytes, stream);
                    }
                    Cuda.eventRecord(end, stream);
                    Cuda.eventSynchronize(end);
                    ms[i] = Math.min(ms[i], Cuda.eventElapsedMs(start, end) / TIMED_CALLS);
                }
            }
        } finally {
            Cuda.eventDestroy(start);
            Cuda.eventDestroy(end);
        }
        return ms;
    }

    /**
     * The candidate to keep given each one's ms a call ({@code ms[0]}: the heuristic's first): the fastest where it
     * takes at most {@code clearlyFaster} of the first's time (or the first did not run), else the first, so that
     * candidates within timing noise of it leave the heuristic's choice in place.
     */
    static int fastest(float[] ms, double clearlyFaster) {
        int best = 0;
        for (int i = 1; i < ms.length; i++) {
            if (ms[i] < ms[best]) {
                best = i;
            }
        }
        return best == 0 || Float.isInfinite(ms[0]) || ms[best] <= clearlyFaster * ms[0] ? best : 0;
    }

    private static long layout(int cudaType, int rows, int cols, int ld, Arena call) throws Throwable {
        MemorySegment out = call.allocate(PTR);
        check("cublasLtMatrixLayoutCreate", (int) cublasLtMatrixLayoutCreate.invokeExact(out, cudaType,
                (long) rows, (long) cols, (long) ld));
        return out.get(LONG, 0);
    }

    private static void setDesc(long desc, int attribute, MemorySegment value) throws Throwable {
        check("cublasLtMatmulDescSetAttribute(" + attribute + ")",
                (int) cublasLtMatmulDescSetAttribute.invokeExact(desc, attribute, value, value.byteSize()));
    }

    private static void setPref(long pref, int attribute, MemorySegment value) throws Throwable {
        check("cublasLtMatmulPreferenceSetAttribute(" + attribute + ")",
                (int) cublasLtMatmulPreferenceSetAttribute.invokeExact(pref, attribute, value, value.byteSize()));
    }

    private static int cudaType(DType type) {
        return switch (type) {
            case F32 -> CUDA_R_32F;
            case BF16 -> CUDA_R_16BF;
            case F16 -> CUDA_R_16F;
            case I32 -> throw new IllegalArgumentException("cuBLASLt products take float types, not I32");
        };
    }

    private static int cudaType(Fp8 format) {
        return switch (format) {
            case E4M3 -> CUDA_R_8F_E4M3;
            case E5M2 -> CUDA_R_8F_E5M2;
        };
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            for (Plan plan : plans.values()) {
                int s1 = (int) cublasLtMatrixLayoutDestroy.invokeExact(plan.aLayout);
                int s2 = (int) cublasLtMatrixLayoutDestroy.invokeExact(plan.bLayout);
                int s3 = (int) cublasLtMatrixLayoutDestroy.invokeExact(plan.dLayout);
                int s4 = (int) cublasLtMatmulDescDestroy.invokeExact(plan.desc);
            }
            plans.clear();
            if (workspace != 0) {
                Cuda.free(workspace);
            }
            check("cublasLtDestroy", (int) cublasLtDestroy.invokeExact(handle));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            arena.close();
        }
    }

    static void check(String function, int status) {
        if (status == 0) {
            return;
        }
        String text;
        try {
            text = Native.string((MemorySegment) cublasLtGetStatusString.invokeExact(status)) + " ("
                    + Native.string((MemorySegment) cublasLtGetStatusName.invokeExact(status)) + " = " + status + ")";
        } catch (Throwable t) {
            text = "cublasStatus_t " + status;
        }
        throw new CudaException(function, status, text);
    }
}
