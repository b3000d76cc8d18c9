package io.fsdp4j.gpu;

import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code fsdp.param_copy: kept} on the GPU (adamw_f32_segments_bf16 writes the copy the gathers send) trains as
 * {@code per_gather} does, bit for bit: the golden Qwen2 model, bf16 parameters, 10 steps on one GPU, every step's loss
 * and gradient norm and the final parameters equal (fsdp4j's attention kernels, which sum in a fixed order); and on two
 * ranks sharing the GPU, where each rank's gather sends its kept shard to the other. In fp8 the same: on one rank the
 * weights' casts take the amaxes AdamW's pass over the copy kept (io.fsdp4j.backend.KnownAmax), per_gather's read
 * the gathered weights.
 */
@Tag("gpu")
class GpuParamCopyTest {

    private static TrainingJob.Result train(int ranks, String dtype, String copy) {
        List<String> sets = new ArrayList<>(GoldenTrainingTest.layout("full_shard", ranks, 0, 1));
        sets.addAll(List.of("dist.device=cuda", "attention.kernel=fsdp4j", "fsdp.param_dtype=" + dtype,
                "fsdp.param_copy=" + copy));
        if (ranks > 1) {
            sets.add("dist.share_gpu=true");
        }
        return GoldenTrainingTest.train("qwen2", sets);
    }

    @ParameterizedTest(name = "{1} on {0} rank(s) sharing the GPU")
    @CsvSource({"1,bf16", "2,bf16", "1,fp8", "2,fp8"})
    void keptTrainsAsPerGatherOnTheGpu(int ranks, String dtype) {
        GpuTests.requireGpus(1);
        TrainingJob.Result perGather = train(ranks, dtype, "per_gather");
        TrainingJob.Result kept = train(ranks, dtype, "kept");
        GoldenTrainingTest.assertClose(kept, perGather, 0);
    }
}
