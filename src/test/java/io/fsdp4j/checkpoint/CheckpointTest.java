package io.fsdp4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.DecayRule;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.optim.AdamW;
import io.fsdp4j.safetensors.SafetensorsWriter;
import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.StepResult;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Saving and resuming: exact on the same layout, within fp32 rounding on another; never a half checkpoint. */
public class CheckpointTest {
    @TempDir
    Path tmp;

    private static final String MODEL = "qwen2";

    private static List<Sequence> data() {
        JsonNode t = Golden.json(MODEL, "train.json");
        List<Sequence> data = Golden.sequences(t);
        return data;
    }

    /**
     * Trains the golden model; saves into dir every {@code every} steps if dir is set; resumes from {@code from};
     * {@code more}: further settings (the GPU tests' device).
     */
    public static TrainingJob.Result train(String strategy, int ranks, int shardSize, int steps, Path dir, int every,
                                           int keep, Path from, String... more) {
        List<String> sets = new ArrayList<>(GoldenTrainingTest.layout(strategy, ranks, shardSize, 1));
        sets.addAll(List.of("train.steps=" + steps, "data.seq_len=16", "optim.lr=0.01", "schedule.warmup_steps=2"));
        sets.addAll(List.of(more));
        TrainConfig config = TrainConfig.load(null, sets);
        ModelConfig mc = Golden.config(MODEL);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir(MODEL), LlamaModel.layout(mc))) {
            TrainingJob run = new TrainingJob(config, mc, weights, data(), true);
            if (dir != null) {
                run = run.savingCheckpoints(new TrainingJob.CheckpointPlan(dir, every, keep, null, null));
            }
            if (from != null) {
                try (SavedCheckpoint saved = SavedCheckpoint.open(from)) {
                    return run.resumingFrom(saved).run(null, true);
                }
            }
            return run.run(null, true);
        }
    }

    @Test
    void resumingContinuesExactlyAsIfNeverStopped() {
        var straight = train("full_shard", 2, 0, 8, null, 0, 1, null);
        Path dir = tmp.resolve("ck");
        var firstHalf = train("full_shard", 2, 0, 8, dir, 4, 5, null);
        assertThat(Checkpoints.list(dir)).extracting(p -> p.getFileName().toString())
                .containsExactly("step-00000004", "step-00000008");
        var secondHalf = train("full_shard", 2, 0, 8, null, 0, 1, Checkpoints.stepDir(dir, 4));
        assertThat(secondHalf.steps()).hasSize(4);
        for (int s = 0; s < 4; s++) {
            assertThat(firstHalf.steps().get(s).loss()).isEqualTo(straight.steps().get(s).loss());
            assertThat(secondHalf.steps().get(s).step()).isEqualTo(5 + s);
            assertThat(secondHalf.steps().get(s).loss()).as("loss at step %d", 5 + s).isEqualTo(straight.steps().get(4 + s).loss());
            assertThat(secondHalf.steps().get(s).gradNorm()).isEqualTo(straight.steps().get(4 + s).gradNorm());
        }
        for (int u = 0; u < straight.finalParams().size(); u++) {
            assertThat(secondHalf.finalParams().get(u)).isEqualTo(straight.finalParams().get(u));
        }
    }

    @Test
    void aCheckpointLoadsOntoAnotherNumberOfRanksAndStrategy() {
        var straight = train("full_shard", 2, 0, 8, null, 0, 1, null);
        Path dir = tmp.resolve("ck");
        train("full_shard", 2, 0, 8, dir, 4, 2, null); // the same 8-step schedule, saved at step 4
        for (var layout : List.of(new Object[] {"full_shard", 3, 0}, new Object[] {"no_shard", 4, 0},
                new Object[] {"hybrid_shard", 4, 2}, new Object[] {"shard_grad_op", 1, 0})) {
            var resumed = train((String) layout[0], (int) layout[1], (int) layout[2], 8, null, 0, 1,
                    Checkpoints.stepDir(dir, 4));
            for (int s = 0; s < 4; s++) {
                assertThat(resumed.steps().get(s).loss()).as("%s on %s ranks, step %d", layout[0], layout[1], 5 + s)
                        .isCloseTo(straight.steps().get(4 + s).loss(), Percentage.withPercentage(1e-4));
            }
        }
    }

    @Test
    void aCheckpointSavedOnFourRanksResumesOnTwoAndThreeWithTheSameLosses() {
        var straight = train("full_shard", 4, 0, 8, null, 0, 1, null);
        Path dir = tmp.resolve("ck4");
        train("full_shard", 4, 0, 8, dir, 4, 2, null);
        try (SavedCheckpoint saved = SavedCheckpoint.open(Checkpoints.stepDir(dir, 4))) {
            assertThat(saved.index().shards()).hasSize(4);
        }
        for (int ranks : new int[] {2, 3}) {
            var resumed = train("full_shard", ranks, 0, 8, null, 0, 1, Checkpoints.stepDir(dir, 4));
            assertThat(resumed.steps()).extracting(StepResult::step).containsExactly(5, 6, 7, 8);
            for (int s = 0; s < 4; s++) {
                assertThat(resumed.steps().get(s).loss()).as("on %d ranks, step %d", ranks, 5 + s)
                        .isCloseTo(straight.steps().get(4 + s).loss(), org.assertj.core.data.Offset.offset(1e-5));
            }
        }
    }

    @Test
    void aFullDiskWhileSavingLeavesThePreviousCheckpointLoadable() throws IOException {
        Path dir = tmp.resolve("ck");
        train("full_shard", 2, 0, 2, dir, 0, 1, null); // keep 1: only step 2
        Path good = Checkpoints.stepDir(dir, 2);
        byte[] shardBefore = Files.readAllBytes(good.resolve("shard-00001.safetensors"));
        ModelConfig mc = Golden.config(MODEL);
        TrainingJob run = new TrainingJob(TrainConfig.load(null, GoldenTrainingTest.layout("full_shard", 2, 0, 1)), mc,
                null, data(), true);
        // rank 1's disk fills up part way through its shard of step 4
        Checkpoints.ShardWriter fullDisk = (file, entries, metadata) -> {
            Checkpoints.ShardFile real = Checkpoints.safetensors(file, entries, metadata);
            return new Checkpoints.ShardFile() {
                long written;

                @Override
                public void write(float[] values, int offset, int count) {
                    if (written + count > 1024) {
                        throw new UserError("cannot write " + file + ": java.io.IOException: No space left on device");
                    }
                    real.write(values, offset, count);
                    written += count;
                }

                @Override
                public void finish() {
                    real.finish();
                }

                @Override
                public void close() {
                    real.close();
                }
            };
        };
        InProcessWorld world = new InProcessWorld(run.mesh(), Duration.ofSeconds(60));
        try (SavedCheckpoint saved = SavedCheckpoint.open(good)) {
            assertThatThrownBy(() -> RankThreads.run(world, r -> {
                RankContext rank = world.open(r);
                try {
                    FsdpModel model = FsdpModel.apply(new LlamaModel(mc, rank.backend()), rank, run.policy(),
                            saved.source(SavedCheckpoint.Kind.PARAMS));
                    AdamW optimizer = new AdamW(rank.backend(), model.trainableShards(), 0.9f, 0.95f, 1e-8f, 0f,
                            DecayRule.MATRICES);
                    TrainState state = new TrainState(model, optimizer, null, null, 0);
                    state.completed(4, 0);
                    Checkpoints.save(state, new Checkpoints.Target(dir, 1, null, null),
                            r == 1 ? fullDisk : Checkpoints::safetensors);
                } finally {
                    world.close(rank);
                }
            })).isInstanceOf(UserError.class).hasMessageContaining("No space left on device");
        }
        assertThat(Checkpoints.list(dir)).containsExactly(good); // the failed step 4 is not a checkpoint
        assertThat(Checkpoints.latest(dir)).isEqualTo(good);
        assertThat(Files.readAllBytes(good.resolve("shard-00001.safetensors"))).isEqualTo(shardBefore);
        var resumed = train("full_shard", 2, 0, 4, dir, 0, 1, Checkpoints.latest(dir)); // loads, trains on
        assertThat(resumed.steps()).extracting(StepResult::step).containsExactly(3, 4);
        assertThat(Checkpoints.list(dir)).extracting(p -> p.getFileName().toString()).containsExactly("step-00000004");
        try (var left = Files.list(dir)) {
            assertThat(left.map(p -> p.getFileName().toString())).containsExactly("step-00000004");
        }
    }

    @Test
    void aTruncatedShardFileIsRefusedWhenOpened() throws IOException {
        Path dir = tmp.resolve("ck");
        train("full_shard", 2, 0, 1, dir, 0, 1, null);
        Path shard = Checkpoints.stepDir(dir, 1).resolve("shard-00000.safetensors");
        try (var f = new java.io.RandomAccessFile(shard.toFile(), "rw")) {
            f.setLength(f.length() - 100); // a copy cut short, or a disk that filled up outside fsdp4j's control
        }
        assertThatThrownBy(() -> SavedCheckpoint.open(Checkpoints.stepDir(dir, 1))).isInstanceOf(UserError.class)
                .hasMessageContaining("shard-00000.safetensors").hasMessageNotContaining("\n");
    }

    @Test
    void onlyTheNewestCheckpointsAreKept() {
        Path dir = tmp.resolve("ck");
        train("full_shard", 3, 0, 7, dir, 2, 2, null);
        assertThat(Checkpoints.list(dir)).extracting(p -> p.getFileName().toString())
                .containsExactly("step-00000006", "step-00000007");
        assertThat(Checkpoints.latest(dir).getFileName().toString()).isEqualTo("step-00000007");
    }

    @Test
    void anIncompleteOrForeignCheckpointIsRefusedAndNothingIsDeleted() throws IOException {
        Path dir = tmp.resolve("ck");
        train("full_shard", 2, 0, 2, dir, 0, 1, null);
        Path good = Checkpoints.stepDir(dir, 2);
        // a crash mid-save leaves only a temporary directory: never listed, never resumed from
        Files.createDirectories(dir.resolve(".tmp-step-00000004"));
        Files.createDirectories(dir.resolve("step-00000009")); // no index: incomplete
        assertThat(Checkpoints.latest(dir)).isEqualTo(good);

        Path truncated = tmp.resolve("truncated");
        Files.createDirectories(truncated);
        try (var files = Files.list(good)) {
            for (Path f : files.toList()) {
                Files.copy(f, truncated.resolve(f.getFileName()));
            }
        }
        Files.delete(truncated.resolve("shard-00001.safetensors"));
        assertThatThrownBy(() -> SavedCheckpoint.open(truncated)).isInstanceOf(UserError.class)
                .hasMessageContaining("shard-00001.safetensors");
        Files.writeString(truncated.resolve("index.json"), "{\"format\":\"something-else\",\"version\":1}");
        assertThatThrownBy(() -> SavedCheckpoint.open(truncated)).isInstanceOf(UserError.class)
                .hasMessageContaining("not an fsdp4j checkpoint");
        assertThatThrownBy(() -> SavedCheckpoint.open(tmp)).isInstanceOf(UserError.class).hasMessageContaining("index.json");
        // a checkpoint of another model
        try (SavedCheckpoint saved = SavedCheckpoint.open(good)) {
            assertThatThrownBy(() -> saved.requireLayout(LlamaModel.layout(Golden.config("llama"))))
                    .isInstanceOf(UserError.class).hasMessageContaining("different model");
        }
        assertThat(Files.isRegularFile(good.resolve("index.json"))).isTrue();
    }
}
