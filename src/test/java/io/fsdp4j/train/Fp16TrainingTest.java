package io.fsdp4j.train;

import static io.fsdp4j.train.GoldenTrainingTest.assertClose;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.CheckpointIndex;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * fp16 parameters ({@code fsdp.param_dtype: fp16}) and reductions on CPU ranks: gathered parameters rounded to fp16
 * (arithmetic in fp32, as the CPU backend does for bf16), the loss scaled dynamically by default. Training tracks fp32
 * within fp16's tolerance, the same whatever the strategy and the number of ranks, and a reduction that overflows
 * fp16's range skips its step on every rank and halves the scale until the gradients fit.
 */
class Fp16TrainingTest {

    private static TrainingJob.Result train(String model, String strategy, int ranks, int shardSize, String... more) {
        return GoldenTrainingTest.train(model, strategy, ranks, shardSize, 1, more);
    }

    /**
     * fp16 parameters, and fp16 parameters with fp16 reductions, track fp32 within 0.5% (fp16 keeps 11 bits of
     * mantissa where bf16 keeps 8: closer than bf16's 2%), with the dynamic loss scale at its initial 65536 all
     * along (ten steps: no overflow, no growth); and fp16 really changes the arithmetic, otherwise than bf16.
     */
    @Test
    void fp16StaysWithinToleranceOfFp32() {
        var fp32 = train("qwen2", "full_shard", 2, 0);
        var fp16 = train("qwen2", "full_shard", 2, 0, "fsdp.param_dtype=fp16");
        var fp16Reduce = train("qwen2", "full_shard", 2, 0, "fsdp.param_dtype=fp16", "fsdp.reduce_dtype=fp16");
        var bf16 = train("qwen2", "full_shard", 2, 0, "fsdp.param_dtype=bf16");
        assertClose(fp16, fp32, 5e-3);
        assertClose(fp16Reduce, fp32, 5e-3);
        assertThat(fp16.steps()).allSatisfy(s -> {
            assertThat(s.lossScale()).isEqualTo(65536.0);
            assertThat(s.skipped()).isFalse();
        });
        assertThat(fp32.steps()).allSatisfy(s -> assertThat(s.lossScale()).isEqualTo(1.0));
        assertThat(fp16.steps().get(0).loss()).isNotEqualTo(fp32.steps().get(0).loss())
                .isNotEqualTo(bf16.steps().get(0).loss());
        assertThat(fp16Reduce.steps().get(5).gradNorm()).isNotEqualTo(fp16.steps().get(5).gradNorm());
        // fp16 is closer to fp32 than bf16 is
        double fp16Off = Math.abs(fp16.steps().getLast().loss() - fp32.steps().getLast().loss());
        double bf16Off = Math.abs(bf16.steps().getLast().loss() - fp32.steps().getLast().loss());
        assertThat(fp16Off).isLessThan(bf16Off);
    }

    /**
     * The loss scale is divided out exactly: fp32 training with a static scale of 1024 (a power of two: every scaled
     * gradient and the unscaling are exact in fp32) is fp32 training without one, to the bit.
     */
    @Test
    void aPowerOfTwoScaleIsDividedOutExactly() {
        var plain = train("llama", "full_shard", 2, 0);
        var scaled = train("llama", "full_shard", 2, 0, "fsdp.loss_scale=1024");
        for (int s = 0; s < plain.steps().size(); s++) {
            assertThat(scaled.steps().get(s).loss()).as("loss at step %d", s + 1).isEqualTo(plain.steps().get(s).loss());
            assertThat(scaled.steps().get(s).gradNorm()).as("grad norm at step %d", s + 1)
                    .isCloseTo(plain.steps().get(s).gradNorm(), Percentage.withPercentage(1e-9));
            assertThat(scaled.steps().get(s).lossScale()).isEqualTo(1024.0);
        }
        for (int u = 0; u < plain.finalParams().size(); u++) {
            assertThat(scaled.finalParams().get(u)).as("unit %d", u).isEqualTo(plain.finalParams().get(u));
        }
    }

    /** Every strategy, on 2 or 4 ranks, trains fp16 as one rank does (fp16 reductions: within their rounding). */
    @ParameterizedTest(name = "{0} on {1} ranks, shard size {2}")
    @CsvSource({"full_shard,2,0", "shard_grad_op,2,0", "no_shard,2,0", "hybrid_shard,4,2", "hybrid_shard_zero2,4,2"})
    void everyStrategyTrainsFp16AsOneRankDoes(String strategy, int ranks, int shardSize) {
        var one = train("mistral", "full_shard", 1, 0, "fsdp.param_dtype=fp16");
        assertClose(train("mistral", strategy, ranks, shardSize, "fsdp.param_dtype=fp16"), one, 1e-5);
        var oneReduce = train("mistral", "full_shard", 1, 0, "fsdp.param_dtype=fp16", "fsdp.reduce_dtype=fp16");
        assertClose(train("mistral", strategy, ranks, shardSize, "fsdp.param_dtype=fp16", "fsdp.reduce_dtype=fp16"),
                oneReduce, 5e-3);
    }

