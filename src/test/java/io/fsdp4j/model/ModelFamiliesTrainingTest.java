package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.HfExport;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.hf.HfConfig;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.StepResult;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Qwen3 (q_norm and k_norm, head_dim not hidden / heads, tied embeddings), Gemma 3 (sliding and global layers,
 * four norms a block, GeGLU), Gemma 2 (soft-capped scores and logits) and Phi-3 (fused qkv_proj and gate_up_proj, longrope; the golden fixtures of
 * tools/golden/make_golden_arch.py) through the training path a user runs ({@link TrainingJob}): the ten AdamW steps
 * PyTorch recorded under every sharding strategy, on 1 to 4 CPU ranks, within 1e-4 (losses, grad norms, final
 * weights); then saved, resumed from the middle and exported back to the Hugging Face layout that transformers
 * wrote, with the same names, shapes, config.json and PyTorch's final weights.
 */
class ModelFamiliesTrainingTest {

    @TempDir
    Path tmp;

    static Stream<Arguments> layouts() {
        return Stream.of("qwen3", "gemma3", "gemma2", "phi3").flatMap(model -> Stream.of(
                Arguments.of(model, "full_shard", 1, 0, 1, "none"),
                Arguments.of(model, "full_shard", 2, 0, 1, "none"),
                Arguments.of(model, "full_shard", 3, 0, 2, "selective"), // uneven shards, two micro-batches
                Arguments.of(model, "shard_grad_op", 3, 0, 1, "none"),
                Arguments.of(model, "no_shard", 2, 0, 1, "full"),
                Arguments.of(model, "hybrid_shard", 4, 2, 1, "none"),
                Arguments.of(model, "hybrid_shard_zero2", 4, 2, 1, "selective")));
    }

    private static List<String> settings(String strategy, int ranks, int shardSize, int microBatches,
                                         String checkpointing) {
        List<String> s = new ArrayList<>(GoldenTrainingTest.layout(strategy, ranks, shardSize, microBatches));
        s.add("fsdp.activation_checkpointing=" + checkpointing);
        return s;
    }

    @ParameterizedTest(name = "{0}: {1} on {2} ranks (shard size {3}), {4} micro-batches, checkpointing {5}")
    @MethodSource("layouts")
    void trajectoryMatchesPyTorchUnderEveryStrategy(String model, String strategy, int ranks, int shardSize,
                                                    int microBatches, String checkpointing) {
        TrainingJob.Result result = GoldenTrainingTest.train(model,
                settings(strategy, ranks, shardSize, microBatches, checkpointing));
        assertTrajectory(model, result.steps(), 0);
        assertFinalWeights(model, result.finalParams());
    }

    private static void assertTrajectory(String model, List<StepResult> steps, int firstStep) {
        JsonNode t = Golden.json(model, "train.json");
        assertThat(steps).hasSize(t.get("steps").intValue() - firstStep);
        for (int i = 0; i < steps.size(); i++) {
            int s = firstStep + i;
            StepResult r = steps.get(i);
            assertThat(r.loss()).as("loss at step %d", s + 1)
                    .isCloseTo(t.get("loss").get(s).doubleValue(), Percentage.withPercentage(1e-2));
            assertThat(r.gradNorm()).as("grad norm at step %d", s + 1)
                    .isCloseTo(t.get("grad_norm").get(s).doubleValue(), Percentage.withPercentage(1e-2));
            assertThat(r.lr()).as("lr at step %d", s + 1)
                    .isCloseTo(t.get("lr_per_step").get(s).doubleValue(), Percentage.withPercentage(1e-6));
        }
    }

    private static void assertFinalWeights(String model, List<float[]> finalParams) {
        List<UnitLayout> units = CausalLMs.layout(Golden.config(model));
        try (SafetensorsFile expected = SafetensorsFile.open(Golden.dir(model).resolve("final.safetensors"))) {
            for (int u = 0; u < units.size(); u++) {
                for (ParamSpec p : units.get(u).params()) {
                    float[] mine = Arrays.copyOfRange(finalParams.get(u), (int) p.offset(), (int) p.end());
                    assertThat(Golden.relativeError(mine, expected.readFloats(p.name())))
                            .as("final %s", p.name()).isLessThan(1e-4);
                }
            }
        }
    }

    /** The run of {@link GoldenTrainingTest#train}, on 2 ranks, saving a checkpoint every 5 steps into {@code dir}. */
    private static TrainingJob run(String model, Path dir) {
        JsonNode t = Golden.json(model, "train.json");
        List<Sequence> data = Golden.sequences(t);
        List<String> sets = new ArrayList<>(List.of("train.steps=10", "data.seq_len=16", "optim.lr=0.01",
                "optim.betas=0.9,0.95", "optim.eps=1e-8", "optim.weight_decay=0.1", "optim.decay=matrices",
                "optim.max_grad_norm=" + t.get("max_grad_norm").doubleValue(), "schedule.kind=cosine",
                "schedule.warmup_steps=3", "schedule.min_lr_ratio=0.1"));
        sets.addAll(GoldenTrainingTest.layout("full_shard", 2, 0, 1));
        ModelConfig config = Golden.config(model);
        HfCheckpoint weights = HfCheckpoint.open(Golden.dir(model), CausalLMs.layout(config));
        return new TrainingJob(TrainConfig.load(null, sets), config, weights, data, false)
                .savingCheckpoints(new TrainingJob.CheckpointPlan(dir, 5, 2, Golden.dir(model).toString(), null));
    }

    @ParameterizedTest
    @ValueSource(strings = {"qwen3", "gemma3", "gemma2", "phi3"})
    void savesResumesAndExportsTheHuggingFaceLayout(String model) throws IOException {
        Path first = tmp.resolve("first"), second = tmp.resolve("second");
        run(model, first).run(null, false);
        TrainingJob.Result resumed;
        try (SavedCheckpoint middle = SavedCheckpoint.open(Checkpoints.stepDir(first, 5))) {
            resumed = run(model, second).resumingFrom(middle).run(null, true);
        }
        assertTrajectory(model, resumed.steps(), 5);
        assertFinalWeights(model, resumed.finalParams());

        Path exported = HfExport.export(Checkpoints.stepDir(second, 10), tmp.resolve("exported"), DType.F32);
        assertThat(HfConfig.read(exported)).isEqualTo(Golden.config(model));
        var json = new ObjectMapper();
        ObjectNode originalConfig = (ObjectNode) json.readTree(Golden.dir(model).resolve("config.json").toFile());
        ObjectNode written = (ObjectNode) json.readTree(exported.resolve("config.json").toFile());
        written.remove("torch_dtype");
        assertThat(written).isEqualTo(originalConfig);
        try (SafetensorsFile mine = SafetensorsFile.open(exported.resolve("model.safetensors"));
             SafetensorsFile original = SafetensorsFile.open(Golden.dir(model).resolve("model.safetensors"));
             SafetensorsFile expected = SafetensorsFile.open(Golden.dir(model).resolve("final.safetensors"))) {
            assertThat(mine.names()).containsExactlyInAnyOrderElementsOf(original.names()); // lm_head only if untied
            for (String name : original.names()) {
                assertThat(mine.info(name).shape()).as(name).isEqualTo(original.info(name).shape());
                assertThat(Golden.relativeError(mine.readFloats(name), expected.readFloats(name)))
                        .as("exported %s", name).isLessThan(1e-4);
            }
        }
    }
}
