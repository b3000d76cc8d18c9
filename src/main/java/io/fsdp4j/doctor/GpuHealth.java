package io.fsdp4j.doctor;

import io.fsdp4j.cuda.CublasLt;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.CudaEvent;
import io.fsdp4j.cuda.CudaStream;
import io.fsdp4j.cuda.Nccl;
import io.fsdp4j.cuda.Nccl.DataType;
import io.fsdp4j.cuda.Nccl.RedOp;
import io.fsdp4j.cuda.NcclComm;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The GPU health tests of {@code fsdp4j doctor}, with the shapes and conventions of the peer's {@code limits.py}
 * so their figures compare: a bf16 8192³ matrix product through cuBLASLt (its rate, and sampled entries checked
 * against a float64 product on the host), a device-to-device copy of 2 GiB (bandwidth counts bytes read plus
 * written), and an fp32 all-reduce of one Qwen2.5-7B layer (466 MB) across the local GPUs (bus bandwidth
 * {@code bytes * 2(n-1)/n / time}). Each is timed over 20 runs after 3 warm-up runs, with CUDA events.
 */
public final class GpuHealth {
    static final int GEMM = 8192;
    static final long COPY_BYTES = 2L << 30;
    static final long ALL_REDUCE_FLOATS = 466L * (1 << 20) / 2;
    private static final int WARMUP = 3, TIMED = 20, SAMPLES = 64;
    private static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT;

    private GpuHealth() {}

    /**
     * The quick test at the start of a job on GPUs: on every visible GPU, a bf16 {@value #QUICK_GEMM}³ product
     * (checked) and a copy of 256 MiB, a second or so in all.
     *
     * @param gemmFlops          the slowest GPU's product rate
     * @param copyBytesPerSecond the slowest GPU's copy bandwidth (bytes read plus written)
     * @param problem            what failed, naming the GPU; null when every GPU passed
     */
    public record Quick(double gemmFlops, double copyBytesPerSecond, String problem) {}

    static final int QUICK_GEMM = 4096;
    static final long QUICK_COPY_BYTES = 256L << 20;

    /**
     * For tests and drills only: {@code FSDP4J_FAULT_HEALTH=REASON} makes this node's health test at a job's start
     * fail with REASON, without measuring (on CPU ranks too, which have no GPU to test), so that a job's handling of
     * an unhealthy node can be exercised on healthy machines.
     */
    public static final String FAULT_ENV = "FSDP4J_FAULT_HEALTH";

    /** The failed test that {@value #FAULT_ENV} in {@code env} asks for, if it is set (non-blank). */
    public static java.util.Optional<Quick> injectedFault(java.util.Map<String, String> env) {
        String reason = env.get(FAULT_ENV);
        return reason == null || reason.isBlank() ? java.util.Optional.empty()
                : java.util.Optional.of(new Quick(0, 0, reason.strip() + " (injected by " + FAULT_ENV + ")"));
    }

    public static Quick quick() {
        double gemm = Double.MAX_VALUE, copy = Double.MAX_VALUE;
        int gpus = Cuda.deviceCount();
        try (var inputs = new GemmInputs(QUICK_GEMM)) {
            for (int d = 0; d < gpus; d++) {
                try {
                    Gemm g = gemm(d, inputs);
                    if (!(g.relativeError() <= 1e-2)) {
                        return new Quick(0, 0, String.format(java.util.Locale.ROOT,
                                "GPU %d computed a wrong bf16 product (error %.3g of the largest entry)", d, g.relativeError()));
                    }
                    gemm = Math.min(gemm, g.flops());
                    copy = Math.min(copy, copy(d, QUICK_COPY_BYTES));
                } catch (RuntimeException e) {
                    return new Quick(0, 0, "GPU " + d + " failed the health test: " + e.getMessage());
                }
            }
        }
        return gpus == 0 ? new Quick(0, 0, "no GPU visible") : new Quick(gemm, copy, null);
    }

