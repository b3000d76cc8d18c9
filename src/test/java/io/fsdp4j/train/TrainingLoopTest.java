package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.CheckpointTest;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The training loop's cadence beside the steps: evaluators each at their own cadence, run on every rank, their keys
 * handed over as one set per evaluated step; the tokens seen kept in the state that checkpoints save and load.
 */
class TrainingLoopTest {
    @TempDir
    Path tmp;

    /** Evaluates before training and every {@code every} steps, or (every = 0) before and after; its key names it. */
    private record Counting(String key, int every, List<Integer> steps) implements Evaluator {
        @Override
        public boolean dueAt(int step, int firstStep, int lastStep) {
            return step == firstStep - 1 || (every > 0 ? step % every == 0 : step == lastStep);
        }

        @Override
        public Map<String, Object> evaluate(FsdpModel model, int step) {
            steps.add(step); // on every rank
            return model.rank().rank() == 0 ? Map.of(key, step) : null;
        }
    }

    @Test
    void evaluatorsRunOnEveryRankAtTheirOwnCadenceAndReportOneSetOfKeysPerStep() {
        JsonNode t = Golden.json("qwen2", "train.json");
        List<Sequence> data = Golden.sequences(t);
        TrainConfig config = TrainConfig.load(null, List.of("dist.ranks=2", "dist.device=cpu", "train.batch_size=6",
                "data.seq_len=16", "train.steps=4", "optim.lr=0.01"));
        ModelConfig mc = Golden.config("qwen2");
        List<Integer> everyTwo = Collections.synchronizedList(new ArrayList<>());
        List<Integer> beforeAndAfter = Collections.synchronizedList(new ArrayList<>());
        Map<Integer, Map<String, Object>> reported = new LinkedHashMap<>();
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(mc))) {
            new TrainingJob(config, mc, weights, data, true)
                    .evaluating(new Counting("eval_a", 2, everyTwo))
                    .evaluating(new Counting("eval_b", 0, beforeAndAfter))
                    .run(new TrainingJob.StepListener() {
                        @Override
                        public void onStep(StepResult result, double seconds, long peakDeviceBytes) {}

                        @Override
                        public void onEval(int step, Map<String, Object> keys) {
                            reported.put(step, keys);
                        }
                    }, false);
        }
        assertThat(everyTwo).containsExactlyInAnyOrder(0, 0, 2, 2, 4, 4); // two ranks
        assertThat(beforeAndAfter).containsExactlyInAnyOrder(0, 0, 4, 4);
        assertThat(reported.keySet()).containsExactly(0, 2, 4);
        assertThat(reported.get(0)).containsEntry("eval_a", 0).containsEntry("eval_b", 0);
        assertThat(reported.get(2)).containsEntry("eval_a", 2).doesNotContainKey("eval_b");
        // in the order they were added, then the evaluations' wall time
        assertThat(reported.get(4).keySet()).containsExactly("eval_a", "eval_b", "eval_seconds");
        assertThat(reported.values()).allSatisfy(keys -> assertThat((double) keys.get("eval_seconds")).isNotNegative());
    }

    @Test
    void theTokensSeenAreSavedAndCarriedThroughAResume() throws IOException {
        Path dir = tmp.resolve("ck");
        var straight = CheckpointTest.train("full_shard", 2, 0, 4, dir, 2, 5, null);
        long perStep = straight.steps().getFirst().tokens();
        assertThat(straight.tokensSeen()).isEqualTo(4 * perStep);
        Path middle = Checkpoints.stepDir(dir, 2);
        try (SavedCheckpoint saved = SavedCheckpoint.open(middle)) {
            assertThat(saved.index().tokensSeen()).isEqualTo(2 * perStep);
        }
        var resumed = CheckpointTest.train("full_shard", 2, 0, 4, null, 0, 1, middle);
        assertThat(resumed.steps()).extracting(StepResult::step).containsExactly(3, 4);
        assertThat(resumed.tokensSeen()).isEqualTo(4 * perStep);

        // a checkpoint of an earlier version did not count tokens: every step before it is taken as a full batch
        ObjectMapper json = new ObjectMapper();
        Path index = middle.resolve(SavedCheckpoint.INDEX);
        ObjectNode written = (ObjectNode) json.readTree(index.toFile());
        written.remove("tokensSeen");
        json.writeValue(index.toFile(), written);
        var fromOlder = CheckpointTest.train("full_shard", 2, 0, 4, null, 0, 1, middle);
        assertThat(fromOlder.tokensSeen()).isEqualTo(4 * perStep);
    }
}
