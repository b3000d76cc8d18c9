package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import java.util.ArrayList;
import java.util.List;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Properties of the engine that must hold whatever the model: how a global batch is split across ranks and
 * micro-batches does not change training, recomputation does not change gradients, and bf16 parameters or
 * reductions stay within a stated tolerance of fp32.
 */
class TrainingEquivalenceTest {

    private static TrainingJob.Result train(String model, String strategy, int ranks, int microBatches, String... more) {
        List<String> sets = new ArrayList<>(GoldenTrainingTest.layout(strategy, ranks, 0, microBatches));
        sets.addAll(List.of(more));
        return GoldenTrainingTest.train(model, sets);
    }

    private static void assertSameTraining(TrainingJob.Result a, TrainingJob.Result b, double relative) {
        assertThat(a.steps()).hasSameSizeAs(b.steps());
        for (int s = 0; s < a.steps().size(); s++) {
            assertThat(a.steps().get(s).loss()).as("loss at step %d", s + 1)
                    .isCloseTo(b.steps().get(s).loss(), Percentage.withPercentage(relative * 100));
            assertThat(a.steps().get(s).gradNorm()).as("grad norm at step %d", s + 1)
                    .isCloseTo(b.steps().get(s).gradNorm(), Percentage.withPercentage(relative * 100));
        }
        for (int u = 0; u < a.finalParams().size(); u++) {
            assertThat(Golden.relativeError(a.finalParams().get(u), b.finalParams().get(u)))
                    .as("final parameters of unit %d", u).isLessThanOrEqualTo(relative);
        }
    }

    @Test
    void fourMicroBatchesOfOneEqualOneMicroBatchOfFour() {
        // 12 sequences per step: 1 rank x 1 micro-batch of 12, 1 rank x 4 of 3, 2 ranks x 2 of 3
        var whole = train("llama", "full_shard", 1, 1);
        assertSameTraining(train("llama", "full_shard", 1, 4), whole, 1e-5);
        assertSameTraining(train("llama", "full_shard", 2, 2), whole, 1e-5);
        assertSameTraining(train("qwen2", "shard_grad_op", 3, 4), train("qwen2", "shard_grad_op", 1, 1), 1e-5);
    }

    /** Recomputation repeats the same deterministic arithmetic: identical training, not merely close. */
    private static void assertIdenticalTraining(TrainingJob.Result a, TrainingJob.Result b) {
        assertThat(a.steps()).hasSameSizeAs(b.steps());
        for (int s = 0; s < b.steps().size(); s++) {
            assertThat(a.steps().get(s).gradNorm()).as("grad norm at step %d", s + 1).isEqualTo(b.steps().get(s).gradNorm());
            assertThat(a.steps().get(s).loss()).as("loss at step %d", s + 1).isEqualTo(b.steps().get(s).loss());
        }
        for (int u = 0; u < b.finalParams().size(); u++) {
            assertThat(a.finalParams().get(u)).as("final parameters of unit %d", u).isEqualTo(b.finalParams().get(u));
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"full_shard", "shard_grad_op", "no_shard"})
    void fullCheckpointingGivesTheSameGradients(String strategy) {
        var kept = train("mistral", strategy, 2, 2);
        assertIdenticalTraining(train("mistral", strategy, 2, 2, "fsdp.activation_checkpointing=full"), kept);
    }

    /**
     * Selective checkpointing recomputes the norms and the MLP's activation function in backward with the forward's
     * own kernels: ten steps give bitwise the losses, gradient norms and final weights of none (and so of full), for
     * the Llama family (Qwen2's biases, Mistral's sliding window) and BLOOM (whose block 0 also keeps the embedding
     * LayerNorm), on one rank and on several with gradient accumulation.
     */
    @ParameterizedTest(name = "{0} on {1} ranks x {2} micro-batches")
    @CsvSource({"qwen2,1,2", "mistral,2,2", "bloom,1,1", "bloom,3,2"})
    void selectiveCheckpointingGivesTheSameTrainingAsNoneAndFull(String model, int ranks, int microBatches) {
        var none = train(model, "full_shard", ranks, microBatches);
        assertIdenticalTraining(train(model, "full_shard", ranks, microBatches, "fsdp.activation_checkpointing=selective"), none);
        assertIdenticalTraining(train(model, "full_shard", ranks, microBatches, "fsdp.activation_checkpointing=full"), none);
    }

    /**
     * Full checkpointing that keeps attention recomputes each block's forward but attention, whose output and lse it
     * kept: ten steps give bitwise none's losses, gradient norms and final weights, for the Llama family's forms
     * (Qwen2's biases, Qwen3's head norms, Gemma 3's norms after attention and the MLP and its sliding layers) and
     * BLOOM (block 0's embedding LayerNorm recomputed), on one rank and on several with gradient accumulation.
     */
    @ParameterizedTest(name = "{0} on {1} ranks x {2} micro-batches")
    @CsvSource({"qwen2,1,2", "qwen3,2,2", "gemma3,2,1", "bloom,3,2"})
    void fullCheckpointingKeepingAttentionGivesTheSameTrainingAsNone(String model, int ranks, int microBatches) {
        var none = train(model, "full_shard", ranks, microBatches);
        assertIdenticalTraining(train(model, "full_shard", ranks, microBatches,
                "fsdp.activation_checkpointing=full_keep_attention"), none);
    }

