package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.BloomModel;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * BLOOM and the rope-scaled Llamas (tools/golden/make_golden_arch.py) on the CUDA backend: fp32 logits within 1e-5
 * and every gradient within 1e-4 of transformers' (the CPU backend's tolerances); the 10-step fp32 trajectory
 * within 1e-4 relative on one GPU and on two when there are two; and with bf16 parameters and activations, each
 * step's loss within 2% of PyTorch's (fp32 master weights and moments; bf16 rounds every matrix product's inputs,
 * about 0.4% each, and the trajectory compounds them over ten steps; the Llama bf16 test uses the same bound).
 */
@Tag("gpu")
class GpuArchitecturesTest {
    static final List<String> MODELS = Golden.ARCH_MODELS;

    private static SingleDeviceModel onGpu(String name, CudaBackend gpu) {
        ModelConfig config = Golden.config(name);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir(name), CausalLMs.layout(config))) {
            return EvalModel.build(config, gpu, weights);
        }
    }

    private static TokenBatch batch(String name, CudaBackend gpu) {
        JsonNode b = Golden.json(name, "batch.json");
        return TokenBatch.of(gpu, Golden.intRows(b.get("input_ids")), Golden.intRows(b.get("labels")));
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void fp32LogitsAndGradientsMatchTransformers(String name) {
        GpuTests.requireGpus(1);
        try (CudaBackend gpu = new CudaBackend(0)) {
            SingleDeviceModel m = onGpu(name, gpu);
            TokenBatch batch = batch(name, gpu);
            CausalLM model = m.model();
            Tensor x = model.embedForward(m.params().get(0), batch);
            for (int layer = 0; layer < model.blockCount(); layer++) {
                x = model.blockForward(layer, m.params().get(model.blockUnit(layer)), x, batch).output();
            }
            Tensor head = m.params().get(model.headUnit()), embeddings = m.params().get(0);
            Tensor logits = switch (model) {
                case BloomModel bloom -> bloom.logits(head, embeddings, x);
                case LlamaModel llama -> llama.logits(head, embeddings, x);
                default -> throw new AssertionError("unexpected model " + model);
            };
            long targets = TokenBatch.countTargets(Golden.intRows(Golden.json(name, "batch.json").get("labels")));
            List<Tensor> grads = m.newGradients();
            m.lossAndGradients(batch, (float) (1.0 / targets), grads);
            try (SafetensorsFile expected = SafetensorsFile.open(Golden.dir(name).resolve("expected.safetensors"))) {
                assertThat(Golden.relativeError(gpu.toFloats(logits), expected.readFloats("logits")))
                        .as("logits of %s on the GPU", name).isLessThan(1e-5);
                List<UnitLayout> units = model.units();
                for (int u = 0; u < units.size(); u++) {
                    float[] g = gpu.toFloats(grads.get(u));
                    for (ParamSpec p : units.get(u).params()) {
                        float[] mine = Arrays.copyOfRange(g, (int) p.offset(), (int) p.end());
                        assertThat(Golden.relativeError(mine, expected.readFloats("grad." + p.name())))
                                .as("gradient of %s in %s on the GPU", p.name(), name).isLessThan(1e-4);
                    }
                }
            }
        }
    }

    private static List<String> onGpus(int gpus, String... more) {
        List<String> sets = new ArrayList<>(GoldenTrainingTest.layout("full_shard", gpus, 0, 1));
        sets.add("dist.device=cuda");
        sets.addAll(List.of(more));
        return sets;
    }

    private static void assertTrajectory(String name, TrainingJob.Result result, double relative) {
        JsonNode t = Golden.json(name, "train.json");
        assertThat(result.steps()).hasSize(t.get("steps").intValue());
        assertThat(result.devices()).doesNotStartWith("cpu");
        for (int s = 0; s < result.steps().size(); s++) {
            assertThat(result.steps().get(s).loss()).as("%s loss at step %d", name, s + 1)
                    .isCloseTo(t.get("loss").get(s).doubleValue(), Percentage.withPercentage(relative * 100));
        }
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void trajectoriesOnGpusMatchPyTorch(String name) {
        GpuTests.requireGpus(1);
        TrainingJob.Result fp32 = GoldenTrainingTest.train(name, onGpus(1));
        assertTrajectory(name, fp32, 1e-4);
        JsonNode t = Golden.json(name, "train.json");
        for (int s = 0; s < fp32.steps().size(); s++) {
            assertThat(fp32.steps().get(s).gradNorm()).as("%s grad norm at step %d", name, s + 1)
                    .isCloseTo(t.get("grad_norm").get(s).doubleValue(), Percentage.withPercentage(1e-2));
        }
        assertTrajectory(name, GoldenTrainingTest.train(name, onGpus(1, "fsdp.param_dtype=bf16")), 2e-2);
        if (io.fsdp4j.cuda.Cuda.deviceCount() >= 2) {
            assertTrajectory(name, GoldenTrainingTest.train(name, onGpus(2)), 1e-4);
        }
    }
}