    /** The product's rate and its largest error on the sampled entries, relative to their largest magnitude. */
    record Gemm(double flops, double relativeError) {}

    /** Random bf16 inputs, made once and uploaded to each GPU. */
    static final class GemmInputs implements AutoCloseable {
        private final Arena arena = Arena.ofShared();
        final int size;
        final MemorySegment x, w; // x (N, I), w (O, I), row-major, N = I = O = size

        GemmInputs(int size) {
            this.size = size;
            long elements = (long) size * size;
            x = arena.allocate(elements * 2, 64);
            w = arena.allocate(elements * 2, 64);
            var random = new SplittableRandom(11);
            for (long i = 0; i < elements; i++) {
                x.setAtIndex(BF16, i, Half.toBf16((float) (random.nextDouble() * 2 - 1)));
                w.setAtIndex(BF16, i, Half.toBf16((float) (random.nextDouble() * 2 - 1)));
            }
        }

        @Override
        public void close() {
            arena.close();
        }
    }

    /** out (N,O) = x (N,I) @ w (O,I)^T in bf16 on {@code device}; the current device is left set to it. */
    static Gemm gemm(int device, GemmInputs inputs) {
        Cuda.setDevice(device);
        int n = inputs.size;
        long bytes = (long) n * n * 2;
        long x = Cuda.malloc(bytes), w = Cuda.malloc(bytes), out = Cuda.malloc(bytes);
        try (var lt = new CublasLt(); var stream = CudaStream.create(); var start = CudaEvent.create(true);
             var end = CudaEvent.create(true); Arena arena = Arena.ofConfined()) {
            Cuda.copyToDevice(x, inputs.x, bytes);
            Cuda.copyToDevice(w, inputs.w, bytes);
            Runnable product = () -> lt.linearForward(out, DType.BF16, x, w, DType.BF16, 0, n, n, n, stream.handle());
            double seconds = time(product, stream, start, end);
            stream.synchronize();
            var random = new SplittableRandom(5);
            MemorySegment one = arena.allocate(2, 2);
            double maxError = 0, maxRef = 0;
            for (int s = 0; s < SAMPLES; s++) {
                int row = random.nextInt(n), col = random.nextInt(n);
                double ref = 0;
                for (int k = 0; k < n; k++) {
                    ref += (double) Half.fromBf16(inputs.x.getAtIndex(BF16, (long) row * n + k))
                            * Half.fromBf16(inputs.w.getAtIndex(BF16, (long) col * n + k));
                }
                Cuda.copyToHost(one, out + 2L * ((long) row * n + col), 2);
                double got = Half.fromBf16(one.get(BF16, 0));
                maxError = Math.max(maxError, Math.abs(got - ref));
                maxRef = Math.max(maxRef, Math.abs(ref));
            }
            return new Gemm(2.0 * n * n * n / seconds, maxError / Math.max(maxRef, 1e-30));
        } finally {
            Cuda.free(x);
            Cuda.free(w);
            Cuda.free(out);
        }
    }

    /** Device-to-device copy bandwidth (bytes read plus written per second), the copy's bytes checked. */
    static double copy(int device, long bytes) {
        Cuda.setDevice(device);
        long src = Cuda.malloc(bytes), dst = Cuda.malloc(bytes);
        try (var stream = CudaStream.create(); var start = CudaEvent.create(true); var end = CudaEvent.create(true);
             Arena arena = Arena.ofConfined()) {
            Cuda.memsetAsync(src, 0x3C, bytes, stream.handle());
            Cuda.memsetAsync(dst, 0, bytes, stream.handle());
            double seconds = time(() -> Cuda.copyOnDeviceAsync(dst, src, bytes, stream.handle()), stream, start, end);
            stream.synchronize();
            MemorySegment edge = arena.allocate(4096);
            for (long at : new long[] {0, bytes - 4096}) {
                Cuda.copyToHost(edge, dst + at, 4096);
                for (long i = 0; i < 4096; i++) {
                    if (edge.get(ValueLayout.JAVA_BYTE, i) != 0x3C) {
                        throw new IllegalStateException("the copy on GPU " + device + " left a wrong byte at " + (at + i));
                    }
                }
            }
            return 2.0 * bytes / seconds;
        } finally {
            Cuda.free(src);
            Cuda.free(dst);
        }
    }

