package io.fsdp4j.gpu;

import static io.fsdp4j.RandomArrays.gaussian;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.backend.DropoutMask;
import io.fsdp4j.fsdp.LoraGoldenTest;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * LoRA on the GPU: PEFT's 12 steps of the LoRA golden fixture (qwen2, adapters on every linear) on one GPU and on
 * two when there are two, in fp32 (within 1e-3 of PEFT: TF32-free cuBLAS and our kernels differ from the CPU only in
 * rounding) and in bf16 (the frozen base held in bf16, 2 bytes a parameter; within 2% of PEFT's losses). The ops LoRA
 * added: a linear's backward without a weight gradient (the frozen base's: the same dx, bit for bit, as with one) and
 * dropout's mask (the kernel's bits are the CPU's); and training with lora.dropout as on the CPU.
 */
@Tag("gpu")
class GpuLoraTest {

    private static List<String> onGpus(int gpus, String... more) {
        List<String> sets = new ArrayList<>(LoraGoldenTest.layout("full_shard", gpus, 0));
        sets.add("dist.device=cuda");
        sets.addAll(List.of(more));
        return sets;
    }

    @Test
    void loraTrainsAsPeftOnTheGpu() {
        GpuTests.requireGpus(1);
        int gpus = io.fsdp4j.cuda.Cuda.deviceCount() >= 2 ? 2 : 1;
        JsonNode t = LoraGoldenTest.fixture();
        for (int n : gpus == 2 ? new int[] {1, 2} : new int[] {1}) {
            for (String dtype : List.of("fp32", "bf16")) {
                TrainingJob.Result result = LoraGoldenTest.train(onGpus(n, "fsdp.param_dtype=" + dtype));
                assertThat(result.devices()).doesNotStartWith("cpu");
                double tolerance = dtype.equals("fp32") ? 1e-3 : 2e-2;
                for (int s = 0; s < result.steps().size(); s++) {
                    double want = t.get("loss").get(s).doubleValue();
                    assertThat(result.steps().get(s).loss()).as("%s on %d GPU(s): loss at step %d", dtype, n, s + 1)
                            .isCloseTo(want, within(tolerance * want));
                }
            }
        }
    }

    @Test
    void aFrozenWeightsBackwardGivesTheSameInputGradient() {
        GpuTests.requireGpus(1);
        try (CudaBackend gpu = new CudaBackend(0)) {
            var rng = new SplittableRandom(3);
            int n = 96, in = 80, out = 112;
            for (DType dtype : List.of(DType.F32, DType.BF16)) {
                try (var scope = gpu.newScope(); var entered = scope.enter()) {
                    Tensor x = cast(gpu, gaussian(rng, n * in, 1), dtype, n, in);
                    Tensor w = cast(gpu, gaussian(rng, out * in, 1), dtype, out, in);
                    Tensor dOut = cast(gpu, gaussian(rng, n * out, 1), dtype, n, out);
                    Tensor dxWith = gpu.allocate(dtype, n, in), dxWithout = gpu.allocate(dtype, n, in);
                    gpu.linearBackward(dxWith, gpu.allocate(DType.F32, out, in), gpu.allocate(DType.F32, out), dOut, x,
                            w, false);
                    gpu.linearBackward(dxWithout, null, null, dOut, x, w, false);
                    assertThat(gpu.toFloats(dxWithout)).as("%s", dtype).containsExactly(gpu.toFloats(dxWith));
                }
            }
        }
    }

