package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code fsdp.param_copy: kept} trains as {@code per_gather} does, bit for bit: the copy the optimizer writes is the
 * master rounded as each gather rounds it. Every step's loss and gradient norm and the final parameters equal, on one
 * rank (the copy is the gathered unit itself) and sharded, in bf16, fp16 and fp8 (whose gathers are bf16).
 */
class ParamCopyTest {

    @ParameterizedTest(name = "{0} {1} on {2} ranks in {3}")
    @CsvSource({"qwen2,full_shard,1,bf16", "qwen2,full_shard,2,bf16", "llama,hybrid_shard,4,fp16",
            "qwen2,full_shard,1,fp8", "mistral,shard_grad_op,2,bf16"})
    void keptTrainsAsPerGather(String model, String strategy, int ranks, String dtype) {
        int shardSize = strategy.startsWith("hybrid") ? 2 : 0;
        TrainingJob.Result perGather = GoldenTrainingTest.train(model, strategy, ranks, shardSize, 1,
                "fsdp.param_dtype=" + dtype, "fsdp.param_copy=per_gather");
        TrainingJob.Result kept = GoldenTrainingTest.train(model, strategy, ranks, shardSize, 1,
                "fsdp.param_dtype=" + dtype, "fsdp.param_copy=kept");
        GoldenTrainingTest.assertClose(kept, perGather, 0);
        assertThat(kept.steps().getLast().loss()).isEqualTo(perGather.steps().getLast().loss());
    }

    /** LoRA's adapters are trained shards beside a frozen base: their kept copy trains as per_gather too. */
    @ParameterizedTest(name = "LoRA on {0} ranks")
    @CsvSource({"1", "2"})
    void keptTrainsLoraAdaptersAsPerGather(int ranks) {
        String[] lora = {"fsdp.param_dtype=bf16", "lora.rank=4", "lora.alpha=8", "optim.lr=1e-2"};
        TrainingJob.Result perGather = GoldenTrainingTest.train("qwen2", "full_shard", ranks, 0, 1,
                concat(lora, "fsdp.param_copy=per_gather"));
        TrainingJob.Result kept = GoldenTrainingTest.train("qwen2", "full_shard", ranks, 0, 1,
                concat(lora, "fsdp.param_copy=kept"));
        GoldenTrainingTest.assertClose(kept, perGather, 0);
        assertThat(kept.steps().getLast().loss()).isNotEqualTo(kept.steps().getFirst().loss());
    }

    private static String[] concat(String[] first, String last) {
        String[] all = java.util.Arrays.copyOf(first, first.length + 1);
        all[first.length] = last;
        return all;
    }
}
