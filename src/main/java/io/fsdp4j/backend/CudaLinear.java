package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaBackend.ptr;
import static io.fsdp4j.backend.CudaLaunches.ROWS_PER_CHUNK;
import static io.fsdp4j.backend.CudaLaunches.chunks;
import static io.fsdp4j.backend.CudaLaunches.gridFor;
import static io.fsdp4j.backend.CudaLaunches.suffix;

import io.fsdp4j.UserError;
import io.fsdp4j.cuda.CublasLt;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.CudaException;
import io.fsdp4j.cuda.Kernel;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Fp8;
import io.fsdp4j.tensor.Fp8Scaling;
import io.fsdp4j.tensor.Tensor;
import java.util.Locale;

/**
 * {@link CudaBackend}'s linear layers: the matrix products on cuBLASLt (the forward's bias in its epilogue), a bias's
 * gradient by bias.cu's column sums; the fp8 products ({@link Backend#fp8LinearForward}) on cuBLASLt's fp8 kernels,
 * their operands cast by fp8.cu (amax and scale on the device, row-major or transposed: cuBLASLt takes fp8 operands
 * K-major only) into scratch that lives for the one product, or, given a store ({@link Fp8Casts}), kept for the
 * backward of a recomputed forward.
 */
final class CudaLinear implements AutoCloseable {
    private final CublasLt blas = new CublasLt();
    private final CudaLaunches launches;
    private final CudaMemory memory;
    private final long stream;
    private final KnownAmax knownAmax;
    /** Where the amax slots live: as long as this. */
    private final MemoryScope slots;
    /** {@link #AMAX_SLOTS} zeroed amax slots, handed out one a cast by {@link #amaxSlot}; null until the first. */
    private Tensor amaxSlots;
    private int nextSlot = AMAX_SLOTS;

    /** How many amax slots one memset zeroes ({@link #amaxSlot}). */
    static final int AMAX_SLOTS = 1024;

    CudaLinear(CudaLaunches launches, CudaMemory memory, KnownAmax knownAmax) {
        this.launches = launches;
        this.memory = memory;
        this.stream = launches.stream();
        this.knownAmax = knownAmax;
        this.slots = memory.newScope();
    }

    /**
     * A zeroed slot for one cast's amax (a float's bits, maxed into by fp8_amax), read only by that cast's kernel. The
     * slots are handed out in turn and zeroed together, all {@link #AMAX_SLOTS} by one memset queued once the last is
     * handed out: on the one stream, after every kernel that read them. Before, each cast zeroed its own (a memset a
     * cast, about 560 a step of Qwen2.5-7B).
     */
    private long amaxSlot() {
        if (nextSlot == AMAX_SLOTS) {
            if (amaxSlots == null) {
                try (var entered = slots.enter()) {
                    amaxSlots = memory.allocateForWrite(DType.I32, AMAX_SLOTS);
                }
            }
            Cuda.memsetAsync(ptr(amaxSlots), 0, (long) AMAX_SLOTS * Integer.BYTES, stream);
            nextSlot = 0;
        }
        return ptr(amaxSlots) + (long) Integer.BYTES * nextSlot++;
    }

    /** The products' cuBLASLt handle: its algorithm choice ({@code matmul.algorithm}) and what timing found. */
    CublasLt blas() {
        return blas;
    }

    void linearForward(Tensor out, Tensor x, Tensor weight, Tensor bias) {
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        blas.linearForward(ptr(out), out.dtype(), ptr(x), ptr(weight), weight.dtype(), ptr(bias), n, in, o, stream);
    }

