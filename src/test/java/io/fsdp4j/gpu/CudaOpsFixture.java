package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;

/**
 * What the tests of CUDA ops against the CPU backend share: one {@link CudaBackend} on GPU 0 for the test class (none
 * where no GPU is visible: then every test is skipped, and counted so), the precisions they run in, random inputs,
 * uploads in a precision and the comparison of a GPU result with the CPU's. Subclasses are tagged {@code gpu}.
 */
public abstract class CudaOpsFixture {
    protected static CudaBackend gpu;
    protected static final CpuBackend CPU = CpuBackend.INSTANCE;
    protected final SplittableRandom random;

    /** Inputs drawn from {@code seed}, a test class's own. */
    protected CudaOpsFixture(long seed) {
        random = new SplittableRandom(seed);
    }

    @BeforeAll
    protected static void openGpu() {
        if (NativeLibraries.cudaAvailable()) {
            gpu = new CudaBackend(0);
        }
    }

    @BeforeEach
    protected void requireGpu() {
        GpuTests.requireGpus(1); // each test is reported as skipped where there is no GPU
    }

    @AfterAll
    protected static void closeGpu() {
        if (gpu != null) {
            gpu.close();
            gpu = null;
        }
    }

    /** A precision the ops run in, and the relative error allowed against the CPU's fp32 on the same inputs. */
    public enum Precision {
        FP32(DType.F32, 1e-5), BF16(DType.BF16, 1e-2), FP16(DType.F16, 1e-2);

        public final DType dtype;
        public final double tolerance;

        Precision(DType dtype, double tolerance) {
            this.dtype = dtype;
            this.tolerance = tolerance;
        }
    }

    /** {@code n} values uniform in {@code offset ± scale}, rounded to bf16 (fp16) for bf16 (fp16) runs. */
    protected float[] randoms(int n, double offset, double scale, Precision p) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) (offset + (random.nextDouble() * 2 - 1) * scale);
            if (p == Precision.BF16) {
                v[i] = Half.roundBf16(v[i]);
            } else if (p == Precision.FP16) {
                v[i] = Half.roundF16(v[i]);
            }
        }
        return v;
    }

    /** A GPU tensor of the precision's type holding the values. */
    protected static Tensor onGpu(float[] v, Precision p, int... shape) {
        Tensor f = gpu.upload(v, shape);
        if (p == Precision.FP32) {
            return f;
        }
        Tensor b = gpu.allocate(p.dtype, shape);
        gpu.copy(f, b);
        return b;
    }

    /** Asserts that the GPU's result is within {@code tolerance} of the CPU's, relative to the tensor's scale. */
    protected static void near(Tensor gpuResult, Tensor cpuResult, double tolerance, String what) {
        assertThat(Golden.relativeError(gpu.toFloats(gpuResult), CPU.toFloats(cpuResult))).as(what).isLessThan(tolerance);
    }
}
