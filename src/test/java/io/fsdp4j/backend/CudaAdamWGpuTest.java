package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.fsdp4j.cuda.CudaKernels;
import io.fsdp4j.cuda.NativeLibraries;
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

    @Test
    void aUnitsSegmentsOnSmallGridsGiveTheCpusBits() {
        assumeTrue(NativeLibraries.cudaAvailable(), "no GPU");
        int n = 10_001;
        SplittableRandom random = new SplittableRandom(31);
        float[] param = new float[n], grad = new float[n], m = new float[n], v = new float[n];
        for (int i = 0; i < n; i++) {
            param[i] = (float) (random.nextDouble() * 2 - 1);
            grad[i] = (float) (0.1 * (random.nextDouble() * 2 - 1));
            m[i] = (float) (0.01 * (random.nextDouble() * 2 - 1));
            v[i] = (float) (0.001 * random.nextDouble());
        }
        List<AdamWSegment> segments = List.of(new AdamWSegment(0, 5, true), new AdamWSegment(5, 3330, false),
                new AdamWSegment(3335, 4097, true), new AdamWSegment(7440, 2, false),
                new AdamWSegment(7445, 2500, true));
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
}
