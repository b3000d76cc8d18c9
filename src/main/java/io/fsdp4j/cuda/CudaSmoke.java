package io.fsdp4j.cuda;

import io.fsdp4j.cuda.Nccl.DataType;
import io.fsdp4j.cuda.Nccl.RedOp;
import io.fsdp4j.cuda.NativeLibraries.Library;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A smoke test of the native layer on a GPU machine: libraries and versions, devices, memory and copies, the
 * caching allocator, an NVRTC kernel, cuBLASLt linear forward and backward (bf16 and fp32) against the CPU, and
 * NCCL collectives across all visible GPUs. Prints one line per check and {@code smoke: N passed, M failed};
 * exits 1 if any failed. Usage: {@code CudaSmoke [--log FILE]}.
 */
public final class CudaSmoke {
    private static final ValueLayout.OfFloat F = ValueLayout.JAVA_FLOAT;
    private static final ValueLayout.OfShort S = ValueLayout.JAVA_SHORT;

    private final PrintStream out;
    private int passed, failed;

    private CudaSmoke(PrintStream out) {
        this.out = out;
    }

    public static void main(String[] args) throws IOException {
        PrintStream log = null;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--log") && i + 1 < args.length) {
                Path file = Path.of(args[++i]);
                if (file.getParent() != null) {
                    Files.createDirectories(file.getParent());
                }
                log = new PrintStream(Files.newOutputStream(file), true);
            }
        }
        PrintStream tee = log == null ? System.out : new Tee(System.out, log);
        var smoke = new CudaSmoke(tee);
        smoke.run();
        tee.flush();
        System.exit(smoke.failed == 0 ? 0 : 1);
    }

    private interface Check {
        String run() throws Exception;
    }

    private void check(String name, Check check) {
        long start = System.nanoTime();
        try {
            String detail = check.run();
            passed++;
            out.printf("PASS %-34s %7.1f ms  %s%n", name, (System.nanoTime() - start) / 1e6, detail == null ? "" : detail);
        } catch (Throwable t) {
            failed++;
            out.printf("FAIL %-34s %7.1f ms  %s%n", name, (System.nanoTime() - start) / 1e6, t);
            StackTraceElement[] trace = t.getStackTrace();
            for (int i = 0; i < Math.min(6, trace.length); i++) {
                out.println("       at " + trace[i]);
            }
        }
    }

    private static void require(boolean condition, String message) {
        if (!condition) {
            throw new AssertionError(message);
        }
    }

    private void run() {
        out.println("fsdp4j CUDA smoke test, java " + Runtime.version());
        out.println("search path: " + NativeLibraries.searchPath());
        for (Library library : Library.values()) {
            out.printf("  %-8s %s%n", library, NativeLibraries.find(library).map(Object::toString).orElse("NOT FOUND"));
        }
        check("cudaAvailable", () -> {
            require(NativeLibraries.cudaAvailable(), NativeLibraries.whyCudaUnavailable().orElse(""));
            return "true";
        });
        check("versions", () -> {
            Cuda.checkDriverVersion();
            return "driver CUDA " + Cuda.versionString(Cuda.driverVersion()) + ", runtime " + Cuda.versionString(Cuda.runtimeVersion())
                    + ", cuBLASLt " + CublasLt.version() + ", NVRTC " + Nvrtc.version() + ", NCCL "
                    + Nccl.versionString(Nccl.version());
        });
        int devices;
        try {
            devices = Cuda.deviceCount();
        } catch (RuntimeException e) {
            failed++;
            out.println("FAIL deviceCount: " + e.getMessage());
            out.println("smoke: " + passed + " passed, " + failed + " failed");
            return;
        }
        check("devices", () -> {
            require(devices > 0, "no device");
            var names = new ArrayList<String>();
            for (int d = 0; d < devices; d++) {
                names.add(Cuda.properties(d).toString());
            }
            return devices + " device(s): " + String.join("; ", names);
        });
        Cuda.setDevice(0);
        check("memGetInfo", () -> {
            Cuda.MemInfo info = Cuda.memGetInfo();
            return "%.1f GiB free of %.1f GiB".formatted(info.free() / 1073741824.0, info.total() / 1073741824.0);
        });
        check("copies sync and async", this::copies);
        check("error message (huge cudaMalloc)", () -> {
            try {
                Cuda.malloc(1L << 50);
            } catch (CudaException e) {
                require(e.getMessage().startsWith("cudaMalloc") && e.getMessage().contains("out of memory"), e.getMessage());
                return e.getMessage();
            }
            throw new AssertionError("a 1 PiB cudaMalloc succeeded");
        });
        check("D2D bandwidth", this::bandwidth);
        check("DeviceAllocator steady state", this::allocator);
        check("NVRTC saxpy (compile, cache, launch)", this::saxpy);
        check("NVRTC compile error has the log", () -> {
            try {
                Nvrtc.compile("extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }", "broken.cu",
                        Nvrtc.Options.forDevice(0));
            } catch (CudaException e) {
                require(e.getMessage().contains("undefined_name"), e.getMessage());
                return e.getMessage().replace('\n', ' ');
            }
            throw new AssertionError("a broken kernel compiled");
        });
        check("NVRTC cuda_bf16.h kernel", this::bf16Kernel);
        check("cuBLASLt linear bf16", () -> linear(DType.BF16, 256, 384, 320));
        check("cuBLASLt linear fp32 (no TF32)", () -> linear(DType.F32, 256, 384, 320));
        check("cuBLASLt bf16 4096^3 throughput", this::gemmThroughput);
        check("NCCL collectives on " + devices + " GPU(s)", () -> nccl(devices));
        out.println("smoke: " + passed + " passed, " + failed + " failed");
    }

    // ---- memory -------------------------------------------------------------------------------------

    private String copies() {
        int n = 1 << 20;
        long bytes = 4L * n;
        var random = new Random(1);
        try (Arena arena = Arena.ofConfined(); var stream = CudaStream.create()) {
            MemorySegment host = arena.allocate(bytes, 64), back = arena.allocate(bytes, 64);
            for (int i = 0; i < n; i++) {
                host.setAtIndex(F, i, random.nextFloat());
            }
            long a = Cuda.malloc(bytes), b = Cuda.malloc(bytes);
            try {
                Cuda.copyToDevice(a, host, bytes);
                Cuda.copyOnDevice(b, a, bytes);
                Cuda.copyToHost(back, b, bytes);
                require(back.mismatch(host) == -1, "sync round trip differs");
                MemorySegment pinned = Cuda.mallocHost(bytes);
                try {
                    Cuda.memsetAsync(b, 0, bytes, stream.handle());
                    Cuda.copyToHostAsync(pinned, b, bytes, stream.handle());
                    stream.synchronize();
                    for (int i = 0; i < n; i++) {
                        require(pinned.getAtIndex(F, i) == 0f, "memset left a non-zero at " + i);
                    }
                    pinned.copyFrom(host);
                    Cuda.copyToDeviceAsync(a, pinned, bytes, stream.handle());
                    Cuda.copyOnDeviceAsync(b, a, bytes, stream.handle());
                    Cuda.memsetAsync(a, 0, bytes, stream.handle());
                    Cuda.copyToHostAsync(pinned, b, bytes, stream.handle());
                    CudaEvent done = stream.record();
                    done.synchronize();
                    require(done.isDone(), "event not done after synchronize");
                    done.close();
                    require(pinned.mismatch(host) == -1, "async round trip differs");
                } finally {
                    Cuda.freeHost(pinned);
                }
            } finally {
                Cuda.free(a);
                Cuda.free(b);
            }
        }
        return "4 MiB H2D/D2D/D2H sync, memset + async round trip through pinned memory";
    }

    private String bandwidth() {
        long bytes = 1L << 30;
        long a = Cuda.malloc(bytes), b = Cuda.malloc(bytes);
        try (var stream = CudaStream.create(); var start = CudaEvent.create(true); var end = CudaEvent.create(true)) {
            Cuda.copyOnDeviceAsync(b, a, bytes, stream.handle()); // warm up
            start.record(stream);
            int reps = 10;
            for (int i = 0; i < reps; i++) {
                Cuda.copyOnDeviceAsync(b, a, bytes, stream.handle());
            }
            end.record(stream);
            end.synchronize();
            float ms = end.elapsedMsSince(start);
            return "%.0f GB/s (bytes read + written), %d x 1 GiB in %.2f ms".formatted(2.0 * bytes * reps / (ms * 1e6), reps, ms);
        } finally {
            Cuda.free(a);
            Cuda.free(b);
        }
    }

    private String allocator() {
        try (var allocator = new DeviceAllocator()) {
            long[] sizes = {1000, 4096, 700_000, 3L << 20, 100L << 20, 17};
            long mallocsAfterFirst = -1;
            for (int step = 0; step < 10; step++) {
                var blocks = new ArrayList<Long>();
                for (long size : sizes) {
                    long p = allocator.allocate(size);
                    require(p % 256 == 0, "unaligned block");
                    blocks.add(p);
                }
                for (long p : blocks.reversed()) {
                    allocator.free(p);
                }
                if (step == 0) {
                    mallocsAfterFirst = allocator.mallocCount();
                }
            }
            require(allocator.mallocCount() == mallocsAfterFirst, "cudaMalloc in the steady state: "
                    + allocator.mallocCount() + " after " + mallocsAfterFirst);
            require(allocator.allocatedBytes() == 0, "allocated not 0 after freeing all");
            String stats = "mallocs %d, peak allocated %d, reserved %d bytes".formatted(allocator.mallocCount(),
                    allocator.peakAllocatedBytes(), allocator.reservedBytes());
            allocator.emptyCache();
            require(allocator.reservedBytes() == 0, "reserved not 0 after emptyCache");
            return stats;
        }
    }

    // ---- NVRTC --------------------------------------------------------------------------------------

    private static final String SAXPY = """
            extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) y[i] = a * x[i] + y[i];
            }
            """;

    private String saxpy() {
        Nvrtc.Options options = Nvrtc.Options.forDevice(0);
        boolean cachedBefore = Nvrtc.isCached(SAXPY, options);
        long t0 = System.nanoTime();
        byte[] cubin = Nvrtc.compile(SAXPY, "saxpy.cu", options);
        long t1 = System.nanoTime();
        byte[] again = Nvrtc.compile(SAXPY, "saxpy.cu", options);
        long t2 = System.nanoTime();
        require(java.util.Arrays.equals(cubin, again), "cached CUBIN differs");
        require(Nvrtc.isCached(SAXPY, options), "not cached after compiling");
        int n = 1_000_003;
        float a = 1.75f;
        var random = new Random(2);
        float[] x = new float[n], y = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = random.nextFloat() * 2 - 1;
            y[i] = random.nextFloat() * 2 - 1;
        }
        try (var module = CudaModule.load(cubin)) {
            Kernel kernel = module.kernel("saxpy");
            long dx = upload(x), dy = upload(y);
            try {
                kernel.launch((n + 255) / 256, 256, 0, 0L, a, dx, dy, n);
                Cuda.deviceSynchronize();
                float[] got = download(dy, n);
                for (int i = 0; i < n; i++) {
                    float want = Math.fma(a, x[i], y[i]);
                    require(Math.abs(got[i] - want) <= 1e-6f * Math.max(1f, Math.abs(want)),
                            "saxpy[" + i + "] = " + got[i] + ", expected " + want);
                }
            } finally {
                Cuda.free(dx);
                Cuda.free(dy);
            }
        }
        return "%s, %d-byte CUBIN, compile %.0f ms, cached %.1f ms (cached before: %s), cache %s".formatted(options.arch(),
                cubin.length, (t1 - t0) / 1e6, (t2 - t1) / 1e6, cachedBefore, Nvrtc.cacheDir());
    }

    private String bf16Kernel() {
        String source = """
                #include <cuda_bf16.h>
                extern "C" __global__ void to_bf16(const float* x, __nv_bfloat16* y, int n) {
                    int i = blockIdx.x * blockDim.x + threadIdx.x;
                    if (i < n) y[i] = __float2bfloat16(x[i]);
                }
                """;
        int n = 4099;
        float[] x = new float[n];
        var random = new Random(3);
        for (int i = 0; i < n; i++) {
            x[i] = (float) random.nextGaussian() * 100;
        }
        byte[] cubin = Nvrtc.compile(source, "to_bf16.cu", Nvrtc.Options.forDevice(0));
        try (var module = CudaModule.load(cubin)) {
            long dx = upload(x), dy = Cuda.malloc(2L * n);
            try {
                module.kernel("to_bf16").launch((n + 127) / 128, 128, 0, 0L, dx, dy, n);
                Cuda.deviceSynchronize();
                float[] got = downloadBf16(dy, n);
                for (int i = 0; i < n; i++) {
                    require(got[i] == Half.roundBf16(x[i]), "bf16 of " + x[i] + " = " + got[i]);
                }
            } finally {
                Cuda.free(dx);
                Cuda.free(dy);
            }
        }
        return "include folders " + Nvrtc.includeFolders() + "; rounding matches Half.toBf16";
    }

    // ---- cuBLASLt -----------------------------------------------------------------------------------

    /**
     * out = x W^T + b, dX = dY W, dW = dW0 + dY^T X, against the CPU in double. BF16: inputs, out and bias bf16,
     * dX bf16, dW fp32 (the mixed-precision layout). F32: everything fp32, which must match to fp32 accuracy
     * (TF32 would miss by 1e-3).
     */
    private String linear(DType type, int n, int in, int outF) {
        var random = new Random(4);
        float[] x = rand(random, n * in, type), w = rand(random, outF * in, type), bias = rand(random, outF, type);
        float[] dy = rand(random, n * outF, type), dw0 = rand(random, outF * in, DType.F32);
        double[] refOut = new double[n * outF], refDx = new double[n * in], refDw = new double[outF * in];
        for (int r = 0; r < n; r++) {
            for (int o = 0; o < outF; o++) {
                double s = bias[o];
                for (int i = 0; i < in; i++) {
                    s += (double) x[r * in + i] * w[o * in + i];
                }
                refOut[r * outF + o] = s;
            }
            for (int i = 0; i < in; i++) {
                double s = 0;
                for (int o = 0; o < outF; o++) {
                    s += (double) dy[r * outF + o] * w[o * in + i];
                }
                refDx[r * in + i] = s;
            }
        }
        for (int o = 0; o < outF; o++) {
            for (int i = 0; i < in; i++) {
                double s = dw0[o * in + i];
                for (int r = 0; r < n; r++) {
                    s += (double) dy[r * outF + o] * x[r * in + i];
                }
                refDw[o * in + i] = s;
            }
        }
        DType gradType = DType.F32;
        try (var lt = new CublasLt()) {
            long dX = upload(x, type), dW = upload(w, type), dB = upload(bias, type), dDy = upload(dy, type);
            long dOut = Cuda.malloc((long) n * outF * type.bytes()), dDx = Cuda.malloc((long) n * in * type.bytes());
            long dDw = upload(dw0, gradType);
            try {
                lt.linearForward(dOut, type, dX, dW, type, dB, n, in, outF, 0L);
                lt.linearBackwardInput(dDx, type, dDy, dW, type, n, in, outF, 0f, 0L);
                lt.linearBackwardWeight(dDw, gradType, dDy, dX, type, n, in, outF, 1f, 0L);
                Cuda.deviceSynchronize();
                double tolerance = type == DType.BF16 ? 1e-2 : 2e-5;
                double eOut = relError(download(dOut, n * outF, type), refOut);
                double eDx = relError(download(dDx, n * in, type), refDx);
                double eDw = relError(download(dDw, outF * in, gradType), refDw);
                double gradTolerance = type == DType.BF16 ? 1e-4 : 2e-5; // fp32 output: only summation order differs
                require(eOut <= tolerance && eDx <= tolerance && eDw <= gradTolerance,
                        "errors out %.2e dX %.2e dW %.2e".formatted(eOut, eDx, eDw));
                return "N=%d I=%d O=%d, max error / max |ref|: out %.2e, dX %.2e, dW(+=, fp32) %.2e".formatted(n, in, outF,
                        eOut, eDx, eDw);
            } finally {
                for (long p : new long[] {dX, dW, dB, dDy, dOut, dDx, dDw}) {
                    Cuda.free(p);
                }
            }
        }
    }

    private String gemmThroughput() {
        int n = 4096, in = 4096, outF = 4096;
        long x = Cuda.malloc(2L * n * in), w = Cuda.malloc(2L * outF * in), o = Cuda.malloc(2L * n * outF);
        try (var lt = new CublasLt(); var stream = CudaStream.create(); var start = CudaEvent.create(true);
             var end = CudaEvent.create(true)) {
            Cuda.memsetAsync(x, 0, 2L * n * in, stream.handle());
            Cuda.memsetAsync(w, 0, 2L * outF * in, stream.handle());
            lt.linearForward(o, DType.BF16, x, w, DType.BF16, 0, n, in, outF, stream.handle());
            int reps = 50;
            start.record(stream);
            for (int i = 0; i < reps; i++) {
                lt.linearForward(o, DType.BF16, x, w, DType.BF16, 0, n, in, outF, stream.handle());
            }
            end.record(stream);
            end.synchronize();
            double seconds = end.elapsedMsSince(start) / 1e3 / reps;
            return "%.0f TFLOP/s (%.3f ms per product, zeros as data)".formatted(2.0 * n * in * outF / seconds / 1e12, seconds * 1e3);
        } finally {
            Cuda.free(x);
            Cuda.free(w);
            Cuda.free(o);
        }
    }

    private static float[] rand(Random random, int size, DType type) {
        float[] v = new float[size];
        for (int i = 0; i < size; i++) {
            float f = random.nextFloat() * 2 - 1;
            v[i] = type == DType.BF16 ? Half.roundBf16(f) : f;
        }
        return v;
    }

    private static double relError(float[] got, double[] ref) {
        double maxErr = 0, maxRef = 1e-30;
        for (int i = 0; i < ref.length; i++) {
            maxErr = Math.max(maxErr, Math.abs(got[i] - ref[i]));
            maxRef = Math.max(maxRef, Math.abs(ref[i]));
        }
        return maxErr / maxRef;
    }

    // ---- NCCL ---------------------------------------------------------------------------------------

    private String nccl(int ranks) throws InterruptedException {
        byte[] id = Nccl.uniqueId();
        int count = 1 << 20, gather = 4096;
        var failures = new CopyOnWriteArrayList<Throwable>();
        var threads = new ArrayList<Thread>();
        for (int r = 0; r < ranks; r++) {
            int rank = r;
            threads.add(Thread.ofPlatform().name("rank-" + rank).start(() -> {
                try {
                    Cuda.setDevice(rank);
                    try (NcclComm comm = Nccl.initRank(id, ranks, rank); var stream = CudaStream.create()) {
                        ncclRank(comm, stream.handle(), count, gather);
                    }
                } catch (Throwable t) {
                    failures.add(t);
                }
            }));
        }
        for (Thread thread : threads) {
            thread.join();
        }
        if (!failures.isEmpty()) {
            throw new AssertionError("rank failed: " + failures.getFirst(), failures.getFirst());
        }
        return "%d rank(s): all-reduce %d floats, all-gather %d per rank, reduce-scatter, broadcast checked".formatted(
                ranks, count, gather);
    }

    private static void ncclRank(NcclComm comm, long stream, int count, int gather) {
        int rank = comm.rank(), size = comm.size();
        // all-reduce (sum) in place: element i of rank r holds (r + 1) * (i % 7)
        float[] values = new float[count];
        for (int i = 0; i < count; i++) {
            values[i] = (rank + 1) * (i % 7);
        }
        long buf = upload(values);
        // all-gather: rank r sends r * 10000 + i
        float[] mine = new float[gather];
        for (int i = 0; i < gather; i++) {
            mine[i] = rank * 10000f + i;
        }
        long send = upload(mine), all = Cuda.malloc(4L * gather * size);
        // reduce-scatter (sum): element j of every rank's input holds r + j; rank r receives j in [r*gather, (r+1)*gather)
        float[] scatterIn = new float[gather * size];
        for (int j = 0; j < scatterIn.length; j++) {
            scatterIn[j] = rank + j;
        }
        long scatter = upload(scatterIn), scattered = Cuda.malloc(4L * gather);
        long root = upload(new float[] {rank == 0 ? 42f : -1f});
        try {
            comm.allReduce(buf, buf, count, DataType.FLOAT32, RedOp.SUM, stream);
            comm.allGather(send, all, gather, DataType.FLOAT32, stream);
            Nccl.groupStart();
            comm.reduceScatter(scatter, scattered, gather, DataType.FLOAT32, RedOp.SUM, stream);
            comm.broadcast(root, root, 1, DataType.FLOAT32, 0, stream);
            Nccl.groupEnd();
            Cuda.streamSynchronize(stream);
            comm.checkAsyncError();
            float ranksSum = size * (size + 1) / 2f;
            float[] reduced = download(buf, count);
            for (int i = 0; i < count; i++) {
                require(reduced[i] == ranksSum * (i % 7), "all-reduce[" + i + "] = " + reduced[i]);
            }
            float[] gathered = download(all, gather * size);
            for (int r = 0; r < size; r++) {
                for (int i = 0; i < gather; i++) {
                    require(gathered[r * gather + i] == r * 10000f + i, "all-gather[" + r + "][" + i + "]");
                }
            }
            float[] part = download(scattered, gather);
            float rankSum = size * (size - 1) / 2f;
            for (int i = 0; i < gather; i++) {
                float want = rankSum + size * (float) (rank * gather + i);
                require(part[i] == want, "reduce-scatter[" + i + "] = " + part[i] + ", expected " + want);
            }
            require(download(root, 1)[0] == 42f, "broadcast");
        } finally {
            for (long p : new long[] {buf, send, all, scatter, scattered, root}) {
                Cuda.free(p);
            }
        }
    }

    // ---- host <-> device helpers --------------------------------------------------------------------

    private static long upload(float[] values) {
        return upload(values, DType.F32);
    }

    private static long upload(float[] values, DType type) {
        long bytes = (long) values.length * type.bytes();
        long p = Cuda.malloc(bytes);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(bytes, 8);
            for (int i = 0; i < values.length; i++) {
                if (type == DType.BF16) {
                    host.setAtIndex(S, i, Half.toBf16(values[i]));
                } else {
                    host.setAtIndex(F, i, values[i]);
                }
            }
            Cuda.copyToDevice(p, host, bytes);
        }
        return p;
    }

    private static float[] download(long p, int n) {
        return download(p, n, DType.F32);
    }

    private static float[] downloadBf16(long p, int n) {
        return download(p, n, DType.BF16);
    }

    private static float[] download(long p, int n, DType type) {
        long bytes = (long) n * type.bytes();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(bytes, 8);
            Cuda.copyToHost(host, p, bytes);
            float[] values = new float[n];
            for (int i = 0; i < n; i++) {
                values[i] = type == DType.BF16 ? Half.fromBf16(host.getAtIndex(S, i)) : host.getAtIndex(F, i);
            }
            return values;
        }
    }

    /** Writes to two streams. */
    private static final class Tee extends PrintStream {
        private final PrintStream second;

        Tee(PrintStream first, PrintStream second) {
            super(first, true);
            this.second = second;
        }

        @Override
        public void write(int b) {
            super.write(b);
            second.write(b);
        }

        @Override
        public void write(byte[] buf, int off, int len) {
            super.write(buf, off, len);
            second.write(buf, off, len);
        }

        @Override
        public void flush() {
            super.flush();
            second.flush();
        }
    }
}
