package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * The Java forward and backward against Hugging Face transformers (float64 reference) on tiny random models of
 * each architecture: logits within 1e-5 and every parameter's gradient within 1e-4, relative to the tensor's
 * largest magnitude; losses within 1e-5 relative.
 */
class GoldenModelTest {
    static final List<String> MODELS = Golden.MODELS;
    private final CpuBackend cpu = CpuBackend.INSTANCE;

    private TokenBatch batch(String name) {
        JsonNode b = Golden.json(name, "batch.json");
        return TokenBatch.of(cpu, Golden.intRows(b.get("input_ids")), Golden.intRows(b.get("labels")));
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void logitsAndLossesMatchTransformers(String name) {
        SingleDeviceModel m = Golden.load(name);
        TokenBatch batch = batch(name);
        ModelConfig c = m.model().config();
        // logits: the head's matrix product on the final normed hidden states, via the per-row loss path
        Tensor lossPerRow = cpu.allocate(DType.F32, batch.rows());
        double lossSum = m.loss(batch, lossPerRow);
        float[] rowLoss = cpu.toFloats(lossPerRow);
        int[] targets = cpu.toInts(batch.targets());
        try (SafetensorsFile expected = SafetensorsFile.open(Golden.dir(name).resolve("expected.safetensors"))) {
            float[] logits = logits(m, batch);
            assertThat(Golden.relativeError(logits, expected.readFloats("logits")))
                    .as("logits of %s", name).isLessThan(1e-5);
            float[] seqLoss = expected.readFloats("seq_loss"), seqTokens = expected.readFloats("seq_tokens");
            long total = 0;
            for (int s = 0; s < batch.batch(); s++) {
                double sum = 0;
                int count = 0;
                for (int t = 0; t < batch.seqLen(); t++) {
                    if (targets[s * batch.seqLen() + t] != TokenBatch.IGNORE) {
                        sum += rowLoss[s * batch.seqLen() + t];
                        count++;
                    }
                }
                assertThat(count).isEqualTo((int) seqTokens[s]);
                assertThat(sum / count).isCloseTo(seqLoss[s], org.assertj.core.data.Percentage.withPercentage(1e-3));
                total += count;
            }
            assertThat(lossSum / total).isCloseTo(expected.readFloats("loss")[0],
                    org.assertj.core.data.Percentage.withPercentage(1e-3));
        }
        assertThat(c.vocabSize()).isEqualTo(160);
    }

    /** Logits (N,V) recomputed from the model's stages, for comparison with the fixture. */
    private float[] logits(SingleDeviceModel m, TokenBatch batch) {
        CausalLM model = m.model();
        ModelConfig c = model.config();
        Tensor x = model.embedForward(m.params().get(0), batch);
        for (int layer = 0; layer < model.blockCount(); layer++) {
            x = model.blockForward(layer, m.params().get(model.blockUnit(layer)), x, batch).output();
        }
        Tensor head = m.params().get(model.headUnit());
        Tensor normed = cpu.allocate(DType.F32, batch.rows(), c.hidden());
        cpu.rmsNormForward(normed, cpu.allocate(DType.F32, batch.rows()), x, head.view(0, c.hidden()),
                (float) c.rmsNormEps());
        Tensor lmHead = c.tieEmbeddings() ? m.params().get(0).view(0, c.vocabSize(), c.hidden())
                : head.view(c.hidden(), c.vocabSize(), c.hidden());
        Tensor logits = cpu.allocate(DType.F32, batch.rows(), c.vocabSize());
        cpu.linearForward(logits, normed, lmHead, null);
        return cpu.toFloats(logits);
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void everyGradientMatchesTransformers(String name) {
        checkGradients(name, Golden.load(name));
    }

    /** The head in chunks of three rows ({@link HeadLoss}): the same gradients, from many chunks of labelled rows. */
    @ParameterizedTest
    @FieldSource("MODELS")
    void everyGradientMatchesTransformersWithTheHeadInChunksOfThreeRows(String name) {
        SingleDeviceModel m;
        System.setProperty(HeadLoss.MAX_LOGITS_PROPERTY, Long.toString(3L * 160));
        try {
            m = Golden.load(name);
        } finally {
            System.clearProperty(HeadLoss.MAX_LOGITS_PROPERTY);
        }
        checkGradients(name, m);
    }

    private void checkGradients(String name, SingleDeviceModel m) {
        TokenBatch batch = batch(name);
        int[][] labels = Golden.intRows(Golden.json(name, "batch.json").get("labels"));
        long targets = TokenBatch.countTargets(labels);
        List<Tensor> grads = m.newGradients();
        m.lossAndGradients(batch, (float) (1.0 / targets), grads);
        int checked = 0;
        try (SafetensorsFile expected = SafetensorsFile.open(Golden.dir(name).resolve("expected.safetensors"))) {
            List<UnitLayout> units = m.model().units();
            for (int u = 0; u < units.size(); u++) {
                float[] g = cpu.toFloats(grads.get(u));
                for (ParamSpec p : units.get(u).params()) {
                    float[] mine = java.util.Arrays.copyOfRange(g, (int) p.offset(), (int) p.end());
                    assertThat(Golden.relativeError(mine, expected.readFloats("grad." + p.name())))
                            .as("gradient of %s in %s", p.name(), name).isLessThan(1e-4);
                    checked++;
                }
            }
            long expectedGrads = expected.names().stream().filter(n -> n.startsWith("grad.")).count();
            assertThat(checked).isEqualTo((int) expectedGrads);
        }
    }
}
