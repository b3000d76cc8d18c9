package io.fsdp4j.train;

import static io.fsdp4j.train.GoldenTrainingTest.assertClose;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.model.BlockLinears;
import java.util.ArrayList;
import java.util.List;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@code fsdp.param_dtype: fp8} on CPU ranks: parameters gathered in bf16 as with {@code bf16}, the blocks' linear
 * products emulated in fp8 as the GPU computes them ({@link io.fsdp4j.backend.Backend#fp8LinearForward}). The golden
 * models' dimensions are multiples of 16 (the micro-batches' rows too), so every block product runs in fp8. Training
 * stays close to bf16's, is the same whatever the strategy (the casts' scales are per micro-batch, so runs whose
 * micro-batches are the same agree), and the config refuses fp8 where it has no meaning or no hardware.
 */
class Fp8TrainingTest {

    private static TrainingJob.Result train(String model, String strategy, int ranks, int shardSize, int micro,
                                            String... more) {
        return GoldenTrainingTest.train(model, strategy, ranks, shardSize, micro, more);
    }

    /**
     * Ten steps of the golden Qwen2 and BLOOM runs (the two block forms) in fp8 stay within 1% of bf16's loss at
     * every step (the bar for a fine-tune), and fp8 really changes the arithmetic: not bf16's numbers.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"qwen2", "bloom"})
    void fp8StaysCloseToBf16(String model) {
        var bf16 = train(model, "full_shard", 2, 0, 1, "fsdp.param_dtype=bf16");
        var fp8 = train(model, "full_shard", 2, 0, 1, "fsdp.param_dtype=fp8");
        assertThat(fp8.steps()).hasSameSizeAs(bf16.steps());
        for (int s = 0; s < bf16.steps().size(); s++) {
            assertThat(fp8.steps().get(s).loss()).as("loss at step %d", s + 1)
                    .isCloseTo(bf16.steps().get(s).loss(), Percentage.withPercentage(1));
            assertThat(fp8.steps().get(s).lossScale()).isEqualTo(1.0); // no loss scaling: fp8's range is per tensor
        }
        assertThat(fp8.steps().get(0).loss()).isNotEqualTo(bf16.steps().get(0).loss());
        assertThat(fp8.steps().get(0).gradNorm()).isNotEqualTo(bf16.steps().get(0).gradNorm());
    }

    /**
     * Every strategy, and micro-batches of the same sequences, train fp8 as full_shard does (each cast's scale is its
     * micro-batch's).
     */
    @ParameterizedTest(name = "{0} on {1} ranks, shard size {2}, {3} micro-batches")
    @CsvSource({"shard_grad_op,2,0,1", "no_shard,2,0,1", "hybrid_shard,4,2,1", "full_shard,2,0,2"})
    void everyStrategyTrainsFp8AsFullShardDoes(String strategy, int ranks, int shardSize, int micro) {
        // the same micro-batches: 12 sequences in 2 x 1 or 4 x 1 or 2 x 2 pieces; 2 x 2 is 4 x 1's
        int referenceRanks = ranks * micro == 4 ? 4 : 2;
        var reference = train("mistral", "full_shard", referenceRanks, 0, 1, "fsdp.param_dtype=fp8");
        assertClose(train("mistral", strategy, ranks, shardSize, micro, "fsdp.param_dtype=fp8"), reference, 1e-5);
    }

    /**
     * LoRA over a frozen base in fp8 (the golden Qwen2 adapters of PEFT's test, {@link
     * io.fsdp4j.fsdp.LoraGoldenTest}): the base's products in fp8 (only the input gradient: the base is frozen), the
     * adapters' in bf16; within 2% of the bf16 run's loss at every step (the fixture's 12 steps at a high learning
     * rate move the loss of its random model fast: 1.05% apart at the last), and not its numbers.
     */
    @Test
    void loraOverAnFp8BaseStaysCloseToBf16() {
        List<String> layout = io.fsdp4j.fsdp.LoraGoldenTest.layout("full_shard", 2, 0);
        List<String> bf16Sets = new ArrayList<>(layout), fp8Sets = new ArrayList<>(layout);
        bf16Sets.add("fsdp.param_dtype=bf16");
        fp8Sets.add("fsdp.param_dtype=fp8");
        var bf16 = io.fsdp4j.fsdp.LoraGoldenTest.train(bf16Sets);
        var fp8 = io.fsdp4j.fsdp.LoraGoldenTest.train(fp8Sets);
        assertThat(fp8.steps()).hasSameSizeAs(bf16.steps());
        for (int s = 0; s < bf16.steps().size(); s++) {
            assertThat(fp8.steps().get(s).loss()).as("loss at step %d", s + 1)
                    .isCloseTo(bf16.steps().get(s).loss(), Percentage.withPercentage(2));
        }
        assertThat(fp8.steps().get(0).loss()).isNotEqualTo(bf16.steps().get(0).loss());
    }

