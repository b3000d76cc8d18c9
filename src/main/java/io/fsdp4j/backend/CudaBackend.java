package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaLaunches.gridFor;
import static io.fsdp4j.backend.CudaLaunches.suffix;

import io.fsdp4j.config.MatmulAlgorithm;
import io.fsdp4j.cuda.CublasLt;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.CudaKernels;
import io.fsdp4j.cuda.DeviceAllocator;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Fp8;
import io.fsdp4j.tensor.Fp8Scaling;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * One GPU, driven from the thread of the rank that owns it: cuBLASLt for matrix products, fsdp4j's kernels for
 * the rest, everything in order on one compute stream, memory from a caching allocator. Activations are fp32,
 * bf16 or fp16 (fp32 accumulation); parameter gradients, optimizer state and per-row statistics are fp32. The host
 * waits for the GPU only where a value comes back to it (downloads, sums of squares, loss sums).
 *
 * <p>The ops live beside it by concern, each a class of this package: device memory and its scopes
 * ({@link CudaMemory}), page-locked host memory and its copies ({@link CudaHostMemory}), the linear layers on
 * cuBLASLt ({@link CudaLinear}), the norms ({@link CudaNorms}), the element-wise ops ({@link CudaElementwise}) and
 * the optimizer step ({@link CudaAdamW}), attention on fsdp4j's kernels ({@link CudaAttentionKernels}) and the
 * choice between them and cuDNN's ({@link CudaAttention}), launching on the compute stream through {@link
 * CudaLaunches}; embeddings, rotary embedding and the cross-entropy are here.
 *
 * <p>Attention runs on one of two kernel sets ({@link KernelSet}): from sm_80 on, tiled kernels (bf16 on the tensor
 * cores) whose shared memory only sm_80 and later give a block; before (V100's sm_70, T4's sm_75), or when asked
 * ({@value #KERNELS_PROPERTY}, {@value #KERNELS_ENV}: {@code sm70}), the simple kernels of attention.cu, which need
 * neither. On Hopper (sm_90) the bf16 forward and the backward's dk/dv at head sizes 64 and 128 run on
 * attention_sm90.cu (wgmma, the bulk tensor copy engine), unless asked for the sm_80 kernels ({@code sm80}).
 */
public final class CudaBackend implements Backend, AutoCloseable {
    private final int device;
    private final long stream;
    private final long commStream;
    private final DeviceAllocator allocator;
    private final CudaKernels kernels = new CudaKernels();
    private final CudaMemory memory;
    private final CudaHostMemory hostMemory;
    private final CudaLaunches launches;
    private final CudaLinear linear;
    /** The weights' amaxes AdamW's pass over a kept bf16 copy writes, for fp8's casts. */
    private final KnownAmax knownAmax;
    private final CudaNorms norms;
    private final CudaElementwise elementwise;
    private final CudaAdamW adamw;
    private final boolean simpleAttention;
    private final CudaAttention attention = new CudaAttention(this, line -> System.err.println("fsdp4j: " + line));
    private final boolean hopperAttention;
    private final CudaAttentionKernels attentionKernels;

    /** The system property that chooses the attention kernels ({@link KernelSet#parse}); before the variable. */
    public static final String KERNELS_PROPERTY = "fsdp4j.cuda.kernels";
    /** The environment variable that chooses the attention kernels ({@link KernelSet#parse}). */
    public static final String KERNELS_ENV = "FSDP4J_CUDA_KERNELS";

    /**
     * Which attention kernels run. {@code auto}: the tiled ones (tensor cores for bf16) on sm_80 and later, the simple
     * ones (no shared memory, no tensor cores) on earlier GPUs, and on sm_90 Hopper's own forward and dk/dv
     * (attention_sm90.cu) where they apply; {@code sm80}: the tiled mma.sync kernels also on sm_90 (how the Hopper
     * kernels are compared);
     * {@code sm70}: the simple ones on any GPU (how they are tested on an H100).
     */
    public enum KernelSet {
        AUTO, SM80, SM70;

        /** The set named by {@value #KERNELS_PROPERTY}, else {@value #KERNELS_ENV}, else auto. */
        public static KernelSet configured() {
            String chosen = System.getProperty(KERNELS_PROPERTY);
            return parse(chosen != null ? chosen : System.getenv(KERNELS_ENV));
        }

        /** {@code auto}, {@code sm80} or {@code sm70} (any case; null or blank: auto). */
        public static KernelSet parse(String text) {
            if (text == null || text.isBlank()) {
                return AUTO;
            }
            return switch (text.strip().toLowerCase(java.util.Locale.ROOT)) {
                case "auto" -> AUTO;
                case "sm80" -> SM80;
                case "sm70" -> SM70;
                default -> throw new IllegalArgumentException(KERNELS_PROPERTY + " / " + KERNELS_ENV
                        + " must be auto, sm80 or sm70, got '" + text + "'");
            };
        }

        /** Whether the simple attention kernels run on a GPU of compute capability {@code major}.x. */
        public boolean simpleOn(int major) {
            return this == SM70 || major < 8;
        }

        /** Whether Hopper's attention kernels (attention_sm90.cu) run on a GPU of compute capability {@code major}.x. */
        public boolean hopperOn(int major) {
            return this == AUTO && major == 9;
        }
    }

    /** Opens the backend for GPU {@code device}, making it the calling thread's current device. */
    public CudaBackend(int device) {
        this(device, KernelSet.configured());
    }

    /** Opens the backend for GPU {@code device} with the attention kernels of {@code kernels}. */
    public CudaBackend(int device, KernelSet kernels) {
        this.device = device;
        Cuda.setDevice(device);
        this.simpleAttention = kernels.simpleOn(Cuda.properties(device).major());
        this.hopperAttention = kernels.hopperOn(Cuda.properties(device).major());
        this.stream = Cuda.streamCreate();
        this.commStream = Cuda.streamCreate();
        this.hostMemory = new CudaHostMemory(stream);
        this.allocator = new DeviceAllocator(device);
        this.memory = new CudaMemory(device, name(), stream, allocator);
        this.launches = new CudaLaunches(this.kernels, stream);
        this.knownAmax = new KnownAmax(memory, launches);
        this.linear = new CudaLinear(launches, memory, knownAmax);
        this.norms = new CudaNorms(launches, memory);
        this.elementwise = new CudaElementwise(launches, memory);
        this.adamw = new CudaAdamW(launches, memory);
        this.attentionKernels = new CudaAttentionKernels(this.kernels, launches, memory, simpleAttention,
                hopperAttention, Cuda.properties(device).smCount());
    }

    @Override
    public String name() {
        return "cuda:" + device;
    }

    public int device() {
        return device;
    }

    /**
     * How the matrix products pick their cuBLASLt algorithms ({@code matmul.algorithm}); a backend nobody sets takes
     * the heuristic's first, as training does by default; {@code timed} times the candidates.
     */
    public void useMatmulAlgorithm(MatmulAlgorithm algorithm) {
        linear.blas().timeCandidates(algorithm == MatmulAlgorithm.TIMED);
    }

    /** What the timed choices of this backend's products found so far. */
    public CublasLt.Timings matmulTimings() {
        return linear.blas().timings();
    }

    /** Which engine runs attention, shape by shape: fsdp4j's kernels or cuDNN's ({@code attention.kernel}). */
    public CudaAttention attention() {
        return attention;
    }

    /** Attention on fsdp4j's own kernels (the engine {@link CudaAttention} calls fsdp4j's). */
    CudaAttentionKernels attentionKernels() {
        return attentionKernels;
    }

    /** Whether attention runs on the simple kernels (sm_70 and sm_75, or asked for: {@link KernelSet}). */
    public boolean simpleAttention() {
        return simpleAttention;
    }

    /** Whether attention runs on Hopper's kernels where they apply (sm_90, {@link KernelSet#AUTO}). */
    public boolean hopperAttention() {
        return hopperAttention;
    }

    /** The compute stream: every op, and the collectives of this rank, are ordered on it. */
    public long stream() {
        return stream;
    }

    /** The stream collectives run on, beside the compute stream (see the dist package's NCCL groups). */
    public long commStream() {
        return commStream;
    }

    public DeviceAllocator allocator() {
        return allocator;
    }

    @Override
    public boolean computesIn(DType dtype) {
        return dtype == DType.F32 || dtype == DType.BF16 || dtype == DType.F16;
    }

    // ---- memory ---------------------------------------------------------------------------------------

    @Override
    public MemoryScope newScope() {
        return memory.newScope();
    }

    /** Device pointer of a tensor's first element. */
    public static long ptr(Tensor t) {
        return CudaLaunches.ptr(t);
    }

    @Override
    public Tensor allocate(DType dtype, int... shape) {
        return memory.allocate(dtype, shape);
    }

    @Override
    public Tensor allocateForWrite(DType dtype, int... shape) {
        return memory.allocateForWrite(dtype, shape);
    }

    @Override
    public Tensor upload(float[] values, int... shape) {
        return memory.upload(values, shape);
    }

    @Override
    public Tensor uploadInts(int[] values, int... shape) {
        return memory.uploadInts(values, shape);
    }

    @Override
    public float[] toFloats(Tensor t) {
        return memory.toFloats(t);
    }

    @Override
    public int[] toInts(Tensor t) {
        return memory.toInts(t);
    }

    // ---- host memory ----------------------------------------------------------------------------------

    @Override
    public MemorySegment allocateHost(long floats) {
        return hostMemory.allocateHost(floats);
    }

    @Override
    public HostCopy copyFromHost(MemorySegment src, Tensor dst) {
        return hostMemory.copyFromHost(src, dst);
    }

    @Override
    public HostCopy copyToHost(Tensor src, MemorySegment dst) {
        return hostMemory.copyToHost(src, dst);
    }

    @Override
    public void waitForHostCopies() {
        hostMemory.waitForHostCopies();
    }

    /** Waits for everything queued on the compute stream. */
    public void synchronize() {
        Cuda.streamSynchronize(stream);
    }

    private void launch(String file, String name, int grid, int block, Object... args) {
        launches.launch(file, name, grid, block, args);
    }

    // ---- element-wise ---------------------------------------------------------------------------------

    @Override
    public void fill(Tensor t, float value) {
        knownAmax.forget(t);
        elementwise.fill(t, value);
    }

    @Override
    public void copy(Tensor src, Tensor dst) {
        knownAmax.forget(dst);
        elementwise.copy(src, dst);
    }

    @Override
    public void add(Tensor dst, Tensor src) {
        elementwise.add(dst, src);
    }

    @Override
    public void scale(Tensor t, float factor) {
        elementwise.scale(t, factor);
    }

    @Override
    public double sumOfSquares(Tensor t) {
        return sumsOfSquares(List.of(t))[0];
    }

    /**
     * Each tensor's partial sums (a block's grid-stride share, in double) and their total, every total into one
     * device buffer, read back with one wait for the stream.
     */
    @Override
    public double[] sumsOfSquares(List<Tensor> tensors) {
        return elementwise.sumsOfSquares(tensors);
    }

    @Override
    public void swigluForward(Tensor out, Tensor gateUp) {
        elementwise.swigluForward(out, gateUp, 0);
    }

    @Override
    public void swigluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp) {
        elementwise.swigluBackward(dGateUp, dOut, gateUp, 0);
    }

    @Override
    public void swigluForward(Tensor out, Tensor gateUp, Fp8Casts amaxes) {
        Fp8Amax amax = outputAmax(amaxes);
        if (elementwise.swigluForward(out, gateUp, amax == null ? 0 : amax.address())) {
            keep(amaxes, out, Fp8.E4M3, amax);
        }
    }

    @Override
    public void swigluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp, Fp8Casts amaxes) {
        Fp8Amax amax = outputAmax(amaxes);
        if (elementwise.swigluBackward(dGateUp, dOut, gateUp, amax == null ? 0 : amax.address())) {
            keep(amaxes, dGateUp, Fp8.E5M2, amax);
        }
    }

    /** A zeroed slot in the caller's memory for an output's amax, where a store wants it; else null. */
    private Fp8Amax outputAmax(Fp8Casts amaxes) {
        return amaxes == null ? null : new Fp8Amax(ptr(memory.allocate(DType.F32, 1)));
    }

    /** The amax a kernel computed into {@code amax} (null: none asked) kept in the store as t's in {@code format}. */
    private static void keep(Fp8Casts amaxes, Tensor t, Fp8 format, Fp8Amax amax) {
        if (amax != null) {
            amax.computed();
            amaxes.keep(t, format, amax);
        }
    }

    @Override
    public void gegluForward(Tensor out, Tensor gateUp) {
        elementwise.gegluForward(out, gateUp);
    }

    @Override
    public void gegluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp) {
        elementwise.gegluBackward(dGateUp, dOut, gateUp);
    }

    @Override
    public void geluForward(Tensor out, Tensor x) {
        elementwise.geluForward(out, x);
    }

    @Override
    public void geluBackward(Tensor dx, Tensor dOut, Tensor x) {
        elementwise.geluBackward(dx, dOut, x);
    }

    @Override
    public void softcapForward(Tensor x, float cap) {
        elementwise.softcapForward(x, cap);
    }

    @Override
    public void softcapBackward(Tensor dx, Tensor capped, float cap) {
        elementwise.softcapBackward(dx, capped, cap);
    }

    @Override
    public void dropout(Tensor out, Tensor x, double p, long seed, long firstIndex) {
        elementwise.dropout(out, x, p, seed, firstIndex);
    }

    // ---- norms ----------------------------------------------------------------------------------------

    @Override
    public void rmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) {
        norms.rmsNormForward(out, rstd, x, weight, eps);
    }

    @Override
    public void rmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd) {
        rmsNormBackward(dx, dWeight, dOut, x, weight, rstd, true);
    }

    /** Not accumulating, the weight gradient's last kernel writes it: no zeroing first. */
    @Override
    public void rmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd,
                                boolean accumulate) {
        norms.rmsNormBackward(dx, dWeight, dOut, x, weight, rstd, accumulate);
    }

    @Override
    public void headRmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, int firstHead, float eps) {
        norms.headRmsNormForward(out, rstd, x, weight, firstHead, eps);
    }

    /** The weight gradient first: dx may be dOut, which it reads. */
    @Override
    public void headRmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd,
                                    int firstHead, boolean accumulate) {
        norms.headRmsNormBackward(dx, dWeight, dOut, x, weight, rstd, firstHead, accumulate);
    }

    @Override
    public void layerNormForward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias, float eps) {
        norms.layerNormForward(out, mean, rstd, x, weight, bias, eps);
    }

    @Override
    public void layerNormBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                                  Tensor mean, Tensor rstd) {
        norms.layerNormBackward(dx, dWeight, dBias, dOut, x, weight, mean, rstd);
    }

    // ---- linear layers, the optimizer -----------------------------------------------------------------

    @Override
    public void linearForward(Tensor out, Tensor x, Tensor weight, Tensor bias) {
        linear.linearForward(out, x, weight, bias);
    }

    @Override
    public void linearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight) {
        linearBackward(dx, dWeight, dBias, dOut, x, weight, true);
    }

    /** The weight gradient's product writes (beta 0) instead of adding when not accumulating: no read, no zeroing. */
    @Override
    public void linearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                               boolean accumulate) {
        linear.linearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate);
    }

    @Override
    public void fp8LinearForward(Tensor out, Tensor x, Tensor weight, Tensor bias, Fp8Casts casts,
                                 Fp8Scaling scaling) {
        linear.fp8LinearForward(out, x, weight, bias, casts, scaling);
    }

    @Override
    public void fp8LinearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                                  boolean accumulate, Fp8Casts casts, Fp8Scaling scaling) {
        linear.fp8LinearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate, casts, scaling);
    }

    @Override
    public void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, float lr, float beta1, float beta2, float eps,
                      float weightDecay, long step, float gradScale) {
        adamw.step(param, grad, m, v, lr, beta1, beta2, eps, weightDecay, step, gradScale);
    }

    /** One launch for every segment (multi-tensor AdamW), where they fit one: the same bits as a launch a segment. */
    @Override
    public void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, List<AdamWSegment> segments, float lr,
                      float beta1, float beta2, float eps, float weightDecay, long step, float gradScale) {
        if (CudaAdamW.oneLaunch(segments, param, grad, m, v)) {
            adamw.step(param, grad, m, v, segments, lr, beta1, beta2, eps, weightDecay, step, gradScale);
        } else {
            Backend.super.adamw(param, grad, m, v, segments, lr, beta1, beta2, eps, weightDecay, step, gradScale);
        }
    }

    /** As above, the rounded copy written in the same launch where the segments fit one. */
    @Override
    public void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, List<AdamWSegment> segments, float lr,
                      float beta1, float beta2, float eps, float weightDecay, long step, float gradScale,
                      Tensor rounded) {
        if (CudaAdamW.oneLaunch(segments, param, grad, m, v) && CudaAdamW.roundsInLaunch(rounded, param)) {
            // fp8 runs: each parameter's amax of its new bf16 values too, for the casts of the next forward
            Tensor amax = rounded.dtype() == DType.BF16 && knownAmax.wanted() ? knownAmax.slotsFor(rounded, segments)
                    : null;
            adamw.step(param, grad, m, v, segments, lr, beta1, beta2, eps, weightDecay, step, gradScale,
                    CudaAdamW.gridOf(param), rounded, amax);
        } else { // its copies into rounded forget any amax kept for it
            Backend.super.adamw(param, grad, m, v, segments, lr, beta1, beta2, eps, weightDecay, step, gradScale,
                    rounded);
        }
    }

    // ---- embeddings, rotary embedding, cross-entropy --------------------------------------------------

    @Override
    public void embeddingForward(Tensor out, Tensor ids, Tensor table) {
        int n = Math.toIntExact(ids.numel()), c = table.dim(1), v = table.dim(0);
        launch("embedding", "embedding_forward_" + suffix(table), n, 256, ptr(out), ptr(ids), ptr(table), n, c, v);
    }

    @Override
    public void embeddingBackward(Tensor dTable, Tensor ids, Tensor dOut) {
        int n = Math.toIntExact(ids.numel()), c = dTable.dim(1), v = dTable.dim(0);
        launch("embedding", "embedding_backward_" + suffix(dOut), n, 256, ptr(dTable), ptr(ids), ptr(dOut), n, c, v);
    }

    @Override
    public double crossEntropy(Tensor logits, Tensor targets, float gradScale, Tensor lossPerRow) {
        int v = logits.dim(-1), n = Math.toIntExact(logits.numel() / v);
        try (MemoryScope scratch = newScope(); var entered = scratch.enter()) {
            // every row's loss written, and the total
            Tensor rows = lossPerRow != null ? lossPerRow : allocateForWrite(DType.F32, n);
            Tensor total = allocateForWrite(DType.F32, 2);
            boolean x8 = CudaLaunches.bf16x8(v, logits);
            launch("cross_entropy", "cross_entropy_" + suffix(logits) + (x8 ? "_x8" : ""), n, 1024, ptr(logits),
                    ptr(rows), ptr(targets), n, v, gradScale);
            launch("cross_entropy", "cross_entropy_sum", 1, 1024, ptr(total), ptr(rows), n);
            return memory.readDoubles(total, 1)[0];
        }
    }

    @Override
    public int[] argmaxRows(Tensor logits) {
        int v = logits.dim(-1), n = Math.toIntExact(logits.numel() / v);
        if (n == 0) {
            return new int[0];
        }
        try (MemoryScope scratch = newScope(); var entered = scratch.enter()) {
            Tensor out = allocateForWrite(DType.I32, n);
            launch("cross_entropy", "argmax_rows_" + suffix(logits), n, 256, ptr(out), ptr(logits), n, v);
            return toInts(out);
        }
    }

    @Override
    public void ropeForward(Tensor x, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin) {
        rope("rope_forward_", x, rotatedHeads, positions, cos, sin);
    }

    @Override
    public void ropeBackward(Tensor dx, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin) {
        rope("rope_backward_", dx, rotatedHeads, positions, cos, sin);
    }

    private void rope(String kernel, Tensor x, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin) {
        int n = Math.toIntExact(positions.numel()), width = Math.toIntExact(x.numel() / n), hs = 2 * cos.dim(1);
        launch("rope", kernel + suffix(x), n, 128, ptr(x), ptr(positions), ptr(cos), ptr(sin), n, width,
                rotatedHeads, hs);
    }

    @Override
    public void attentionForward(Tensor out, Tensor lse, Tensor qkv, Tensor documentStarts, AttentionShape s) {
        if (!simpleAttention && attention.engineFor(qkv, documentStarts, s, false) == CudaAttention.Engine.CUDNN) {
            attention.cudnnForward(out, lse, qkv, s);
        } else {
            attentionKernels.forward(out, lse, qkv, documentStarts, s);
        }
    }

    @Override
    public void attentionBackward(Tensor dQkv, Tensor dOut, Tensor qkv, Tensor out, Tensor lse, Tensor documentStarts,
                                  AttentionShape s) {
        if (!simpleAttention && attention.engineFor(qkv, documentStarts, s, true) == CudaAttention.Engine.CUDNN) {
            attention.cudnnBackward(dQkv, dOut, qkv, out, lse, s);
        } else {
            attentionKernels.backward(dQkv, dOut, qkv, out, lse, documentStarts, s);
        }
    }

    @Override
    public void kvCacheAppend(Tensor keys, Tensor values, Tensor qkv, Tensor positions, AttentionShape s) {
        requireCacheOf(keys, values, qkv, s);
        int n = Math.toIntExact(qkv.numel() / s.qkvWidth());
        launch("attention", "kv_cache_append_" + suffix(qkv), gridFor((long) n * s.kvHeads() * s.headDim()), 256,
                ptr(keys), ptr(values), ptr(qkv), ptr(positions), n, s.seqLen(), keys.dim(1), s.heads(), s.kvHeads(),
                s.headDim(), s.layout() == AttentionShape.QkvLayout.PER_HEAD ? 1 : 0);
    }

    @Override
    public void attentionCached(Tensor out, Tensor qkv, Tensor keys, Tensor values, Tensor positions,
                                AttentionShape s) {
        requireCacheOf(keys, values, qkv, s);
        int n = Math.toIntExact(qkv.numel() / s.qkvWidth());
        launch("attention", "attention_cached_" + suffix(qkv), (n * s.heads() + 7) / 8, 256, ptr(out), ptr(qkv),
                ptr(keys), ptr(values), ptr(positions), n, s.seqLen(), keys.dim(1), s.heads(), s.kvHeads(),
                s.headDim(), s.slidingWindow(), s.scale(), s.layout() == AttentionShape.QkvLayout.PER_HEAD ? 1 : 0,
                s.alibi() ? 1 : 0);
    }

    /** The cached-attention kernels' limits: the cache in qkv's type, heads of at most 256 columns. */
    private static void requireCacheOf(Tensor keys, Tensor values, Tensor qkv, AttentionShape s) {
        if (keys.dtype() != qkv.dtype() || values.dtype() != qkv.dtype()) {
            throw new IllegalArgumentException("KV cache " + keys + " is not of the type of " + qkv);
        }
        if (s.headDim() > 256) {
            throw new IllegalArgumentException("cached attention takes heads of at most 256 columns, got "
                    + s.headDim());
        }
    }

    /**
     * How many fp8 casts took their tensor's amax from AdamW's pass over a kept bf16 copy ({@link KnownAmax}) instead
     * of reading the tensor: what tests and profiles check it by.
     */
    public long knownAmaxesTaken() {
        return knownAmax.taken();
    }

    /** Frees every buffer (scoped or not), the kernels, cuBLASLt, the host memory and the streams. */
    @Override
    public void close() {
        Cuda.setDevice(device);
        Cuda.streamSynchronize(commStream);
        Cuda.streamSynchronize(stream);
        memory.freeUnscoped();
        attention.close();
        kernels.close();
        linear.close();
        knownAmax.close();
        allocator.close();
        hostMemory.close();
        Cuda.streamDestroy(stream);
        Cuda.streamDestroy(commStream);
    }

    // ---- NF4 (QLoRA's frozen base: lora.quantize) ---------------------------------------------------------

    @Override
    public void dequantizeNf4(Tensor out, Tensor codes, Tensor absmax) {
        long n = out.numel();
        if (n % 64 != 0 || codes.dtype() != DType.I32 || codes.numel() * 8 != n || absmax.numel() * 64 != n) {
            throw new IllegalArgumentException("NF4 dequantization of " + codes + " and " + absmax + " into " + out);
        }
        launch("nf4", "nf4_dequantize_" + suffix(out), gridFor(n / 2), 256, ptr(out), ptr(codes), ptr(absmax), n);
    }
}
