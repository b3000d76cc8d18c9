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

    @Test
    void aUnitsSegmentsOnSmallGridsGiveTheCpusBits() {
        assumeTrue(NativeLibraries.cudaAvailable(), "no GPU");
        int n = N;
        float[][] state = state(31);
        float[] param = state[0], grad = state[1], m = state[2], v = state[3];
        List<AdamWSegment> segments = SEGMENTS;
        try (CudaBackend gpu = new CudaBackend(0); CudaKernels kernels = new CudaKernels()) {
            CudaAdamW adamw = new CudaAdamW(new CudaLaunches(kernels, gpu.stream()),
                    new CudaMemory(gpu.device(), gpu.name(), gpu.stream(), gpu.allocator()));
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
            CudaAdamW adamw = new CudaAdamW(new CudaLaunches(kernels, gpu.stream()),
                    new CudaMemory(gpu.device(), gpu.name(), gpu.stream(), gpu.allocator()));
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
}
