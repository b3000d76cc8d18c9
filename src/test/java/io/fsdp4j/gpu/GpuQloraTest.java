package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.fsdp.LoraGoldenTest;
import io.fsdp4j.fsdp.QloraGoldenTest;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Nf4;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * QLoRA on the GPU: nf4.cu's dequantization bit for bit the CPU backend's (the reference, itself bitsandbytes' bits:
 * Nf4Test), into fp32, bf16 and fp16, whole and through views at block offsets; and PEFT's 12 steps of the QLoRA
 * fixture (qwen2, NF4 base, adapters on every linear) on one GPU and on two when there are two, fp32 within 1e-3 of
 * PEFT, bf16 within 2%.
 */
@Tag("gpu")
class GpuQloraTest {

    @Test
    void theNf4KernelDequantizesAsTheCpu() {
        GpuTests.requireGpus(1);
        CpuBackend cpu = CpuBackend.INSTANCE;
        var rng = new SplittableRandom(25);
        int blocks = 4099, n = blocks * Nf4.BLOCK;
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            values[i] = (float) (rng.nextGaussian() * (i / Nf4.BLOCK % 7 == 3 ? 0 : 0.02)); // some all-zero blocks
        }
        int[] packed = new int[blocks * Nf4.WORDS_PER_BLOCK];
        float[] absmax = new float[blocks];
        Nf4.quantize(values, 0, blocks, packed, 0, absmax, 0);
        try (CudaBackend gpu = new CudaBackend(0)) {
            for (DType dtype : List.of(DType.F32, DType.BF16, DType.F16)) {
                try (var scope = gpu.newScope(); var entered = scope.enter()) {
                    Tensor codesGpu = gpu.uploadInts(packed, packed.length), absmaxGpu = gpu.upload(absmax, blocks);
                    Tensor outGpu = gpu.allocate(dtype, n), outCpu = cpu.allocate(dtype, n);
                    gpu.dequantizeNf4(outGpu, codesGpu, absmaxGpu);
                    cpu.dequantizeNf4(outCpu, cpu.uploadInts(packed, packed.length), cpu.upload(absmax, blocks));
                    assertBits(gpu.toFloats(outGpu), cpu.toFloats(outCpu), dtype + " whole");
                    // a view: blocks 1000.. of the codes into elements from block 1000 of the output
                    int from = 1000, count = 2048;
                    Tensor viewGpu = gpu.allocate(dtype, count * Nf4.BLOCK);
                    gpu.dequantizeNf4(viewGpu, codesGpu.view((long) from * Nf4.WORDS_PER_BLOCK,
                            count * Nf4.WORDS_PER_BLOCK), absmaxGpu.view(from, count));
                    float[] whole = cpu.toFloats(outCpu);
                    assertBits(gpu.toFloats(viewGpu), java.util.Arrays.copyOfRange(whole, from * Nf4.BLOCK,
                            (from + count) * Nf4.BLOCK), dtype + " view");
                }
            }
        }
    }

    private static void assertBits(float[] got, float[] want, String what) {
        assertThat(got).as(what).hasSameSizeAs(want);
        for (int i = 0; i < want.length; i++) {
            assertThat(Float.floatToRawIntBits(got[i])).as("%s[%d]: %s vs %s", what, i, got[i], want[i])
                    .isEqualTo(Float.floatToRawIntBits(want[i]));
        }
    }

    @Test
    void qloraTrainsAsPeftOnTheGpu() {
        GpuTests.requireGpus(1);
        int gpus = io.fsdp4j.cuda.Cuda.deviceCount() >= 2 ? 2 : 1;
        JsonNode t = QloraGoldenTest.fixture();
        for (int n : gpus == 2 ? new int[] {1, 2} : new int[] {1}) {
            for (String dtype : List.of("fp32", "bf16")) {
                List<String> sets = new ArrayList<>(LoraGoldenTest.layout("full_shard", n, 0));
                sets.addAll(List.of("dist.device=cuda", "fsdp.param_dtype=" + dtype));
                TrainingJob.Result result = QloraGoldenTest.train(sets);
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
}
