package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.fsdp.LoraGoldenTest;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * LoRA on the GPU: PEFT's 12 steps of the LoRA golden fixture (qwen2, adapters on every linear) on one GPU and on
 * two when there are two, in fp32 (within 1e-3 of PEFT: TF32-free cuBLAS and our kernels differ from the CPU only in
 * rounding) and in bf16 (the frozen base held in bf16, 2 bytes a parameter; within 2% of PEFT's losses).
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
}