    /** The bus bandwidth of an fp32 all-reduce of {@code floats} across {@code gpus} local GPUs (rank 0's time). */
    static double allReduce(int gpus, long floats) throws InterruptedException {
        byte[] id = Nccl.uniqueId();
        double[] seconds = new double[gpus];
        var failures = new CopyOnWriteArrayList<Throwable>();
        List<Thread> threads = new ArrayList<>();
        for (int r = 0; r < gpus; r++) {
            int rank = r;
            threads.add(Thread.ofPlatform().name("doctor-rank-" + rank).start(() -> {
                try {
                    Cuda.setDevice(rank);
                    try (NcclComm comm = Nccl.initRank(id, gpus, rank); var stream = CudaStream.create();
                         var start = CudaEvent.create(true); var end = CudaEvent.create(true)) {
                        seconds[rank] = allReduceRank(comm, stream, start, end, floats);
                    }
                } catch (Throwable t) {
                    failures.add(t);
                }
            }));
        }
        for (Thread t : threads) {
            t.join();
        }
        if (!failures.isEmpty()) {
            throw new IllegalStateException("all-reduce across " + gpus + " GPUs failed: " + failures.getFirst(),
                    failures.getFirst());
        }
        return floats * 4.0 * 2 * (gpus - 1) / gpus / seconds[0];
    }

    private static double allReduceRank(NcclComm comm, CudaStream stream, CudaEvent start, CudaEvent end, long floats) {
        long buffer = Cuda.malloc(floats * 4);
        int check = 1 << 16;
        long small = Cuda.malloc(check * 4L);
        try (Arena arena = Arena.ofConfined()) {
            Cuda.memsetAsync(buffer, 0, floats * 4, stream.handle());
            double seconds = time(() -> comm.allReduce(buffer, buffer, floats, DataType.FLOAT32, RedOp.SUM,
                    stream.handle()), stream, start, end);
            // the sum is right: element i of rank r holds (r + 1) * (i % 7)
            MemorySegment values = arena.allocate(check * 4L, 4);
            for (int i = 0; i < check; i++) {
                values.setAtIndex(ValueLayout.JAVA_FLOAT, i, (comm.rank() + 1) * (i % 7));
            }
            Cuda.copyToDevice(small, values, check * 4L);
            comm.allReduce(small, small, check, DataType.FLOAT32, RedOp.SUM, stream.handle());
            stream.synchronize();
            comm.checkAsyncError();
            Cuda.copyToHost(values, small, check * 4L);
            float ranks = comm.size() * (comm.size() + 1) / 2f;
            for (int i = 0; i < check; i++) {
                if (values.getAtIndex(ValueLayout.JAVA_FLOAT, i) != ranks * (i % 7)) {
                    throw new IllegalStateException("all-reduce gave a wrong sum on rank " + comm.rank() + " at " + i);
                }
            }
            return seconds;
        } finally {
            Cuda.free(buffer);
            Cuda.free(small);
        }
    }

    /** Seconds per run of {@code op} on {@code stream}: warm-up runs, then the mean of the timed ones. */
    private static double time(Runnable op, CudaStream stream, CudaEvent start, CudaEvent end) {
        for (int i = 0; i < WARMUP; i++) {
            op.run();
        }
        start.record(stream);
        for (int i = 0; i < TIMED; i++) {
            op.run();
        }
        end.record(stream);
        end.synchronize();
        return end.elapsedMsSince(start) / 1e3 / TIMED;
    }
}
