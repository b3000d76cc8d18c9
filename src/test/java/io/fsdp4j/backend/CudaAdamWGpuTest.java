package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.fsdp4j.cuda.CudaKernels;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * adamw_f32_segments on grids far smaller than its vectors, so that every thread strides over several (whole ones,
 * ones across a segment boundary, ones outside every segment): the CPU backend's bits, as the one-vector-a-thread grids
 * of CudaOpsTest give them (the kernel takes any grid).
 */
@Tag("gpu")
class CudaAdamWGpuTest {
    private static final CpuBackend CPU = CpuBackend.INSTANCE;

    private static final int N = 10_001;
    /** Segments of a unit's shard: a short one, ones that end inside a vector of four, a gap, and room after. */
    private static final List<AdamWSegment> SEGMENTS = List.of(new AdamWSegment(0, 5, true),
            new AdamWSegment(5, 3330, false), new AdamWSegment(3335, 4097, true), new AdamWSegment(7440, 2, false),
            new AdamWSegment(7445, 2500, true));

    /** Parameters, gradients and both moments of N elements, drawn with {@code seed}. */
    private static float[][] state(long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        float[] param = new float[N], grad = new float[N], m = new float[N], v = new float[N];
        for (int i = 0; i < N; i++) {
            param[i] = (float) (random.nextDouble() * 2 - 1);
            grad[i] = (float) (0.1 * (random.nextDouble() * 2 - 1));
            m[i] = (float) (0.01 * (random.nextDouble() * 2 - 1));
            v[i] = (float) (0.001 * random.nextDouble());
        }
        return new float[][] {param, grad, m, v};
    }

    /** The optimizer step of {@code gpu}'s device and stream, its kernels from {@code kernels}. */
    private static CudaAdamW adamwOn(CudaBackend gpu, CudaKernels kernels) {
        return new CudaAdamW(new CudaLaunches(kernels, gpu.stream()),
                new CudaMemory(gpu.device(), gpu.name(), gpu.stream(), gpu.allocator()));
    }

    @Test
    void aUnitsSegmentsOnSmallGridsGiveTheCpusBits() {
        assumeTrue(NativeLibraries.cudaAvailable(), "no GPU");
        int n = N;
        float[][] state = state(31);
        float[] param = state[0], grad = state[1], m = state[2], v = state[3];
        List<AdamWSegment> segments = SEGMENTS;
        try (CudaBackend gpu = new CudaBackend(0); CudaKernels kernels = new CudaKernels()) {
            CudaAdamW adamw = adamwOn(gpu, kernels);
            for (int blocks : new int[] {1, 3, 7}) { // 256, 768 and 1792 threads for 2501 vectors
                Tensor cp = CPU.upload(param, n), cm = CPU.upload(m, n), cv = CPU.upload(v, n);
                Tensor cg = CPU.upload(grad, n);
                Tensor gp = gpu.upload(param, n), gm = gpu.upload(m, n), gv = gpu.upload(v, n);
                Tensor gg = gpu.upload(grad, n);
                for (int step = 1; step <= 2; step++) {
                    CPU.adamw(cp, cg, cm, cv, segments, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.37f);
                    adamw.step(gp, gg, gm, gv, segments, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.37f, blocks);
                }
                assertThat(gpu.toFloats(gp)).as("params, %d blocks", blocks).isEqualTo(CPU.toFloats(cp));
                assertThat(gpu.toFloats(gm)).as("m, %d blocks", blocks).isEqualTo(CPU.toFloats(cm));
                assertThat(gpu.toFloats(gv)).as("v, %d blocks", blocks).isEqualTo(CPU.toFloats(cv));
                float[] after = gpu.toFloats(gp);
                assertThat(after[7442]).as("in the gap").isEqualTo(param[7442]);
                assertThat(after[n - 1]).as("after the last segment").isEqualTo(param[n - 1]);
            }
        }
    }

