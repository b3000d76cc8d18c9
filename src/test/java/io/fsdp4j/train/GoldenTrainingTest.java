package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.data.Percentage.withPercentage;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsFile;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Ten AdamW steps (clipping, warmup + cosine, decay of matrices only) of each golden model on 1 to 4 CPU ranks
 * under every sharding strategy give the loss, grad-norm and learning-rate trajectory that PyTorch recorded
 * (torch.optim.AdamW, float64), within 1e-4 relative, and the same final weights within 1e-4 of their scale.
 */
public class GoldenTrainingTest {

    static Stream<Arguments> layouts() {
        List<Arguments> cases = new ArrayList<>();
        for (String model : Golden.MODELS) {
            cases.add(Arguments.of(model, "full_shard", 1, 0));
            for (String strategy : List.of("full_shard", "shard_grad_op", "no_shard")) {
                for (int ranks : new int[] {2, 3, 4}) {
                    cases.add(Arguments.of(model, strategy, ranks, 0));
                }
            }
            cases.add(Arguments.of(model, "hybrid_shard", 4, 2));
            cases.add(Arguments.of(model, "hybrid_shard_zero2", 4, 2));
        }
        return cases.stream();
    }

    public static TrainingJob.Result train(String model, List<String> settings) {
        JsonNode t = Golden.json(model, "train.json");
        List<Sequence> data = Golden.sequences(t);
        List<String> sets = new ArrayList<>(Golden.trainingSettings(t));
        sets.addAll(settings);
        TrainConfig config = TrainConfig.load(null, sets);
        ModelConfig mc = Golden.config(model);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir(model), CausalLMs.layout(mc))) {
            return new TrainingJob(config, mc, weights, data, false).run(null, true);
        }
    }

    /** {@link #train(String, List)} on {@link #layout}, with {@code more} settings after it. */
    public static TrainingJob.Result train(String model, String strategy, int ranks, int shardSize, int microBatches,
                                           String... more) {
        List<String> sets = new ArrayList<>(layout(strategy, ranks, shardSize, microBatches));
        sets.addAll(List.of(more));
        return train(model, sets);
    }

    /**
     * {@code run} trained as {@code reference} did within {@code relative}: every step's loss and gradient norm, and
     * the final parameters of every unit.
     */
    public static void assertClose(TrainingJob.Result run, TrainingJob.Result reference, double relative) {
        assertThat(run.steps()).hasSameSizeAs(reference.steps());
        for (int s = 0; s < reference.steps().size(); s++) {
            assertThat(run.steps().get(s).loss()).as("loss at step %d", s + 1)
                    .isCloseTo(reference.steps().get(s).loss(), withPercentage(relative * 100));
            assertThat(run.steps().get(s).gradNorm()).as("grad norm at step %d", s + 1)
                    .isCloseTo(reference.steps().get(s).gradNorm(), withPercentage(relative * 100));
        }
        for (int u = 0; u < reference.finalParams().size(); u++) {
            assertThat(Golden.relativeError(run.finalParams().get(u), reference.finalParams().get(u)))
                    .as("final parameters of unit %d", u).isLessThanOrEqualTo(relative);
        }
    }

    public static List<String> layout(String strategy, int ranks, int shardSize, int microBatches) {
        int perRank = 12 / ranks / microBatches;
        return List.of("fsdp.strategy=" + strategy, "dist.ranks=" + ranks, "fsdp.shard_size=" + shardSize,
                "train.batch_size=" + perRank, "train.grad_accum=" + microBatches);
    }

    @ParameterizedTest(name = "{0} {1} on {2} ranks")
    @MethodSource("layouts")
    void trajectoryMatchesPyTorch(String model, String strategy, int ranks, int shardSize) {
        TrainingJob.Result result = train(model, layout(strategy, ranks, shardSize, 1));
        JsonNode t = Golden.json(model, "train.json");
        assertThat(result.steps()).hasSize(t.get("steps").intValue());
        for (int s = 0; s < result.steps().size(); s++) {
            StepResult r = result.steps().get(s);
            assertThat(r.loss()).as("loss at step %d", s + 1)
                    .isCloseTo(t.get("loss").get(s).doubleValue(), org.assertj.core.data.Percentage.withPercentage(1e-2));
            assertThat(r.gradNorm()).as("grad norm at step %d", s + 1)
                    .isCloseTo(t.get("grad_norm").get(s).doubleValue(), org.assertj.core.data.Percentage.withPercentage(1e-2));
            assertThat(r.lr()).as("lr at step %d", s + 1)
                    .isCloseTo(t.get("lr_per_step").get(s).doubleValue(), org.assertj.core.data.Percentage.withPercentage(1e-6));
        }
        List<UnitLayout> units = CausalLMs.layout(Golden.config(model));
        try (SafetensorsFile expected = SafetensorsFile.open(Golden.dir(model).resolve("final.safetensors"))) {
            for (int u = 0; u < units.size(); u++) {
                for (var p : units.get(u).params()) {
                    float[] mine = java.util.Arrays.copyOfRange(result.finalParams().get(u), (int) p.offset(), (int) p.end());
                    assertThat(Golden.relativeError(mine, expected.readFloats(p.name())))
                            .as("final %s", p.name()).isLessThan(1e-4);
                }
            }
        }
    }
}
