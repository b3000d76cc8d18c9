package io.fsdp4j.gpu;

import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code fsdp.param_copy: kept} on the GPU (adamw_f32_segments_bf16 writes the copy the gathers send) trains as
 * {@code per_gather} does, bit for bit: the golden Qwen2 model, bf16 parameters, 10 steps on one GPU, every step's loss
 * and gradient norm and the final parameters equal (fsdp4j's attention kernels, which sum in a fixed order); and on two
 * ranks sharing the GPU, where each rank's gather sends its kept shard to the other.
 */
@Tag("gpu")
class GpuParamCopyTest {

    private static TrainingJob.Result train(int ranks, String copy) {
        List<String> sets = new ArrayList<>(GoldenTrainingTest.layout("full_shard", ranks, 0, 1));
        sets.addAll(List.of("dist.device=cuda", "attention.kernel=fsdp4j", "fsdp.param_dtype=bf16",
                "fsdp.param_copy=" + copy));
        if (ranks > 1) {
            sets.add("dist.share_gpu=true");
        }
        return GoldenTrainingTest.train("qwen2", sets);
    }

    @ParameterizedTest(name = "on {0} rank(s) sharing the GPU")
    @ValueSource(ints = {1, 2})
    void keptTrainsAsPerGatherOnTheGpu(int ranks) {
        GpuTests.requireGpus(1);
        TrainingJob.Result perGather = train(ranks, "per_gather");
        TrainingJob.Result kept = train(ranks, "kept");
        GoldenTrainingTest.assertClose(kept, perGather, 0);
    }
}
