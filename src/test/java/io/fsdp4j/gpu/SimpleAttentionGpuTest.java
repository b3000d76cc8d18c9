package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The attention of GPUs before sm_80 (V100, T4: no bf16 tensor cores, less shared memory a block), forced on this GPU
 * ({@link CudaBackend.KernelSet#SM70}): the simple kernels' forward and backward against the CPU backend in fp32,
 * bf16 and fp16, on every shape the model families give them (grouped and per-head qkv, ALiBi, soft cap, sliding
 * window, packed documents, head sizes 8 to 256); and fp16 casts round as Java's {@link Half#toF16} does.
 */
@Tag("gpu")
class SimpleAttentionGpuTest {
    private static CudaBackend gpu;
    private static final CpuBackend CPU = CpuBackend.INSTANCE;
    private final SplittableRandom random = new SplittableRandom(11);

    @BeforeAll
    static void open() {
        if (io.fsdp4j.cuda.NativeLibraries.cudaAvailable()) {
            gpu = new CudaBackend(0, CudaBackend.KernelSet.SM70);
        }
    }

    @BeforeEach
    void requireGpu() {
        GpuTests.requireGpus(1);
    }

    @AfterAll
    static void close() {
        if (gpu != null) {
            gpu.close();
        }
    }

    enum Precision {
        FP32(DType.F32, 1e-5), BF16(DType.BF16, 1e-2), FP16(DType.F16, 1e-2);

        final DType dtype;
        final double tolerance;

        Precision(DType dtype, double tolerance) {
            this.dtype = dtype;
            this.tolerance = tolerance;
        }

        float round(float v) {
            return switch (this) {
                case FP32 -> v;
                case BF16 -> Half.roundBf16(v);
                case FP16 -> Half.roundF16(v);
            };
        }
    }

    private float[] randoms(int n, double scale, Precision p) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = p.round((float) ((random.nextDouble() * 2 - 1) * scale));
        }
        return v;
    }

    private static Tensor onGpu(float[] v, Precision p, int... shape) {
        Tensor f = gpu.upload(v, shape);
        if (p == Precision.FP32) {
            return f;
        }
        Tensor t = gpu.allocate(p.dtype, shape);
        gpu.copy(f, t);
        return t;
    }

    private static void close(Tensor gpuResult, Tensor cpuResult, double tolerance, String what) {
        assertThat(Golden.relativeError(gpu.toFloats(gpuResult), CPU.toFloats(cpuResult))).as(what).isLessThan(tolerance);
    }

    /** Document starts (B*T): documents begin at 0, 5, 6, one in the middle and the last token. */
    private static int[] documentStarts(int batch, int seqLen) {
        int[] starts = new int[batch * seqLen];
        for (int b = 0; b < batch; b++) {
            java.util.TreeSet<Integer> begins = new java.util.TreeSet<>(List.of(0, 5, 6, seqLen / 2 + b, seqLen - 1));
            for (int t = 0; t < seqLen; t++) {
                starts[b * seqLen + t] = begins.floor(t);
            }
        }
        return starts;
    }

    @Test
    void theForcedSetRunsTheSimpleKernelsAndAutoFollowsTheArchitecture() {
        assertThat(gpu.simpleAttention()).isTrue();
        assertThat(CudaBackend.KernelSet.AUTO.simpleOn(Cuda.properties(0).major()))
                .isEqualTo(Cuda.properties(0).major() < 8);
        assertThat(CudaBackend.KernelSet.AUTO.simpleOn(7)).isTrue();
        assertThat(CudaBackend.KernelSet.AUTO.simpleOn(9)).isFalse();
        assertThat(CudaBackend.KernelSet.parse("SM70")).isEqualTo(CudaBackend.KernelSet.SM70);
        assertThat(CudaBackend.KernelSet.parse(null)).isEqualTo(CudaBackend.KernelSet.AUTO);
    }

    @ParameterizedTest
    @EnumSource(Precision.class)
    void forwardAndBackwardMatchTheCpu(Precision p) {
        AttentionShape[] shapes = {
                new AttentionShape(2, 70, 4, 2, 64, 0),                      // grouped query heads
                new AttentionShape(1, 130, 4, 1, 128, 48),                   // HS 128 (the tiled kernels' 115 KB), a window
                new AttentionShape(2, 33, 6, 3, 8, 5),                       // a small head
                new AttentionShape(1, 40, 2, 2, 80, 0),                      // HS not a multiple of 32
                new AttentionShape(1, 50, 2, 1, 256, 0),                     // Gemma's 256 (the wide kernels' range)
                new AttentionShape(2, 45, 4, 4, 32, 0, AttentionShape.QkvLayout.PER_HEAD, true), // BLOOM: ALiBi
                new AttentionShape(1, 60, 4, 2, 64, 16, AttentionShape.QkvLayout.GROUPED, false, 0.125f, 50f)}; // Gemma 2
        for (AttentionShape s : shapes) {
            for (boolean packed : new boolean[] {false, true}) {
                int n = s.batch() * s.seqLen(), ow = s.heads() * s.headDim();
                float[] qkv = randoms(n * s.qkvWidth(), 1.5, p), dOut = randoms(n * ow, 1, p);
                int[] starts = documentStarts(s.batch(), s.seqLen());
                Tensor cStarts = packed ? CPU.uploadInts(starts, n) : null;
                Tensor gStarts = packed ? gpu.uploadInts(starts, n) : null;
                String what = s + (packed ? " packed" : "");
                Tensor cOut = CPU.allocate(DType.F32, n, ow), cLse = CPU.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
                Tensor cQkv = CPU.upload(qkv, n, s.qkvWidth());
                CPU.attentionForward(cOut, cLse, cQkv, cStarts, s);
                Tensor gOut = gpu.allocate(p.dtype, n, ow), gLse = gpu.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
                Tensor gQkv = onGpu(qkv, p, n, s.qkvWidth());
                gpu.attentionForward(gOut, gLse, gQkv, gStarts, s);
                close(gOut, cOut, p.tolerance, "forward " + what);
                close(gLse, cLse, p.tolerance, "lse " + what);
                Tensor cD = CPU.allocate(DType.F32, n, s.qkvWidth()), gD = gpu.allocate(p.dtype, n, s.qkvWidth());
                CPU.attentionBackward(cD, CPU.upload(dOut, n, ow), cQkv, cOut, cLse, cStarts, s);
                gpu.attentionBackward(gD, onGpu(dOut, p, n, ow), gQkv, gOut, gLse, gStarts, s);
                close(gD, cD, p.tolerance * 2, "backward " + what);
            }
        }
    }

    /** fp16 casts: Java's rounding to the bit, subnormals, the largest finite value and overflow to inf included. */
    @Test
    void fp16CastsRoundAsJavaDoes() {
        float[] v = {0f, -0f, 1f, -2.5f, 1e-3f, 3.3333f, 6.1e-5f, 5.96e-8f, 1e-9f, 65504f, 65519f, 65520f, 1e6f, -1e6f,
                0.1f, 1234.567f, Float.POSITIVE_INFINITY};
        Tensor half = gpu.allocate(DType.F16, v.length), back = gpu.allocate(DType.F32, v.length);
        gpu.copy(gpu.upload(v, v.length), half);
        gpu.copy(half, back);
        float[] expected = new float[v.length];
        for (int i = 0; i < v.length; i++) {
            expected[i] = Half.roundF16(v[i]);
        }
        assertThat(gpu.toFloats(back)).containsExactly(expected);
        assertThat(gpu.toFloats(half)).containsExactly(expected);
        gpu.scale(half, 2f);
        for (int i = 0; i < v.length; i++) {
            expected[i] = Half.roundF16(expected[i] * 2f);
        }
        assertThat(gpu.toFloats(half)).containsExactly(expected);
        gpu.fill(half, 0.1f);
        assertThat(gpu.toFloats(half)).containsOnly(Half.roundF16(0.1f));
    }
}