    /**
     * adamw_f32_segments_bf16 / _f16 (fsdp.param_copy: kept): the master, the moments and the rounded copy as the CPU
     * backend's step followed by its cast, on small grids and the default one; the copy's elements outside every
     * segment keep what they held.
     */
    @Test
    void theKeptCopyIsTheUpdatedMasterRoundedAsTheCpuRoundsIt() {
        assumeTrue(NativeLibraries.cudaAvailable(), "no GPU");
        int n = N;
        float[][] state = state(37);
        float[] param = state[0], grad = state[1], m = state[2], v = state[3];
        List<AdamWSegment> segments = SEGMENTS;
        try (CudaBackend gpu = new CudaBackend(0); CudaKernels kernels = new CudaKernels()) {
            CudaAdamW adamw = adamwOn(gpu, kernels);
            for (DType copyType : new DType[] {DType.BF16, DType.F16}) {
                for (int blocks : new int[] {1, 7, 0}) { // 0: through the backend, its default grid
                    Tensor cp = CPU.upload(param, n), cm = CPU.upload(m, n), cv = CPU.upload(v, n);
                    Tensor cg = CPU.upload(grad, n);
                    Tensor cr = CPU.allocate(copyType, n);
                    CPU.fill(cr, 7f);
                    Tensor gp = gpu.upload(param, n), gm = gpu.upload(m, n), gv = gpu.upload(v, n);
                    Tensor gg = gpu.upload(grad, n);
                    Tensor gr = gpu.allocate(copyType, n);
                    gpu.fill(gr, 7f);
                    for (int step = 1; step <= 2; step++) {
                        CPU.adamw(cp, cg, cm, cv, segments, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.37f, cr);
                        if (blocks == 0) {
                            gpu.adamw(gp, gg, gm, gv, segments, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.37f, gr);
                        } else {
                            adamw.step(gp, gg, gm, gv, segments, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.37f, blocks,
                                    gr);
                        }
                    }
                    String as = copyType + ", " + blocks + " blocks";
                    assertThat(gpu.toFloats(gp)).as("params, %s", as).isEqualTo(CPU.toFloats(cp));
                    assertThat(gpu.toFloats(gm)).as("m, %s", as).isEqualTo(CPU.toFloats(cm));
                    assertThat(gpu.toFloats(gv)).as("v, %s", as).isEqualTo(CPU.toFloats(cv));
                    float[] copy = gpu.toFloats(gr);
                    assertThat(copy).as("the copy, %s", as).isEqualTo(CPU.toFloats(cr));
                    assertThat(copy[7442]).as("in the gap").isEqualTo(7f);
                    assertThat(copy[100]).as("rounded").isNotEqualTo(gpu.toFloats(gp)[100]);
                }
            }
        }
    }

    /**
     * adamw_f32_segments_bf16_amax: each segment's slot is the largest magnitude of its rounded values (as the bits of
     * a float), on small grids and the default one; a value planted far below the others' negatives counts by its
     * magnitude, and elements outside every segment count for none.
     */
    @Test
    void theAmaxOfEachSegmentIsItsLargestRoundedMagnitude() {
        assumeTrue(NativeLibraries.cudaAvailable(), "no GPU");
        float[][] state = state(41);
        float[] param = state[0].clone();
        param[3400] = -5f; // segment 2's largest magnitude
        param[7442] = 100f; // in the gap: no segment's
        try (CudaBackend gpu = new CudaBackend(0); CudaKernels kernels = new CudaKernels()) {
            CudaAdamW adamw = adamwOn(gpu, kernels);
            for (int blocks : new int[] {1, 7, CudaAdamW.gridOf(gpu.upload(param, N))}) {
                Tensor gp = gpu.upload(param, N), gm = gpu.upload(state[2], N), gv = gpu.upload(state[3], N);
                Tensor gr = gpu.allocate(DType.BF16, N), amax = gpu.allocate(DType.F32, SEGMENTS.size());
                adamw.step(gp, gpu.upload(state[1], N), gm, gv, SEGMENTS, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 0.37f,
                        blocks, gr, amax);
                float[] copy = gpu.toFloats(gr), slots = gpu.toFloats(amax);
                for (int s = 0; s < SEGMENTS.size(); s++) {
                    AdamWSegment seg = SEGMENTS.get(s);
                    float largest = 0;
                    for (int i = seg.offset(); i < seg.offset() + seg.length(); i++) {
                        largest = Math.max(largest, Math.abs(copy[i]));
                    }
                    assertThat(slots[s]).as("segment %d, %d blocks", s, blocks).isEqualTo(largest);
                }
                assertThat(slots[2]).as("the planted value's magnitude").isGreaterThan(4.9f);
            }
        }
    }

