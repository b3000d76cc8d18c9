package io.fsdp4j.backend;

import io.fsdp4j.cuda.CudaKernels;
import io.fsdp4j.cuda.Kernel;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.DeviceStorage;
import io.fsdp4j.tensor.Tensor;

/**
 * fsdp4j's kernels launched in order on the compute stream, and the rules {@link CudaBackend}'s ops share to pick a
 * kernel and size its launch: the kernel named for the tensor's type ({@link #suffix}), grid-stride grids
 * ({@link #gridFor}), and the vector kernels' alignment ({@link #aligned16}, {@link #bf16x8}).
 */
final class CudaLaunches {
    private static final int GRID_STRIDE_BLOCKS = 65536;
    /** Rows one block of a column-sum kernel adds up (the partial sums of a weight's or a bias's gradient). */
    static final int ROWS_PER_CHUNK = 64;
    private final CudaKernels kernels;
    private final long stream;

    CudaLaunches(CudaKernels kernels, long stream) {
        this.kernels = kernels;
        this.stream = stream;
    }

    /** Device pointer of a tensor's first element (0 for none): {@link CudaBackend#ptr}. */
    static long ptr(Tensor t) {
        if (t == null) {
            return 0L;
        }
        if (t.storage() instanceof DeviceStorage s) {
            return s.address() + t.offset() * s.dtype().bytes();
        }
        throw new IllegalArgumentException("expected a GPU tensor, got " + t);
    }

    /** The compute stream the kernels run on, in order. */
    long stream() {
        return stream;
    }

    /** Kernel {@code name} of kernel file {@code file}: {@code grid} blocks of {@code block} threads. */
    void launch(String file, String name, int grid, int block, Object... args) {
        kernels.get(file, name).launch(grid, block, 0, stream, args);
    }

    /** As above on a grid of more than one dimension. */
    void launch(String file, String name, Kernel.Dim3 grid, int block, Object... args) {
        kernels.get(file, name).launch(grid, Kernel.Dim3.of(block), 0, stream, args);
    }

    /** The ending of the kernels' names for the type of {@code t}. */
    static String suffix(Tensor t) {
        return switch (t.dtype()) {
            case F32 -> "f32";
            case BF16 -> "bf16";
            case I32 -> "i32";
            case F16 -> "f16";
        };
    }

    /** Blocks of 256 threads for a grid-stride loop over {@code n} items: one an item, at most 65536. */
    static int gridFor(long n) {
        return (int) Math.max(1, Math.min((n + 255) / 256, GRID_STRIDE_BLOCKS));
    }

    /** Whether every tensor starts on a 16-byte boundary (what the kernels with 16-byte loads need). */
    static boolean aligned16(Tensor... tensors) {
        for (Tensor t : tensors) {
            if (ptr(t) % 16 != 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * Whether rows of {@code width} elements can go to an _x8 kernel, eight bf16 elements a thread at a time (16-byte
     * loads and stores): bf16 (the first tensor's type), a width of whole 8s and every tensor 16-byte aligned.
     */
    static boolean bf16x8(int width, Tensor... tensors) {
        return tensors[0].dtype() == DType.BF16 && width % 8 == 0 && aligned16(tensors);
    }

    /** Chunks of {@value #ROWS_PER_CHUNK} rows in {@code n} rows (the last one may be short). */
    static int chunks(int n) {
        return (n + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
    }

    /** Threads for one row of {@code items} work items, a thread each: a multiple of 32, at most 256. */
    static int rowThreads(int items) {
        return Math.min(256, Math.max(32, (items + 31) / 32 * 32));
    }
}
