package io.fsdp4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.TrainingJob;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** checkpoint.export_every: exports written from saved checkpoints while training goes on. */
class BackgroundExportsTest {
    @TempDir
    Path tmp;

    private static List<Sequence> data() {
        JsonNode t = Golden.json("qwen2", "train.json");
        List<Sequence> data = Golden.sequences(t);
        return data;
    }

    @Test
    void checkpointsAreExportedEveryNStepsAndAtTheEndEvenWhenPrunedMeanwhile() {
        Path dir = tmp.resolve("ck");
        List<String> sets = new ArrayList<>(GoldenTrainingTest.layout("full_shard", 2, 0, 1));
        sets.addAll(List.of("train.steps=3", "data.seq_len=16", "optim.lr=0.01", "checkpoint.dir=" + dir,
                "checkpoint.every=1", "checkpoint.keep=1", "checkpoint.export_every=2"));
        TrainConfig config = TrainConfig.load(null, sets);
        ModelConfig mc = Golden.config("qwen2");
        List<UnitLayout> layout = LlamaModel.layout(mc);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), layout)) {
            new TrainingJob(config, mc, weights, data(), true)
                    .savingCheckpoints(new TrainingJob.CheckpointPlan(dir, 1, 1, null, null,
                            config.checkpoint().exportEvery()))
                    .run(null, false);
        }
        // keep=1 pruned step 2's checkpoint at step 3, after its export had opened it
        assertThat(Checkpoints.list(dir)).extracting(p -> p.getFileName().toString()).containsExactly("step-00000003");
        assertThat(BackgroundExports.exportDir(dir, 1)).doesNotExist();
        assertThat(BackgroundExports.exportDir(dir, 2).resolve("config.json")).exists();
        assertThat(BackgroundExports.exportDir(dir, 3).resolve("config.json")).exists();
        // the last export holds the last checkpoint's parameters
        try (SavedCheckpoint saved = SavedCheckpoint.open(dir.resolve("step-00000003"));
             HfCheckpoint exported = HfCheckpoint.open(BackgroundExports.exportDir(dir, 3), layout)) {
            for (int u = 0; u < layout.size(); u++) {
                float[] a = new float[(int) layout.get(u).numel()], b = new float[a.length];
                saved.source(SavedCheckpoint.Kind.PARAMS).read(u, 0, a, 0, a.length);
                exported.read(u, 0, b, 0, b.length);
                assertThat(b).containsExactly(a);
            }
        }
    }

    @Test
    void anExportStepThatSavesNoCheckpointIsRefused() {
        assertThatThrownBy(() -> TrainConfig.load(null, List.of("checkpoint.dir=" + tmp, "checkpoint.every=2",
                "checkpoint.export_every=3"))).isInstanceOf(UserError.class).hasMessage("config key"
                + " 'checkpoint.export_every' (3) must be a multiple of 'checkpoint.every' (2): an export is written"
                + " from a saved checkpoint");
        assertThatThrownBy(() -> TrainConfig.load(null, List.of("checkpoint.export_every=3")))
                .isInstanceOf(UserError.class).hasMessageContaining("'checkpoint.dir' is not set");
    }
}
