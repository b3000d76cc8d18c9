package io.fsdp4j.gpu;

import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

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

    @Test
    void keptTrainsAsPerGatherOnTheGpu() {
        GpuTests.requireGpus(1);
        TrainingJob.Result perGather = train(1, "per_gather");
        TrainingJob.Result kept = train(1, "kept");
        GoldenTrainingTest.assertClose(kept, perGather, 0);
    }

    @Test
    void keptTrainsAsPerGatherOnTwoRanksSharingTheGpu() {
        GpuTests.requireGpus(1);
        TrainingJob.Result perGather = train(2, "per_gather");
        TrainingJob.Result kept = train(2, "kept");
        GoldenTrainingTest.assertClose(kept, perGather, 0);
    }
}
