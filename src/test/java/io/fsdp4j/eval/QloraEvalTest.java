package io.fsdp4j.eval;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.LoraGoldenTest;
import io.fsdp4j.fsdp.QloraGoldenTest;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code eval} and {@code score} of a QLoRA run's checkpoint, as a user runs them: its adapters on the NF4 round trip
 * of its base (held in NF4 on the sharded ranks), the loss of its merged export, not that of its adapter on the
 * unquantized base.
 */
class QloraEvalTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    @Test
    void aQloraCheckpointIsEvaluatedOnItsDequantizedBase() throws IOException {
        Path checkpoints = tmp.resolve("qlora-ck");
        List<String> sets = new ArrayList<>(QloraGoldenTest.settings());
        sets.addAll(LoraGoldenTest.layout("full_shard", 2, 0));
        TrainConfig config = TrainConfig.load(null, sets);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(Golden.config("qwen2")))) {
            new TrainingJob(config, Golden.config("qwen2"), weights, Golden.sequences(QloraGoldenTest.fixture()), false)
                    .savingCheckpoints(new TrainingJob.CheckpointPlan(checkpoints, 12, 1,
                            Golden.dir("qwen2").toAbsolutePath().toString(), JSON.readTree(config.toJson())))
                    .run(null, false);
        }
        Path adapter = tmp.resolve("adapter"), merged = tmp.resolve("merged");
        assertThat(EvalCommandTest.run("export", "--checkpoint", checkpoints, "--out", adapter).status()).isZero();
        assertThat(EvalCommandTest.run("export", "--checkpoint", checkpoints, "--out", merged, "--merge").status())
                .isZero();
        Path batch = AdapterEvalTest.jsonl(tmp.resolve("batch.jsonl"), EvaluationTest.goldenBatch("qwen2"));
        double ofCheckpoint = loss("eval", "--checkpoint", checkpoints, "--data", batch);
        double ofMerged = loss("eval", "--model", merged, "--data", batch);
        double onPlainBase = loss("eval", "--model", Golden.dir("qwen2"), "--adapter", adapter, "--data", batch);
        assertThat(ofCheckpoint).isCloseTo(ofMerged, within(1e-5 * ofMerged));
        assertThat(Math.abs(ofCheckpoint - onPlainBase)).as("the adapter on the unquantized base").isGreaterThan(1e-3);
        // on 2 ranks, fully sharded, the base in NF4 there too
        double sharded = loss("eval", "--checkpoint", checkpoints, "--data", batch, "--batch-size", 2, "--set",
                "dist.ranks=2", "--set", "fsdp.strategy=full_shard");
        assertThat(sharded).isCloseTo(ofCheckpoint, within(1e-6 * ofCheckpoint));
        EvalCommandTest.Run score = EvalCommandTest.run("score", "--checkpoint", checkpoints.resolve("step-00000012"),
                "--data", batch);
        assertThat(score.last().get("mean_loss").doubleValue()).isCloseTo(ofCheckpoint, within(1e-6 * ofCheckpoint));
    }

    private static double loss(Object... args) {
        EvalCommandTest.Run r = EvalCommandTest.run(args);
        assertThat(r.status()).as(r.err()).isZero();
        return r.last().get("loss").doubleValue();
    }
}