    /**
     * Through the backend: once an fp8 cast has run, AdamW's pass over a kept bf16 copy keeps its parameters' amaxes,
     * and a forward over a weight of the copy (one parameter, or two that lie one after the other, viewed as one)
     * takes it instead of reading the weight, with the same bits as over a fresh copy of that weight; after anything
     * else writes the copy, the cast reads the weight again.
     */
    @Test
    void fp8CastsTakeTheAmaxAdamWKeptForTheCopy() {
        assumeTrue(NativeLibraries.cudaAvailable(), "no GPU");
        int rows = 32, cols = 64, w = rows * cols, n = 2 * w + 16;
        List<AdamWSegment> segments = List.of(new AdamWSegment(0, w, true), new AdamWSegment(w, w, true),
                new AdamWSegment(2 * w, 16, false));
        float[][] state = state(43);
        try (CudaBackend gpu = new CudaBackend(0)) {
            Tensor gp = gpu.upload(java.util.Arrays.copyOf(state[0], n), n);
            Tensor gg = gpu.upload(java.util.Arrays.copyOf(state[1], n), n);
            Tensor gm = gpu.allocate(DType.F32, n), gv = gpu.allocate(DType.F32, n);
            Tensor copy = gpu.allocate(DType.BF16, n);
            Tensor x = gpu.upload(java.util.Arrays.copyOf(state[2], 16 * cols), 16, cols);
            Tensor xBf16 = gpu.allocate(DType.BF16, 16, cols);
            gpu.copy(x, xBf16);
            Runnable step = () -> gpu.adamw(gp, gg, gm, gv, segments, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1f, copy);
            step.run(); // no fp8 cast yet: no amax kept
            assertThat(forwardMatchesAFreshCopy(gpu, xBf16, copy.view(0, rows, cols))).isTrue();
            assertThat(gpu.knownAmaxesTaken()).as("before AdamW kept any").isZero();
            step.run();
            assertThat(forwardMatchesAFreshCopy(gpu, xBf16, copy.view(w, rows, cols))).isTrue();
            assertThat(gpu.knownAmaxesTaken()).as("one parameter").isEqualTo(1);
            assertThat(forwardMatchesAFreshCopy(gpu, xBf16, copy.view(0, 2 * rows, cols))).isTrue();
            assertThat(gpu.knownAmaxesTaken()).as("two parameters viewed as one").isEqualTo(2);
            assertThat(forwardMatchesAFreshCopy(gpu, xBf16, copy.view(0, rows / 2, cols))).isTrue();
            assertThat(gpu.knownAmaxesTaken()).as("part of a parameter: read").isEqualTo(2);
            gpu.copy(gp, copy); // a load's rounding of the master: the amaxes are no longer known
            assertThat(forwardMatchesAFreshCopy(gpu, xBf16, copy.view(0, rows, cols))).isTrue();
            assertThat(gpu.knownAmaxesTaken()).as("after another write").isEqualTo(2);
        }
    }

    /** fp8's forward of x over {@code weight} and over a fresh copy of it (whose amax nothing knows): the same bits. */
    private static boolean forwardMatchesAFreshCopy(CudaBackend gpu, Tensor x, Tensor weight) {
        Tensor fresh = gpu.allocate(DType.BF16, weight.shape());
        gpu.copy(weight, fresh);
        Tensor a = gpu.allocate(DType.BF16, x.dim(0), weight.dim(0)), b = gpu.allocate(DType.BF16, x.dim(0),
                weight.dim(0));
        gpu.fp8LinearForward(a, x, weight, null);
        gpu.fp8LinearForward(b, x, fresh, null);
        return java.util.Arrays.equals(gpu.toFloats(a), gpu.toFloats(b));
    }
}
