package io.fsdp4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.fsdp4j.cuda.Nccl.DataType;
import io.fsdp4j.cuda.Nccl.RedOp;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The native layer on a GPU, call by call: copies (synchronous and through pinned memory on a stream), the error
 * of a failed call, the caching allocator's steady state, NVRTC (compile, cache, launch, the log of a broken
 * kernel, {@code cuda_bf16.h} from the include folders), cuBLASLt's linear forward and backward against a float64
 * product (bf16 and fp32 without TF32), and NCCL's collectives across every visible GPU. Rates (matrix products,
 * copies, all-reduce) are {@code fsdp4j doctor}'s. Run on the GPU machine by {@code tools/gpu/run.sh smoke}.
 */
@Tag("gpu")
class NativeLayerGpuTest {
    private static final ValueLayout.OfFloat F = ValueLayout.JAVA_FLOAT;
    private static final ValueLayout.OfShort S = ValueLayout.JAVA_SHORT;

    @BeforeEach
    void requireGpu() {
        assumeTrue(NativeLibraries.cudaAvailable(), () -> "no CUDA GPU: " + NativeLibraries.whyCudaUnavailable().orElse(""));
        Cuda.checkDriverVersion();
        Cuda.setDevice(0);
    }

    @Test
    void copiesRoundTripSynchronouslyAndThroughPinnedMemoryOnAStream() {
        int n = 1 << 20;
        long bytes = 4L * n;
        var random = new Random(1);
        try (Arena arena = Arena.ofConfined(); var stream = CudaStream.create()) {
            MemorySegment host = arena.allocate(bytes, 64), back = arena.allocate(bytes, 64);
            for (int i = 0; i < n; i++) {
                host.setAtIndex(F, i, random.nextFloat());
            }
            long a = Cuda.malloc(bytes), b = Cuda.malloc(bytes);
            MemorySegment pinned = Cuda.mallocHost(bytes);
            try {
                Cuda.copyToDevice(a, host, bytes);
                Cuda.copyOnDevice(b, a, bytes);
                Cuda.copyToHost(back, b, bytes);
                assertThat(back.mismatch(host)).as("synchronous round trip").isEqualTo(-1);

                Cuda.memsetAsync(b, 0, bytes, stream.handle());
                Cuda.copyToHostAsync(pinned, b, bytes, stream.handle());
                stream.synchronize();
                assertThat(pinned.asSlice(0, bytes).toArray(ValueLayout.JAVA_BYTE)).as("after memset").containsOnly(0);
                pinned.copyFrom(host);
                Cuda.copyToDeviceAsync(a, pinned, bytes, stream.handle());
                Cuda.copyOnDeviceAsync(b, a, bytes, stream.handle());
                Cuda.memsetAsync(a, 0, bytes, stream.handle());
                Cuda.copyToHostAsync(pinned, b, bytes, stream.handle());
                try (CudaEvent done = stream.record()) {
                    done.synchronize();
                    assertThat(done.isDone()).isTrue();
                }
                assertThat(pinned.asSlice(0, bytes).mismatch(host)).as("asynchronous round trip").isEqualTo(-1);
            } finally {
                Cuda.freeHost(pinned);
                Cuda.free(a);
                Cuda.free(b);
            }
        }
    }

    @Test
    void aFailedCallNamesTheFunctionAndTheReason() {
        assertThatThrownBy(() -> Cuda.malloc(1L << 50)).isInstanceOf(CudaException.class)
                .hasMessageStartingWith("cudaMalloc").hasMessageContaining("out of memory");
    }