    /**
     * {@code fsdp.blocks_not_checkpointed}: the last block keeps every activation while the others are checkpointed;
     * the training is none's to the last bit in every mode.
     */
    @ParameterizedTest(name = "{0} on {1} ranks, {2}")
    @CsvSource({"qwen2,2,full", "qwen3,1,full_keep_attention", "gemma3,2,selective", "bloom,2,full"})
    void blocksLeftOutOfCheckpointingTrainAsTheRest(String model, int ranks, String mode) {
        var none = train(model, "full_shard", ranks, 2);
        assertIdenticalTraining(train(model, "full_shard", ranks, 2, "fsdp.activation_checkpointing=" + mode,
                "fsdp.blocks_not_checkpointed=1"), none);
    }

    /**
     * {@code fsdp.blocks_selective}: under full checkpointing (with or without attention kept) the block before those
     * left out (alone, or beside one left out) is checkpointed selectively; the training is none's to the last bit.
     */
    @ParameterizedTest(name = "{0} on {1} ranks, {2}, {3} left out")
    @CsvSource({"qwen2,2,full,0", "qwen3,1,full_keep_attention,0", "gemma3,2,full_keep_attention,1",
        "qwen2,1,full,1", "bloom,2,full,0",
        "bloom,2,full_keep_attention,1"})
    void blocksCheckpointedSelectivelyTrainAsTheRest(String model, int ranks, String mode, int leftOut) {
        var none = train(model, "full_shard", ranks, 2);
        assertIdenticalTraining(train(model, "full_shard", ranks, 2, "fsdp.activation_checkpointing=" + mode,
                "fsdp.blocks_not_checkpointed=" + leftOut, "fsdp.blocks_selective=1"), none);
    }

    /** bf16 parameters (and bf16 gradient reduction) track fp32 training within 2% on loss and grad norm. */
    @Test
    void bf16StaysWithinToleranceOfFp32() {
        var fp32 = train("qwen2", "full_shard", 2, 1);
        var bf16 = train("qwen2", "full_shard", 2, 1, "fsdp.param_dtype=bf16");
        var bf16Reduce = train("qwen2", "full_shard", 2, 1, "fsdp.param_dtype=bf16", "fsdp.reduce_dtype=bf16");
        for (var run : List.of(bf16, bf16Reduce)) {
            for (int s = 0; s < fp32.steps().size(); s++) {
                assertThat(run.steps().get(s).loss()).isCloseTo(fp32.steps().get(s).loss(), Percentage.withPercentage(2));
                assertThat(run.steps().get(s).gradNorm()).isCloseTo(fp32.steps().get(s).gradNorm(), Percentage.withPercentage(2));
            }
        }
        // and bf16 really changes the arithmetic (the setting is not ignored)
        assertThat(bf16.steps().get(0).loss()).isNotEqualTo(fp32.steps().get(0).loss());
        assertThat(bf16Reduce.steps().get(5).gradNorm()).isNotEqualTo(bf16.steps().get(5).gradNorm());
    }

    /**
     * Units whose shard group is one rank (no_shard across replicas, or a single rank) reduce in bf16 too: the
     * rounding happens (the numbers differ from an fp32 reduction) and stays within the same 2% of fp32.
     */
    @ParameterizedTest
    @CsvSource({"no_shard, 2", "full_shard, 1"})
    void bf16ReductionAppliesToUnshardedUnits(String strategy, int ranks) {
        var fp32Reduce = train("qwen2", strategy, ranks, 1, "fsdp.param_dtype=bf16");
        var bf16Reduce = train("qwen2", strategy, ranks, 1, "fsdp.param_dtype=bf16", "fsdp.reduce_dtype=bf16");
        for (int s = 0; s < fp32Reduce.steps().size(); s++) {
            assertThat(bf16Reduce.steps().get(s).loss()).isCloseTo(fp32Reduce.steps().get(s).loss(), Percentage.withPercentage(2));
            assertThat(bf16Reduce.steps().get(s).gradNorm()).isCloseTo(fp32Reduce.steps().get(s).gradNorm(), Percentage.withPercentage(2));
        }
        assertThat(bf16Reduce.steps().get(5).gradNorm()).isNotEqualTo(fp32Reduce.steps().get(5).gradNorm());
    }

    @Test
    void anImpossibleMeshIsRefusedBeforeAnyWork() {
        TrainConfig config = TrainConfig.load(null, List.of("dist.ranks=3", "fsdp.strategy=hybrid_shard", "fsdp.shard_size=2"));
        var run = new TrainingJob(config, Golden.config("llama"), (u, s, d, o, c) -> {
            throw new AssertionError("weights must not be read for an impossible mesh");
        }, List.of(), false);
        assertThatThrownBy(() -> run.run(null, false)).isInstanceOf(UserError.class)
                .hasMessageContaining("world size 3").hasMessageContaining("fsdp.shard_size 2");
    }
}