    /** The weight gradient's product writes (beta 0) instead of adding when not accumulating: no read, no zeroing. */
    void linearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                        boolean accumulate) {
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        if (dx != null) {
            blas.linearBackwardInput(ptr(dx), dx.dtype(), ptr(dOut), ptr(weight), weight.dtype(), n, in, o, 0f, stream);
        }
        if (CpuBackend.frozenWeight(dWeight, dBias)) { // no weight gradient wanted: no dW product, no bias reduction
            return;
        }
        blas.linearBackwardWeight(ptr(dWeight), dWeight.dtype(), ptr(dOut), ptr(x), x.dtype(), n, in, o,
                accumulate ? 1f : 0f, stream);
        biasGradient(dBias, dOut, n, o, accumulate);
    }

    /** dBias (O) (+)= the column sums of dOut (N,O); nothing for a null dBias. */
    private void biasGradient(Tensor dBias, Tensor dOut, int n, int o, boolean accumulate) {
        if (dBias != null) {
            int chunks = chunks(n);
            try (MemoryScope scratch = memory.newScope(); var entered = scratch.enter()) {
                Tensor partials = memory.allocateForWrite(DType.F32, chunks, o); // every (chunk, column) written
                launches.launch("bias", "bias_grad_partial_" + suffix(dOut),
                        new Kernel.Dim3((o + 255) / 256, chunks, 1), 256, ptr(partials), ptr(dOut), n, o,
                        ROWS_PER_CHUNK);
                launches.launch("bias", "bias_grad_finish", (o + 255) / 256, 256, ptr(dBias), ptr(partials), chunks, o,
                        accumulate ? 1 : 0); // not accumulating: written, no zeroing first
            }
        }
    }

    // ---- fp8 ---------------------------------------------------------------------------------------------

    /**
     * An operand cast to fp8: its bytes row-major and transposed (0 where not asked for) and the inverse scales each
     * layout was cast with: the same one scale for both (tensorwise), or (rowwise, {@code perRow}) one per row for the
     * row-major bytes and one per column for the transposed ones.
     */
    private record Cast(long rowMajor, long transposed, long rowsInverse, long columnsInverse, Fp8 format,
                        boolean perRow) {
        /** Tensorwise: one inverse scale for both layouts. */
        Cast(long rowMajor, long transposed, long inverseScale, Fp8 format) {
            this(rowMajor, transposed, inverseScale, inverseScale, format, false);
        }

        CublasLt.Fp8Operand rows() {
            return new CublasLt.Fp8Operand(rowMajor, format, rowsInverse, perRow);
        }

        CublasLt.Fp8Operand columns() {
            return new CublasLt.Fp8Operand(transposed, format, columnsInverse, perRow);
        }

        /** Whether this cast holds the layouts asked for. */
        boolean holds(boolean rows, boolean columns) {
            return (!rows || rowMajor != 0) && (!columns || transposed != 0);
        }
    }

    /**
     * t, (rows, cols) row-major, cast to {@code format} (its memory in the scope entered by the caller): its amax
     * (from {@link KnownAmax} where AdamW wrote it, from {@code given} where it is known, else an amax
     * pass into {@code given}'s slot or, with none given, one of {@link #amaxSlot}'s), then its elements scaled and
     * rounded, into a row-major copy and/or a transposed one, in one kernel.
     */
    private Cast cast(Tensor t, int rows, int cols, Fp8 format, boolean rowMajor, boolean transposed,
                      Fp8Scaling scaling, Fp8Amax given) {
        if (!rowMajor && !transposed) {
            throw new IllegalArgumentException("a cast to fp8 writes a row-major copy, a transposed one, or both");
        }
        if (scaling == Fp8Scaling.ROW) {
            return castRowwise(t, rows, cols, format, rowMajor, transposed);
        }
        long n = (long) rows * cols;
        // the inverse scale, written by the cast: on its own allocation, which is 16-byte aligned as cuBLASLt wants
        // (CUBLAS_STATUS_NOT_SUPPORTED from cublasLtMatmul for a scale pointer that is not, cuBLASLt 13.1 on an H200,
        // 2026-11-26: .hx probe, one scale 4 bytes after the other)
        long inverse = ptr(memory.allocateForWrite(DType.F32, 1));
        long row = rowMajor ? ptr(bytes(n)) : 0, column = transposed ? ptr(bytes(n)) : 0;
        String f = format.name().toLowerCase(Locale.ROOT);
        // eight elements a thread: bf16, 16-byte aligned, rows and columns multiples of 8 (fp8's shapes are of 16)
        boolean x8 = t.dtype() == DType.BF16 && n % 8 == 0 && ptr(t) % 16 == 0 && rows % 8 == 0 && cols % 8 == 0;
        int grid = (int) Math.min(gridFor(x8 ? n / 8 : n), 1024);
        if (t.dtype() == DType.BF16) {
            knownAmax.want(); // AdamW's passes over kept bf16 copies keep their weights' amaxes from now on
        }
        long amax = knownAmax.of(t, this::amaxSlot); // a weight of such a copy: its amax without reading it
        if (amax == 0 && given != null && given.known()) {
            amax = given.address(); // kept in a store: by t's forward cast, or by the kernel that wrote t
        } else if (amax == 0) {
            amax = given != null ? given.address() : amaxSlot();
            launches.launch("fp8", "fp8_amax_" + suffix(t) + (x8 ? "x8" : ""), grid, 256, amax, ptr(t),
                    x8 ? n / 8 : n);
            if (given != null) {
                given.computed();
            }
        }
        if (x8 && !transposed) {
            launches.launch("fp8", "fp8_cast_rows_" + f + "_bf16x8", grid, 256, row, inverse, amax, ptr(t), n / 8);
        } else if (x8) { // 128 x 64 tiles, both layouts written eight bytes a thread
            launches.launch("fp8", "fp8_cast_tiles_" + f + "_bf16x8",
                    new Kernel.Dim3((cols + 63) / 64, (rows + 127) / 128, 1), 256, row, column, inverse, amax, ptr(t),
                    rows, cols);
        } else {
            launches.launch("fp8", "fp8_cast_" + f + "_" + suffix(t),
                    new Kernel.Dim3((cols + 31) / 32, (rows + 31) / 32, 1), 256, row, column, inverse, amax, ptr(t),
                    rows, cols);
        }
        return new Cast(row, column, inverse, format);
    }

    /** {@link #cast(Tensor, int, int, Fp8, boolean, boolean, Fp8Scaling, Fp8Amax)} with no amax given. */
    private Cast cast(Tensor t, int rows, int cols, Fp8 format, boolean rowMajor, boolean transposed,
                      Fp8Scaling scaling) {
        return cast(t, rows, cols, format, rowMajor, transposed, scaling, null);
    }

    /**
     * Rowwise ({@link Fp8Scaling#ROW}): the row-major bytes with a scale per row (a warp a row: its amax, then its
     * elements), the transposed ones with a scale per column (the columns' amaxes in one pass, then transposing
     * tiles). Each layout reads t on its own: their scales differ. Eight bf16 a load where t is 16-byte aligned and its
     * columns (and, transposed, its rows) come in eights, as the tensorwise casts; else one element at a time.
     */
    private Cast castRowwise(Tensor t, int rows, int cols, Fp8 format, boolean rowMajor, boolean transposed) {
        long n = (long) rows * cols;
        String f = format.name().toLowerCase(Locale.ROOT), type = suffix(t);
        boolean x8 = t.dtype() == DType.BF16 && ptr(t) % 16 == 0 && cols % 8 == 0;
        long row = 0, rowsInverse = 0, column = 0, columnsInverse = 0;
        if (rowMajor) {
            row = ptr(bytes(n));
            rowsInverse = ptr(memory.allocateForWrite(DType.F32, rows)); // every row's written
            launches.launch("fp8", "fp8_cast_rowwise_" + f + "_" + type + (x8 ? "x8" : ""), (rows + 7) / 8, 256, row,
                    rowsInverse, ptr(t), rows, x8 ? cols / 8 : cols);
        }
        if (transposed) {
            boolean tiles = x8 && rows % 8 == 0;
            Tensor amax = memory.allocate(DType.F32, cols); // zeroed: the columns' pass maxes into it
            int groups = x8 ? cols / 8 : cols;
            launches.launch("fp8", "fp8_amax_columns_" + type + (x8 ? "x8" : ""),
                    new Kernel.Dim3((groups + 255) / 256, (rows + 63) / 64, 1), 256, ptr(amax), ptr(t), rows, groups);
            column = ptr(bytes(n));
            columnsInverse = ptr(memory.allocateForWrite(DType.F32, cols));
            if (tiles) { // 128 x 64 tiles, eight bytes a thread
                launches.launch("fp8", "fp8_cast_columns_" + f + "_bf16x8",
                        new Kernel.Dim3((cols + 63) / 64, (rows + 127) / 128, 1), 256, column, columnsInverse,
                        ptr(amax), ptr(t), rows, cols);
            } else {
                launches.launch("fp8", "fp8_cast_columns_" + f + "_" + type,
                        new Kernel.Dim3((cols + 31) / 32, (rows + 31) / 32, 1), 256, column, columnsInverse,
                        ptr(amax), ptr(t), rows, cols);
            }
        }
        return new Cast(row, column, rowsInverse, columnsInverse, format, true);
    }

    /**
     * t cast as {@link #cast} would, taken from {@code casts} where an earlier product kept it with the layouts asked
     * for; else cast (counted in {@code casts}) and, with a store, kept there (in the scope entered now: the caller's,
     * which outlives the store's use).
     */
    private Cast cast(Fp8Casts casts, Tensor t, int rows, int cols, Fp8 format, boolean rowMajor,
                      boolean transposed, Fp8Scaling scaling, Fp8Amax given) {
        if (casts == null) {
            return cast(t, rows, cols, format, rowMajor, transposed, scaling, given);
        }
        Cast found = casts.find(t, format, Cast.class, c -> c.holds(rowMajor, transposed));
        if (found != null) {
            return found;
        }
        Cast made = cast(t, rows, cols, format, rowMajor, transposed, scaling, given);
        casts.made();
        casts.keep(t, format, made);
        return made;
    }

    /** Device scratch of {@code n} bytes (at least), written whole by a cast. */
    private Tensor bytes(long n) {
        return memory.allocateForWrite(DType.I32, Math.toIntExact((n + 3) / 4));
    }

    /**
     * {@link Backend#fp8LinearForward}: out^T (O x N) = W8 (stored I x O) ^T . x8 (I x N), both e4m3 and K-major as
     * they lie, with the tensor cores' fast accumulation (torchao's choice for the forward), the bias in the epilogue.
     * With a store ({@code casts}) the weight is cast transposed too (for the backward's dx), and x too where the
     * backward computes weight gradients, each in the same kernel as its row-major cast, kept in the caller's scope.
     */
    void fp8LinearForward(Tensor out, Tensor x, Tensor weight, Tensor bias, Fp8Casts casts, Fp8Scaling scaling) {
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        if (!Fp8Products.applies(n, in, o)) {
            linearForward(out, x, weight, bias);
            return;
        }
        Cast w8 = null, x8 = null;
        Fp8Amax xAmax = kept(casts, x, Fp8.E4M3, scaling); // computed by the kernel that wrote x
        if (casts != null && casts.amaxesOnly()) { // x's amax kept in the caller's memory for the backward's cast
            if (xAmax == null && scaling == Fp8Scaling.TENSOR && casts.weightGradients()) {
                xAmax = new Fp8Amax(ptr(memory.allocate(DType.F32, 1)));
                casts.keep(x, Fp8.E4M3, xAmax);
            }
        } else if (casts != null) { // kept: cast in the caller's scope
            w8 = cast(casts, weight, o, in, Fp8.E4M3, true, true, scaling, null);
            x8 = cast(casts, x, n, in, Fp8.E4M3, true, casts.weightGradients(), scaling, xAmax);
        }
        try (MemoryScope scratch = memory.newScope(); var entered = scratch.enter()) {
            Cast w = w8 != null ? w8 : cast(weight, o, in, Fp8.E4M3, true, false, scaling);
            Cast a = x8 != null ? x8 : cast(x, n, in, Fp8.E4M3, true, false, scaling, xAmax);
            fp8Product(() -> blas.fp8Matmul(o, n, in, w.rows(), in, a.rows(), in, 0f, ptr(out), out.dtype(), o,
                    ptr(bias), true, stream), o, n, in);
        }
    }

    /**
     * {@link Backend#fp8LinearBackward}, each product "TN" on K-major operands, accumulated in fp32 (no fast
     * accumulation for gradients): dx^T (I x N) = W8t (stored O x I)^T . g8 (O x N), with W cast transposed;
     * dW^T (I x O) = x8t (stored N x I)^T . g8t (N x O), with x and dOut cast transposed; g8 = dOut in e5m2. W's and
     * x's transposed casts are taken from {@code casts} where the forward kept them.
     */
    void fp8LinearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                           boolean accumulate, Fp8Casts casts, Fp8Scaling scaling) {
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        if (!Fp8Products.applies(n, in, o)) {
            linearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate);
            return;
        }
        boolean frozen = CpuBackend.frozenWeight(dWeight, dBias);
        if (frozen && dx == null) { // no gradient asked for
            return;
        }
        try (MemoryScope scratch = memory.newScope(); var entered = scratch.enter()) {
            Cast g8 = cast(dOut, n, o, Fp8.E5M2, dx != null, !frozen, scaling, kept(casts, dOut, Fp8.E5M2, scaling));
            if (casts != null) {
                casts.made();
            }
            if (dx != null) {
                Cast w8t = reused(casts, weight, Fp8.E4M3);
                Cast w = w8t != null ? w8t : counted(casts, cast(weight, o, in, Fp8.E4M3, false, true, scaling));
                fp8Product(() -> blas.fp8Matmul(in, n, o, w.columns(), o, g8.rows(), o, 0f, ptr(dx), dx.dtype(), in,
                        0, false, stream), in, n, o);
            }
            if (frozen) {
                return;
            }
            Cast x8t = reused(casts, x, Fp8.E4M3);
            Cast a = x8t != null ? x8t
                    : counted(casts, cast(x, n, in, Fp8.E4M3, false, true, scaling, kept(casts, x, Fp8.E4M3, scaling)));
            fp8Product(() -> blas.fp8Matmul(in, o, n, a.columns(), n, g8.columns(), n, accumulate ? 1f : 0f,
                    ptr(dWeight), dWeight.dtype(), in, 0, false, stream), in, o, n);
        }
        biasGradient(dBias, dOut, n, o, accumulate);
    }

    /**
     * t's amax in {@code format}'s key, known in {@code casts} (computed by the kernel that wrote t, or by t's cast in
     * a forward product), or null: none, no store, or a rowwise cast (its scales are per row).
     */
    private static Fp8Amax kept(Fp8Casts casts, Tensor t, Fp8 format, Fp8Scaling scaling) {
        return casts == null || scaling != Fp8Scaling.TENSOR ? null
                : casts.find(t, format, Fp8Amax.class, Fp8Amax::known);
    }

    /** t's transposed cast in {@code format} kept in {@code casts} by its forward, or null (none, or no store). */
    private static Cast reused(Fp8Casts casts, Tensor t, Fp8 format) {
        return casts == null ? null : casts.find(t, format, Cast.class, c -> c.holds(false, true));
    }

    /** {@code cast}, counted in {@code casts} (if any) as made. */
    private static Cast counted(Fp8Casts casts, Cast cast) {
        if (casts != null) {
            casts.made();
        }
        return cast;
    }

    /** cuBLASLt's status for a product it has no kernel for. */
    private static final int NOT_SUPPORTED = 15;

    /** An fp8 product of m x n x k; one that cuBLASLt refuses ends the job in one line ({@link #refused}). */
    private static void fp8Product(Runnable product, int m, int n, int k) {
        try {
            product.run();
        } catch (CudaException e) {
            if (e.status() != NOT_SUPPORTED) {
                throw e;
            }
            throw refused(CublasLt.version(), m, n, k);
        }
    }

    /** The error of an fp8 product (m x n x k) that cuBLASLt {@code version} has no kernel for on this GPU. */
    static UserError refused(long version, int m, int n, int k) {
        return new UserError("fsdp.param_dtype=fp8: cuBLASLt " + version + " has no fp8 product of " + m + " x " + n
                + " x " + k + " on this GPU (CUBLAS_STATUS_NOT_SUPPORTED); set fsdp.param_dtype=bf16");
    }

    @Override
    public void close() {
        slots.close();
        blas.close();
    }
}