    @Test
    void theAllocatorStopsCallingCudaMallocOnceWarm() {
        try (var allocator = new DeviceAllocator()) {
            long[] sizes = {1000, 4096, 700_000, 3L << 20, 100L << 20, 17};
            long mallocsAfterFirst = -1;
            for (int step = 0; step < 10; step++) {
                var blocks = new ArrayList<Long>();
                for (long size : sizes) {
                    long p = allocator.allocate(size);
                    assertThat(p % 256).as("alignment").isZero();
                    blocks.add(p);
                }
                for (long p : blocks.reversed()) {
                    allocator.free(p);
                }
                if (step == 0) {
                    mallocsAfterFirst = allocator.mallocCount();
                }
            }
            assertThat(allocator.mallocCount()).as("cudaMalloc calls in the steady state").isEqualTo(mallocsAfterFirst);
            assertThat(allocator.allocatedBytes()).isZero();
            allocator.emptyCache();
            assertThat(allocator.reservedBytes()).as("reserved after emptyCache").isZero();
        }
    }

    private static final String SAXPY = """
            extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) y[i] = a * x[i] + y[i];
            }
            """;

    @Test
    void nvrtcCompilesCachesAndTheKernelLaunches() {
        Nvrtc.Options options = Nvrtc.Options.forDevice(0);
        byte[] cubin = Nvrtc.compile(SAXPY, "saxpy.cu", options);
        assertThat(Nvrtc.isCached(SAXPY, options)).as("cached after compiling").isTrue();
        assertThat(Nvrtc.compile(SAXPY, "saxpy.cu", options)).as("the cached CUBIN").isEqualTo(cubin);
        int n = 1_000_003;
        float a = 1.75f;
        var random = new Random(2);
        float[] x = new float[n], y = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = random.nextFloat() * 2 - 1;
            y[i] = random.nextFloat() * 2 - 1;
        }
        try (var module = CudaModule.load(cubin)) {
            long dx = upload(x, DType.F32), dy = upload(y, DType.F32);
            try {
                module.kernel("saxpy").launch((n + 255) / 256, 256, 0, 0L, a, dx, dy, n);
                Cuda.deviceSynchronize();
                float[] got = download(dy, n, DType.F32);
                for (int i = 0; i < n; i++) {
                    float want = Math.fma(a, x[i], y[i]);
                    assertThat(got[i]).as("saxpy[%d]", i).isCloseTo(want, within(1e-6f * Math.max(1f, Math.abs(want))));
                }
            } finally {
                Cuda.free(dx);
                Cuda.free(dy);
            }
        }
    }

    @Test
    void aProgramsHeaderIsFoundByNameAndIsPartOfTheCacheKey() {
        String source = """
                #include "factor.cuh"
                extern "C" __global__ void times(float* x) { x[threadIdx.x] *= FACTOR; }
                """;
        for (float factor : new float[] {3f, 5f}) {
            var program = new Nvrtc.Program("times.cu", source, java.util.Map.of("factor.cuh",
                    "#define FACTOR " + factor + "f\n"));
            try (var module = CudaModule.compile(program)) {
                long dx = upload(new float[] {1f, 2f}, DType.F32);
                try {
                    module.kernel("times").launch(1, 2, 0, 0L, dx);
                    Cuda.deviceSynchronize();
                    assertThat(download(dx, 2, DType.F32)).containsExactly(factor, 2 * factor);
                } finally {
                    Cuda.free(dx);
                }
            }
        }
    }

    @Test
    void aCompileErrorCarriesNvrtcsLog() {
        assertThatThrownBy(() -> Nvrtc.compile("extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }",
                "broken.cu", Nvrtc.Options.forDevice(0))).isInstanceOf(CudaException.class)
                .hasMessageContaining("undefined_name");
    }

    @Test
    void cudaBf16HeaderIsFoundAndRoundsAsHalf() {
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
        try (var module = CudaModule.compile(source, "to_bf16.cu")) {
            long dx = upload(x, DType.F32), dy = Cuda.malloc(2L * n);
            try {
                module.kernel("to_bf16").launch((n + 127) / 128, 128, 0, 0L, dx, dy, n);
                Cuda.deviceSynchronize();
                float[] got = download(dy, n, DType.BF16);
                for (int i = 0; i < n; i++) {
                    assertThat(got[i]).as("bf16 of %s (include folders %s)", x[i], Nvrtc.includeFolders())
                            .isEqualTo(Half.roundBf16(x[i]));
                }
            } finally {
                Cuda.free(dx);
                Cuda.free(dy);
            }
        }
    }

    @Test
    void cublasLtLinearBf16() {
        linear(DType.BF16, 256, 384, 320, 1e-2, 1e-4);
    }

    @Test
    void cublasLtLinearFp32WithoutTf32() {
        linear(DType.F32, 256, 384, 320, 2e-5, 2e-5); // TF32 would miss by 1e-3
    }

    /**
     * matmul.algorithm: timed. The products are right after their candidates ran on the operands (the forward with its
     * bias, the input gradient, the weight gradient's += that is not timed), and a second handle of the process, not
     * timing, takes the first one's choice: the same bits for the same product.
     */
    @Test
    void cublasLtTimedChoicesAreRightAndSharedByTheProcess() {
        // the forward and the input gradient write D and are timed (where cuBLASLt offers more than one candidate)
        assertThat(linear(DType.BF16, 256, 384, 320, 1e-2, 1e-4, true).timed()).as("products timed").isBetween(1, 2);
        int n = 2048, in = 1024, outF = 3072;
        var random = new Random(5);
        long dX = upload(rand(random, n * in, DType.BF16), DType.BF16);
        long dW = upload(rand(random, outF * in, DType.BF16), DType.BF16);
        long out1 = Cuda.malloc(2L * n * outF), out2 = Cuda.malloc(2L * n * outF);
        try (var timed = new CublasLt(); var other = new CublasLt()) {
            timed.timeCandidates(true);
            timed.linearForward(out1, DType.BF16, dX, dW, DType.BF16, 0, n, in, outF, 0L);
            other.linearForward(out2, DType.BF16, dX, dW, DType.BF16, 0, n, in, outF, 0L);
            Cuda.deviceSynchronize();
            CublasLt.Timings t = timed.timings();
            assertThat(t.timed()).isEqualTo(1);
            assertThat(t.chosenMs()).isPositive().isLessThanOrEqualTo(t.firstMs());
            assertThat(other.timings().timed()).as("the second handle times nothing").isZero();
            float[] a = download(out1, n * outF, DType.BF16), b = download(out2, n * outF, DType.BF16);
            assertThat(java.util.Arrays.equals(a, b)).as("the same algorithm, the same bits").isTrue();
        } finally {
            for (long p : new long[] {dX, dW, out1, out2}) {
                Cuda.free(p);
            }
        }
    }

    /**
     * out = x W^T + b, dX = dY W, dW = dW0 + dY^T X, against float64 on the host. BF16: inputs, out, bias and dX
     * bf16, dW fp32 (the mixed-precision layout); F32: everything fp32.
     */
    private static void linear(DType type, int n, int in, int outF, double tolerance, double gradTolerance) {
        linear(type, n, in, outF, tolerance, gradTolerance, false);
    }

    /** {@link #linear} on a handle that times its products' candidates or not; what its timing found. */
    private static CublasLt.Timings linear(DType type, int n, int in, int outF, double tolerance, double gradTolerance,
                                           boolean timed) {
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
        try (var lt = new CublasLt()) {
            lt.timeCandidates(timed);
            long dX = upload(x, type), dW = upload(w, type), dB = upload(bias, type), dDy = upload(dy, type);
            long dOut = Cuda.malloc((long) n * outF * type.bytes()), dDx = Cuda.malloc((long) n * in * type.bytes());
            long dDw = upload(dw0, DType.F32);
            try {
                lt.linearForward(dOut, type, dX, dW, type, dB, n, in, outF, 0L);
                lt.linearBackwardInput(dDx, type, dDy, dW, type, n, in, outF, 0f, 0L);
                lt.linearBackwardWeight(dDw, DType.F32, dDy, dX, type, n, in, outF, 1f, 0L);
                Cuda.deviceSynchronize();
                assertThat(relError(download(dOut, n * outF, type), refOut)).as("out").isLessThanOrEqualTo(tolerance);
                assertThat(relError(download(dDx, n * in, type), refDx)).as("dX").isLessThanOrEqualTo(tolerance);
                assertThat(relError(download(dDw, outF * in, DType.F32), refDw)).as("dW (+=, fp32)")
                        .isLessThanOrEqualTo(gradTolerance);
                return lt.timings();
            } finally {
                for (long p : new long[] {dX, dW, dB, dDy, dOut, dDx, dDw}) {
                    Cuda.free(p);
                }
            }
        }
    }

    @Test
    void ncclCollectivesAcrossEveryVisibleGpu() throws InterruptedException {
        int ranks = Cuda.deviceCount();
        byte[] id = Nccl.uniqueId();
        var failures = new CopyOnWriteArrayList<Throwable>();
        var threads = new ArrayList<Thread>();
        for (int r = 0; r < ranks; r++) {
            int rank = r;
            threads.add(Thread.ofPlatform().name("rank-" + rank).start(() -> {
                try {
                    Cuda.setDevice(rank);
                    try (NcclComm comm = Nccl.initRank(id, ranks, rank); var stream = CudaStream.create()) {
                        ncclRank(comm, stream.handle(), 1 << 20, 4096);
                    }
                } catch (Throwable t) {
                    failures.add(t);
                }
            }));
        }
        for (Thread thread : threads) {
            thread.join();
        }
        assertThat(failures).as("failures on %d rank(s)", ranks).isEmpty();
    }

    /** All-reduce, all-gather, reduce-scatter and broadcast (the last two in one NCCL group), each result checked. */
    private static void ncclRank(NcclComm comm, long stream, int count, int gather) {
        int rank = comm.rank(), size = comm.size();
        float[] values = new float[count]; // element i of rank r: (r + 1) * (i % 7)
        for (int i = 0; i < count; i++) {
            values[i] = (rank + 1) * (i % 7);
        }
        float[] mine = new float[gather]; // rank r sends r * 10000 + i
        for (int i = 0; i < gather; i++) {
            mine[i] = rank * 10000f + i;
        }
        float[] scatterIn = new float[gather * size]; // element j: r + j; rank r receives [r*gather, (r+1)*gather)
        for (int j = 0; j < scatterIn.length; j++) {
            scatterIn[j] = rank + j;
        }
        long buf = upload(values, DType.F32), send = upload(mine, DType.F32), all = Cuda.malloc(4L * gather * size);
        long scatter = upload(scatterIn, DType.F32), scattered = Cuda.malloc(4L * gather);
        long root = upload(new float[] {rank == 0 ? 42f : -1f}, DType.F32);
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
            float[] reduced = download(buf, count, DType.F32);
            for (int i = 0; i < count; i++) {
                assertThat(reduced[i]).as("all-reduce[%d]", i).isEqualTo(ranksSum * (i % 7));
            }
            float[] gathered = download(all, gather * size, DType.F32);
            for (int r = 0; r < size; r++) {
                for (int i = 0; i < gather; i++) {
                    assertThat(gathered[r * gather + i]).as("all-gather[%d][%d]", r, i).isEqualTo(r * 10000f + i);
                }
            }
            float[] part = download(scattered, gather, DType.F32);
            float rankSum = size * (size - 1) / 2f;
            for (int i = 0; i < gather; i++) {
                assertThat(part[i]).as("reduce-scatter[%d]", i).isEqualTo(rankSum + size * (float) (rank * gather + i));
            }
            assertThat(download(root, 1, DType.F32)[0]).as("broadcast").isEqualTo(42f);
        } finally {
            for (long p : new long[] {buf, send, all, scatter, scattered, root}) {
                Cuda.free(p);
            }
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
}
