package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.cli.NanOnOneRankTest;
import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.StepResult;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * fp16 training on the GPU ({@code fsdp.param_dtype: fp16}, dynamic loss scaling): the golden runs in fp16 track fp32
 * within fp16's tolerance, on the tiled kernels and on the simple ones of GPUs before sm_80 (forced here with
 * {@value CudaBackend#KERNELS_PROPERTY}), where fp32 still matches PyTorch; and a NaN on one rank skips the step
 * everywhere and halves the scale.
 */
@Tag("gpu")
class Fp16GpuTrainingTest {

    private static List<String> onOneGpu(String... more) {
        List<String> sets = new ArrayList<>(GoldenTrainingTest.layout("full_shard", 1, 0, 1));
        sets.add("dist.device=cuda");
        sets.addAll(List.of(more));
        return sets;
    }

    private static void assertTracks(TrainingJob.Result run, TrainingJob.Result reference, double relative, String what) {
        assertThat(run.steps()).hasSameSizeAs(reference.steps());
        for (int s = 0; s < reference.steps().size(); s++) {
            assertThat(run.steps().get(s).loss()).as("%s: loss at step %d", what, s + 1)
                    .isCloseTo(reference.steps().get(s).loss(), Percentage.withPercentage(relative * 100));
            assertThat(run.steps().get(s).gradNorm()).as("%s: grad norm at step %d", what, s + 1)
                    .isCloseTo(reference.steps().get(s).gradNorm(), Percentage.withPercentage(relative * 100));
        }
    }

    /** The job, run with the attention kernels of GPUs before sm_80 (the property read when each rank opens its GPU). */
    private static <T> T withSimpleKernels(Supplier<T> job) {
        String before = System.getProperty(CudaBackend.KERNELS_PROPERTY);
        System.setProperty(CudaBackend.KERNELS_PROPERTY, "sm70");
        try {
            return job.get();
        } finally {
            if (before == null) {
                System.clearProperty(CudaBackend.KERNELS_PROPERTY);
            } else {
                System.setProperty(CudaBackend.KERNELS_PROPERTY, before);
            }
        }
    }

    @Test
    void fp16TracksFp32OnTheTiledAndTheSimpleKernels() {
        GpuTests.requireGpus(1);
        for (String model : List.of("llama", "qwen2")) {
            var fp32 = GoldenTrainingTest.train(model, onOneGpu());
            var fp16 = GoldenTrainingTest.train(model, onOneGpu("fsdp.param_dtype=fp16"));
            var fp16Reduce = GoldenTrainingTest.train(model, onOneGpu("fsdp.param_dtype=fp16", "fsdp.reduce_dtype=fp16"));
            var simpleFp16 = withSimpleKernels(() -> GoldenTrainingTest.train(model, onOneGpu("fsdp.param_dtype=fp16")));
            var simpleFp32 = withSimpleKernels(() -> GoldenTrainingTest.train(model, onOneGpu()));
            List<String> onCpu = new ArrayList<>(GoldenTrainingTest.layout("full_shard", 1, 0, 1));
            onCpu.addAll(List.of("dist.device=cpu", "fsdp.param_dtype=fp16"));
            var cpuFp16 = GoldenTrainingTest.train(model, onCpu);
            assertTracks(fp16, fp32, 1e-2, model + " fp16");
            assertTracks(fp16Reduce, fp32, 1e-2, model + " fp16, fp16 reductions");
            assertTracks(simpleFp16, fp32, 1e-2, model + " fp16 on the simple kernels");
            assertTracks(simpleFp32, fp32, 1e-4, model + " fp32 on the simple kernels");
            assertTracks(fp16, cpuFp16, 1e-2, model + " fp16 on the GPU and on the CPU");
            assertThat(fp16.devices()).doesNotStartWith("cpu");
            for (var run : List.of(fp16, fp16Reduce, simpleFp16)) {
                assertThat(run.steps()).allSatisfy(s -> {
                    assertThat(s.lossScale()).isEqualTo(65536.0);
                    assertThat(s.skipped()).isFalse();
                });
            }
            assertThat(fp16.steps().getFirst().loss()).isNotEqualTo(fp32.steps().getFirst().loss());
            // fp32 on the simple kernels still matches PyTorch (what the tiled kernels match, GpuTrainingTest)
            var golden = Golden.json(model, "train.json");
            for (int s = 0; s < simpleFp32.steps().size(); s++) {
                StepResult r = simpleFp32.steps().get(s);
                assertThat(r.loss()).as("%s loss at step %d", model, s + 1)
                        .isCloseTo(golden.get("loss").get(s).doubleValue(), Percentage.withPercentage(1e-2));
            }
        }
    }

    /** A NaN on one of two ranks sharing the GPU, in fp16: skipped everywhere, the scale halved after it. */
    @Test
    void aNanOnOneRankInFp16SkipsTheStepEverywhereAndHalvesTheScale(@TempDir Path tmp) throws IOException {
        GpuTests.requireGpus(1);
        NanOnOneRankTest.check(tmp, "dist.device=cuda", "dist.share_gpu=true", "fsdp.param_dtype=fp16",
                "fsdp.reduce_dtype=fp16", "log.every=1");
        NanOnOneRankTest.assertScaleHalvedAfterTheSkip(tmp.resolve("metrics.jsonl"));
    }
}
