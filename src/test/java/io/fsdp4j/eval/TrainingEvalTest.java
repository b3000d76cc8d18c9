package io.fsdp4j.eval;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.train.HeldOutLoss;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Evaluation during training (TrainingJob's evaluators): the loss of the trained parameters, on any layout. */
class TrainingEvalTest {
    @ParameterizedTest(name = "{0} on {1} ranks")
    @CsvSource({"full_shard,1,0", "full_shard,2,0", "no_shard,3,0", "hybrid_shard,4,2"})
    void theLastEvaluationIsTheLossOfTheFinalParameters(String strategy, int ranks, int shardSize) {
        JsonNode t = Golden.json("qwen2", "train.json");
        List<Sequence> data = Golden.sequences(t);
        TrainConfig config = TrainConfig.load(null, List.of("dist.ranks=" + ranks, "dist.device=cpu",
                "fsdp.strategy=" + strategy, "fsdp.shard_size=" + shardSize, "train.batch_size=" + (12 / ranks),
                "data.seq_len=16", "train.steps=3", "optim.lr=0.01"));
        ModelConfig mc = Golden.config("qwen2");
        List<Sequence> evalData = EvaluationTest.goldenBatch("qwen2");
        List<Integer> steps = Collections.synchronizedList(new ArrayList<>());
        List<Evaluation.LossResult> results = Collections.synchronizedList(new ArrayList<>());
        TrainingJob.Result run;
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), LlamaModel.layout(mc))) {
            run = new TrainingJob(config, mc, weights, data, true)
                    .evaluating(new HeldOutLoss(evalData, 2, (step, r) -> {
                        steps.add(step);
                        results.add(r);
                    }))
                    .run(null, true);
        }
        assertThat(steps).containsExactly(0, 2, 3); // before training, every 2 steps, and after the last
        var expected = Evaluation.loss(EvalModel.build(mc, CpuBackend.INSTANCE, run.finalParams()),
                CpuBackend.INSTANCE, evalData);
        // evaluated on the ranks, batched: the whole model's loss within fp32 rounding
        assertThat(results.get(2).tokens()).isEqualTo(expected.tokens());
        assertThat(results.get(2).sequences()).isEqualTo(expected.sequences());
        assertThat(results.get(2).loss()).isCloseTo(expected.loss(), org.assertj.core.data.Percentage.withPercentage(1e-4));
        assertThat(results.get(2).loss()).isLessThan(results.get(1).loss());
        assertThat(results.get(1).loss()).isLessThan(results.get(0).loss());
    }
}