    /** Shards in host memory (fsdp.cpu_offload, AdamW on the host) train fp16, fp16 reductions included, as on the device. */
    @Test
    void offloadedShardsTrainFp16AsShardsOnTheDevice() {
        var device = train("llama", "full_shard", 2, 0, "fsdp.param_dtype=fp16", "fsdp.reduce_dtype=fp16");
        var host = train("llama", "full_shard", 2, 0, "fsdp.param_dtype=fp16", "fsdp.reduce_dtype=fp16",
                "fsdp.cpu_offload=true");
        assertClose(host, device, 1e-6);
    }

    /** The golden qwen2 run of {@link GoldenTrainingTest#train} in fp16 on 2 ranks, saving a checkpoint every 5 steps. */
    private static TrainingJob overflowing(Path dir) {
        JsonNode t = Golden.json("qwen2", "train.json");
        List<Sequence> data = Golden.sequences(t);
        List<String> sets = new ArrayList<>(List.of("train.steps=" + t.get("steps").intValue(),
                "data.seq_len=" + t.get("seq_len").intValue(), "optim.lr=" + t.get("lr").doubleValue(),
                "fsdp.param_dtype=fp16", "fsdp.reduce_dtype=fp16", "fsdp.loss_scale_init=" + (1 << 21)));
        sets.addAll(GoldenTrainingTest.layout("full_shard", 2, 0, 1));
        ModelConfig config = Golden.config("qwen2");
        HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(config));
        return new TrainingJob(TrainConfig.load(null, sets), config, weights, data, false)
                .savingCheckpoints(new TrainingJob.CheckpointPlan(dir, 5, 2, null, null));
    }

    /**
     * A scale far too large for fp16 reductions (2^21): the gradients, rounded to fp16 for the reduce-scatter,
     * overflow to inf on some rank; every rank skips the step (the norm is reduced over the job: no rank updates,
     * AdamW counts no update) and the scale halves, step after step, until the gradients fit; from then on the run
     * trains, and none of the skips counts toward train.max_bad_steps (3). The checkpoints hold the scale and the
     * clean steps behind it, and a run resumed from one continues with that scale, to the bit.
     */
    @Test
    void anOverflowSkipsTheStepOnEveryRankAndHalvesTheScale(@TempDir Path tmp) {
        Path first = tmp.resolve("first"), second = tmp.resolve("second");
        List<StepResult> steps = overflowing(first).run(null, false).steps();
        assertThat(steps).hasSize(10);
        int skipped = (int) steps.stream().takeWhile(StepResult::skipped).count();
        assertThat(skipped).as("steps skipped before the scale fits").isEqualTo(5); // 2^21 down to 2^17 overflow (these batches), 2^16 fits
        for (int s = 0; s < steps.size(); s++) {
            StepResult r = steps.get(s);
            assertThat(r.lossScale()).as("scale at step %d", s + 1).isEqualTo(Math.scalb(1.0, 21 - Math.min(s, skipped)));
            assertThat(r.skipped()).as("step %d skipped", s + 1).isEqualTo(s < skipped);
            assertThat(r.overflowed()).as("step %d overflowed", s + 1).isEqualTo(s < skipped);
            assertThat(Double.isFinite(r.loss())).isTrue();
            assertThat(Double.isFinite(r.gradNorm())).isEqualTo(s >= skipped);
        }
        try (SavedCheckpoint five = SavedCheckpoint.open(Checkpoints.stepDir(first, 5));
             SavedCheckpoint ten = SavedCheckpoint.open(Checkpoints.stepDir(first, 10))) {
            assertThat(ten.index().optimizerStepsTaken()).isEqualTo(10 - skipped);
            assertThat(ten.index().isFinite()).isTrue();
            assertThat(ten.index().lossScale())
                    .isEqualTo(new CheckpointIndex.LossScale(Math.scalb(1.0, 21 - skipped), 10 - skipped));
            assertThat(five.index().lossScale())
                    .isEqualTo(new CheckpointIndex.LossScale(Math.scalb(1.0, 21 - skipped), 5 - skipped));
            List<StepResult> resumed = overflowing(second).resumingFrom(five).run(null, false).steps();
            assertThat(resumed).hasSize(5);
            for (int s = 0; s < 5; s++) {
                assertThat(resumed.get(s)).as("step %d resumed", s + 6).isEqualTo(steps.get(s + 5));
            }
        }
    }
}
