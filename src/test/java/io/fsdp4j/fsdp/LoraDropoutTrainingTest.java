package io.fsdp4j.fsdp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.train.TrainingJob;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * LoRA's dropout ({@code lora.dropout}) in training, on the LoRA golden fixture's run: the mask of an element is
 * drawn from (seed, step, layer, module, its index in the global batch), so every split of the global batch over
 * ranks and micro-batches under every strategy trains as one rank does (to the rounding of the gradients' reduction),
 * and a forward recomputed under activation checkpointing, or a run resumed from a checkpoint, draws what the forward
 * or the uninterrupted run drew (bit for bit).
 */
class LoraDropoutTrainingTest {
    private static final String DROPOUT = "lora.dropout=0.1";

    private static List<Double> losses(TrainingJob.Result result) {
        return result.steps().stream().map(s -> s.loss()).toList();
    }

    private static TrainingJob.Result train(List<String> layout, String... more) {
        List<String> sets = new ArrayList<>(layout);
        sets.add(DROPOUT);
        sets.addAll(List.of(more));
        return LoraGoldenTest.train(sets);
    }

    @ParameterizedTest(name = "{0} on {1} ranks, shard size {2}, {3} micro-batches")
    @CsvSource({"full_shard,2,0,1", "shard_grad_op,2,0,1", "no_shard,2,0,1", "full_shard,4,0,1", "hybrid_shard,4,2,1",
            "hybrid_shard_zero2,4,2,1", "full_shard,2,0,2"})
    void everySplitOfTheGlobalBatchDropsAsOneRankDoes(String strategy, int ranks, int shardSize, int microBatches) {
        TrainingJob.Result one = train(LoraGoldenTest.layout("full_shard", 1, 0));
        TrainingJob.Result split = train(List.of("fsdp.strategy=" + strategy, "dist.ranks=" + ranks,
                "fsdp.shard_size=" + shardSize, "train.batch_size=" + 4 / ranks / microBatches,
                "train.grad_accum=" + microBatches));
        List<Double> want = losses(one), got = losses(split);
        for (int i = 0; i < want.size(); i++) {
            assertThat(got.get(i)).as("loss at step %d", i + 1).isCloseTo(want.get(i), within(2e-6 * want.get(i)));
        }
        for (int u = 0; u < one.finalParams().size(); u++) {
            float[] a = one.finalParams().get(u), b = split.finalParams().get(u);
            for (int i = 0; i < a.length; i++) {
                assertThat(b[i]).as("unit %d [%d]", u, i).isCloseTo(a[i], within(1e-5f * (1 + Math.abs(a[i]))));
            }
        }
    }

    @Test
    void dropoutChangesTheTrajectoryAndEachStepDrawsAnew() {
        List<Double> with = losses(train(LoraGoldenTest.layout("full_shard", 1, 0)));
        List<Double> without = losses(LoraGoldenTest.train(LoraGoldenTest.layout("full_shard", 1, 0)));
        double largest = 0;
        for (int i = 0; i < with.size(); i++) {
            largest = Math.max(largest, Math.abs(with.get(i) - without.get(i)) / without.get(i));
        }
        assertThat(largest).as("largest relative change of a step's loss").isGreaterThan(1e-3); // >> 2e-6 above
        List<Double> reseeded = losses(train(LoraGoldenTest.layout("full_shard", 1, 0), "train.seed=7"));
        assertThat(reseeded).isNotEqualTo(with);
    }

    @ParameterizedTest(name = "activation checkpointing {0}")
    @CsvSource({"full", "full_keep_attention", "selective"})
    void aRecomputedForwardDrawsTheForwardsMask(String checkpointing) {
        List<String> layout = LoraGoldenTest.layout("full_shard", 2, 0);
        TrainingJob.Result plain = train(layout);
        TrainingJob.Result recomputed = train(layout, "fsdp.activation_checkpointing=" + checkpointing);
        assertThat(losses(recomputed)).containsExactlyElementsOf(losses(plain));
        for (int u = 0; u < plain.finalParams().size(); u++) {
            assertThat(recomputed.finalParams().get(u)).as("unit %d", u).containsExactly(plain.finalParams().get(u));
        }
    }

    /** The masks are keyed by the step, not drawn from a generator's state: a resumed run draws what it would have. */
    @Test
    void aResumedRunDrawsTheMasksOfTheRunItContinues(@TempDir Path tmp) throws Exception {
        List<String> layout = new ArrayList<>(LoraGoldenTest.layout("full_shard", 2, 0));
        layout.add(DROPOUT);
        TrainingJob.Result straight = withCheckpoints(layout, tmp.resolve("a"), null).run(null, true);
        try (SavedCheckpoint saved = SavedCheckpoint.open(tmp.resolve("a").resolve("step-00000006"))) {
            TrainingJob.Result resumed = withCheckpoints(layout, tmp.resolve("b"), saved).run(null, true);
            assertThat(losses(resumed)).containsExactlyElementsOf(losses(straight).subList(6, 12));
        }
    }

    /** The fixture's 12 steps with checkpoints every 6 into {@code dir}, resumed from {@code resume} if not null. */
    private static TrainingJob withCheckpoints(List<String> settings, Path dir, SavedCheckpoint resume)
            throws Exception {
        JsonNode t = LoraGoldenTest.fixture();
        List<Sequence> data = Golden.sequences(t);
        List<String> sets = new ArrayList<>(List.of("train.steps=12", "data.seq_len=" + t.get("seq_len").intValue(),
                "optim.lr=0.01", "lora.rank=4", "lora.alpha=8", "lora.target_modules=all-linear",
                "lora.init=" + LoraGoldenTest.FIXTURE.resolve("adapter_init")));
        sets.addAll(settings);
        TrainConfig config = TrainConfig.load(null, sets);
        ModelConfig model = Golden.config("qwen2");
        HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(model));
        TrainingJob run = new TrainingJob(config, model, weights, data, false).savingCheckpoints(
                new TrainingJob.CheckpointPlan(dir, 6, 4, Golden.dir("qwen2").toString(),
                        new ObjectMapper().readTree(config.toJson())));
        return resume != null ? run.resumingFrom(resume) : run;
    }
}