    /**
     * Full activation checkpointing in fp8, where each block's backward takes its linears' casts from the recomputed
     * forward ({@link io.fsdp4j.backend.Fp8Casts}) instead of casting again, trains bit for bit as no checkpointing,
     * where the backward casts the kept activations anew: the same losses, gradient norms and final weights (the two
     * block forms, also keeping attention with the last block left out or checkpointed selectively; and LoRA over a
     * frozen fp8 base, whose backward takes only the weights' casts: no weight gradient reads an input's).
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"qwen2", "bloom"})
    void fullCheckpointingTrainsFp8AsNone(String model) {
        var none = train(model, "full_shard", 2, 0, 1, "fsdp.param_dtype=fp8", "fsdp.activation_checkpointing=none");
        assertClose(train(model, "full_shard", 2, 0, 1, "fsdp.param_dtype=fp8", "fsdp.activation_checkpointing=full"),
                none, 0);
        // keeping attention: o_proj's input is the kept attention output, cast in the recompute as the others; and
        // the last block left out of checkpointing casts in its own backward
        assertClose(train(model, "full_shard", 2, 0, 1, "fsdp.param_dtype=fp8",
                "fsdp.activation_checkpointing=full_keep_attention", "fsdp.blocks_not_checkpointed=1"), none, 0);
        // the last block checkpointed selectively (fsdp.blocks_selective): its forward's amaxes kept, its norms and
        // MLP activation recomputed in its backward, the first block recomputed whole
        assertClose(train(model, "full_shard", 2, 0, 1, "fsdp.param_dtype=fp8",
                "fsdp.activation_checkpointing=full_keep_attention", "fsdp.blocks_selective=1"), none, 0);
    }

    @Test
    void fullCheckpointingTrainsLoraOverAnFp8BaseAsNone() {
        List<String> none = new ArrayList<>(io.fsdp4j.fsdp.LoraGoldenTest.layout("full_shard", 2, 0));
        none.addAll(List.of("fsdp.param_dtype=fp8", "fsdp.activation_checkpointing=none"));
        List<String> full = new ArrayList<>(none);
        full.add("fsdp.activation_checkpointing=full");
        assertClose(io.fsdp4j.fsdp.LoraGoldenTest.train(full), io.fsdp4j.fsdp.LoraGoldenTest.train(none), 0);
    }

    /**
     * {@code fsdp.fp8_recipe: rowwise} (a scale per row of each operand): ten steps of the golden Qwen2 run stay within
     * 1% of bf16's loss at every step, are not tensorwise's numbers, and shard_grad_op and no_shard train it as
     * full_shard does.
     */
    @Test
    void rowwiseStaysCloseToBf16AndTrainsAlikeOnEveryStrategy() {
        var bf16 = train("qwen2", "full_shard", 2, 0, 1, "fsdp.param_dtype=bf16");
        var tensorwise = train("qwen2", "full_shard", 2, 0, 1, "fsdp.param_dtype=fp8");
        var rowwise = train("qwen2", "full_shard", 2, 0, 1, "fsdp.param_dtype=fp8", "fsdp.fp8_recipe=rowwise");
        for (int s = 0; s < bf16.steps().size(); s++) {
            assertThat(rowwise.steps().get(s).loss()).as("loss at step %d", s + 1)
                    .isCloseTo(bf16.steps().get(s).loss(), Percentage.withPercentage(1));
        }
        assertThat(rowwise.steps().get(0).loss()).isNotEqualTo(tensorwise.steps().get(0).loss());
        assertThat(rowwise.steps().get(0).gradNorm()).isNotEqualTo(tensorwise.steps().get(0).gradNorm());
        for (String strategy : List.of("shard_grad_op", "no_shard")) {
            assertClose(train("qwen2", strategy, 2, 0, 1, "fsdp.param_dtype=fp8", "fsdp.fp8_recipe=rowwise"), rowwise,
                    1e-5);
        }
    }