    @Test
    void theDropoutKernelDrawsTheCpusMaskBitForBit() {
        GpuTests.requireGpus(1);
        CpuBackend cpu = CpuBackend.INSTANCE;
        try (CudaBackend gpu = new CudaBackend(0)) {
            int n = 1_000_003;
            float[] x = gaussian(new SplittableRandom(5), n, 1);
            for (double p : new double[] {0.05, 0.1, 0.5}) {
                long seed = DropoutMask.seed(42, 7, 3, "v_proj".hashCode()), first = 123_456_789L;
                Tensor want = cpu.allocate(DType.F32, n);
                cpu.dropout(want, cpu.upload(x, n), p, seed, first);
                float[] expected = cpu.toFloats(want);
                try (var scope = gpu.newScope(); var entered = scope.enter()) {
                    Tensor got = gpu.allocate(DType.F32, n);
                    gpu.dropout(got, gpu.upload(x, n), p, seed, first);
                    assertSameBits(gpu.toFloats(got), expected, "fp32, p " + p);
                    // bf16: the CPU's fp32 product of the bf16 input, rounded to bf16
                    float[] rounded = new float[n];
                    for (int i = 0; i < n; i++) {
                        rounded[i] = Half.roundBf16(x[i]);
                    }
                    Tensor halfIn = cast(gpu, x, DType.BF16, n), halfOut = gpu.allocate(DType.BF16, n);
                    gpu.dropout(halfOut, halfIn, p, seed, first);
                    Tensor fromRounded = cpu.allocate(DType.F32, n);
                    cpu.dropout(fromRounded, cpu.upload(rounded, n), p, seed, first);
                    float[] halfWant = cpu.toFloats(fromRounded);
                    for (int i = 0; i < n; i++) {
                        halfWant[i] = Half.roundBf16(halfWant[i]);
                    }
                    assertSameBits(gpu.toFloats(halfOut), halfWant, "bf16, p " + p);
                }
            }
        }
    }

    @Test
    void loraWithDropoutTrainsOnTheGpuAsOnTheCpu() {
        GpuTests.requireGpus(1);
        List<String> cpuSets = new ArrayList<>(LoraGoldenTest.layout("full_shard", 1, 0));
        cpuSets.add("lora.dropout=0.1");
        TrainingJob.Result cpu = LoraGoldenTest.train(cpuSets);
        TrainingJob.Result gpu = LoraGoldenTest.train(onGpus(1, "lora.dropout=0.1", "fsdp.param_dtype=fp32"));
        for (int s = 0; s < cpu.steps().size(); s++) {
            double want = cpu.steps().get(s).loss();
            assertThat(gpu.steps().get(s).loss()).as("loss at step %d", s + 1).isCloseTo(want, within(1e-3 * want));
        }
    }

    /** values uploaded to the GPU in {@code dtype} (bf16: rounded to nearest even). */
    private static Tensor cast(CudaBackend gpu, float[] values, DType dtype, int... shape) {
        Tensor f = gpu.upload(values, shape);
        if (dtype == DType.F32) {
            return f;
        }
        Tensor t = gpu.allocate(dtype, shape);
        gpu.copy(f, t);
        return t;
    }

    /** Every family's LoRA fixture (LoraFamiliesTest's) on one GPU, fp32 and bf16, against PEFT's losses. */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"phi3", "gemma2", "gemma3", "qwen3", "bloom"})
    void everyFamilyTrainsAsPeftOnTheGpu(String model) {
        GpuTests.requireGpus(1);
        JsonNode t = LoraGoldenTest.fixture(model);
        for (String dtype : List.of("fp32", "bf16")) {
            TrainingJob.Result result = LoraGoldenTest.train(model, onGpus(1, "fsdp.param_dtype=" + dtype));
            assertThat(result.devices()).doesNotStartWith("cpu");
            double tolerance = dtype.equals("fp32") ? 1e-3 : 2e-2;
            for (int s = 0; s < result.steps().size(); s++) {
                double want = t.get("loss").get(s).doubleValue();
                assertThat(result.steps().get(s).loss()).as("%s %s: loss at step %d", model, dtype, s + 1)
                        .isCloseTo(want, within(tolerance * want));
            }
        }
    }

    /**
     * Every element equal bit for bit; on a difference, the first index and its values (AssertJ's containsExactly
     * diffs a million elements for minutes before it reports).
     */
    private static void assertSameBits(float[] got, float[] want, String what) {
        assertThat(got.length).as("%s: length", what).isEqualTo(want.length);
        int at = java.util.Arrays.mismatch(got, want);
        if (at >= 0) {
            throw new AssertionError(what + ": element " + at + " is " + got[at] + ", expected " + want[at]);
        }
    }
}