    @Test
    void theRowwiseRecipeNeedsFp8() {
        TrainConfig c = TrainConfig.load(null, List.of("fsdp.param_dtype=fp8", "fsdp.fp8_recipe=rowwise"));
        assertThat(c.fsdp().fp8Recipe()).isEqualTo(io.fsdp4j.config.Fp8Recipe.ROWWISE);
        assertThat(BlockLinears.of(c.fsdp().paramDtype(), c.fsdp().fp8Recipe())).isEqualTo(BlockLinears.FP8_ROWWISE);
        assertThat(BlockLinears.of(Precision.BF16, io.fsdp4j.config.Fp8Recipe.ROWWISE))
                .isEqualTo(BlockLinears.PARAM_DTYPE);
        assertThat(TrainConfig.load(null, List.of()).fsdp().fp8Recipe())
                .isEqualTo(io.fsdp4j.config.Fp8Recipe.TENSORWISE);
        assertThatThrownBy(() -> TrainConfig.load(null, List.of("fsdp.param_dtype=bf16", "fsdp.fp8_recipe=rowwise")))
                .isInstanceOf(UserError.class).hasMessageContaining("fsdp.fp8_recipe")
                .hasMessageContaining("fsdp.param_dtype=fp8").hasMessageNotContaining("\n");
        assertThatThrownBy(() -> TrainConfig.load(null, List.of("fsdp.param_dtype=fp8", "fsdp.fp8_recipe=blockwise")))
                .isInstanceOf(UserError.class).hasMessageContaining("fsdp.fp8_recipe")
                .hasMessageContaining("rowwise");
    }

    @Test
    void fp8ChoosesTheFp8BlockLinearsAndGathersInBf16() {
        assertThat(BlockLinears.of(Precision.FP8)).isEqualTo(BlockLinears.FP8);
        assertThat(BlockLinears.of(Precision.BF16)).isEqualTo(BlockLinears.PARAM_DTYPE);
        assertThat(Precision.FP8.dtype()).isEqualTo(io.fsdp4j.tensor.DType.BF16);
        TrainConfig c = TrainConfig.load(null, List.of("fsdp.param_dtype=fp8"));
        assertThat(c.fsdp().paramDtype()).isEqualTo(Precision.FP8);
        assertThat(c.fsdp().lossScale().mode()).isEqualTo(io.fsdp4j.config.LossScaling.Mode.NONE);
        assertThat(CpuBackend.INSTANCE.computesIn(Precision.FP8.dtype())).isFalse(); // CPU: widened to fp32, as bf16
    }

    @Test
    void fp8ReductionsAreRefusedInOneLine() {
        assertThatThrownBy(() -> TrainConfig.load(null, List.of("fsdp.reduce_dtype=fp8")))
                .isInstanceOf(UserError.class)
                .hasMessage("config key 'fsdp.reduce_dtype' cannot be fp8 (fp8 is for fsdp.param_dtype: the blocks'"
                        + " products); reduce in bf16 or fp32");
    }

    @Test
    void fp8IsRefusedOnGpusBeforeSm89() {
        var h100 = new Cuda.DeviceProperties(0, "NVIDIA H100 80GB HBM3", 9, 0, 132, 80L << 30, 232448);
        var l4 = new Cuda.DeviceProperties(1, "NVIDIA L4", 8, 9, 58, 24L << 30, 101376);
        var a100 = new Cuda.DeviceProperties(2, "NVIDIA A100-SXM4-80GB", 8, 0, 108, 80L << 30, 166912);
        var v100 = new Cuda.DeviceProperties(3, "Tesla V100-SXM2-32GB", 7, 0, 80, 32L << 30, 98304);
        assertThat(JobSetup.fp8Refusal(Precision.FP8, List.of(h100, l4))).isEmpty();
        assertThat(JobSetup.fp8Refusal(Precision.FP8, List.of(h100, a100))).contains("fsdp.param_dtype=fp8: GPU 2 "
                + "(NVIDIA A100-SXM4-80GB, sm_80) has no fp8 matrix products (they need sm_89 or later: Ada, Hopper); "
                + "set fsdp.param_dtype=bf16");
        assertThat(JobSetup.fp8Refusal(Precision.FP8, List.of(v100))).get().asString()
                .endsWith("set fsdp.param_dtype=fp16");
        assertThat(JobSetup.fp8Refusal(Precision.BF16, List.of(a100))).isEmpty();
        assertThat(JobSetup.bf16Refusal(Precision.FP8, List.of(v100))).isEmpty(); // fp8's own message says it
    }
}
