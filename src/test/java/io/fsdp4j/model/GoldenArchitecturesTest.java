package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.Fp8Casts;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.Arrays;
import java.util.List;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * BLOOM, the rope-scaled Llamas and Qwen3 (tools/golden/make_golden_arch.py) against transformers' float64 results: the
 * model each config.json asks for, built through {@link CausalLMs}, gives logits within 1e-5 and every parameter's
 * gradient within 1e-4 (relative to the tensor's largest magnitude), losses within 1e-5 relative, and a layout
 * whose names and shapes are exactly the checkpoint's.
 */
class GoldenArchitecturesTest {
    static final List<String> MODELS = Golden.ARCH_MODELS;
    private final CpuBackend cpu = CpuBackend.INSTANCE;

    private TokenBatch batch(String name) {
        JsonNode b = Golden.json(name, "batch.json");
        return TokenBatch.of(cpu, Golden.intRows(b.get("input_ids")), Golden.intRows(b.get("labels")));
    }

    @Test
    void configsReadAsTheirArchitecturesAndScaling() {
        ModelConfig bloom = Golden.config("bloom");
        assertThat(bloom.architecture()).isEqualTo(Architecture.BLOOM);
        assertThat(bloom.hidden()).isEqualTo(48);
        assertThat(bloom.intermediate()).isEqualTo(4 * 48);
        assertThat(bloom.heads()).isEqualTo(6);
        assertThat(bloom.kvHeads()).isEqualTo(6);
        assertThat(bloom.headDim()).isEqualTo(8);
        assertThat(bloom.tieEmbeddings()).isTrue();
        assertThat(bloom.rmsNormEps()).isEqualTo(1e-5);
        assertThat(CausalLMs.create(bloom, cpu)).isInstanceOf(BloomModel.class);

        ModelConfig llama3 = Golden.config("llama3-rope");
        assertThat(llama3.ropeTheta()).isEqualTo(100.0);
        assertThat(llama3.ropeScaling()).isEqualTo(RopeScaling.llama3(8.0, 1.0, 4.0, 64));
        assertThat(CausalLMs.create(llama3, cpu)).isInstanceOf(LlamaModel.class);
        assertThat(Golden.config("llama-linear-rope").ropeScaling()).isEqualTo(RopeScaling.linear(4.0));

        ModelConfig qwen3 = Golden.config("qwen3");
        assertThat(qwen3.architecture()).isEqualTo(Architecture.QWEN3);
        assertThat(qwen3.headDim()).isEqualTo(16); // from config.json: not hidden 32 / 4 heads
        assertThat(qwen3.heads() * qwen3.headDim()).isEqualTo(2 * qwen3.hidden());
        assertThat(qwen3.qkvBias()).isFalse();
        assertThat(qwen3.tieEmbeddings()).isTrue();
        assertThat(CausalLMs.create(qwen3, cpu)).isInstanceOf(LlamaModel.class);
        assertThat(CausalLMs.layout(qwen3).get(1).param("model.layers.0.self_attn.q_norm.weight").shape())
                .containsExactly(16);
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void layoutHasTheCheckpointsNamesAndShapes(String name) {
        List<UnitLayout> units = CausalLMs.layout(Golden.config(name));
        try (SafetensorsFile weights = SafetensorsFile.open(Golden.dir(name).resolve("model.safetensors"))) {
            List<String> ours = units.stream().flatMap(u -> u.params().stream()).map(ParamSpec::name).sorted().toList();
            assertThat(ours).isEqualTo(weights.names().stream().sorted().toList());
            for (UnitLayout u : units) {
                for (ParamSpec p : u.params()) {
                    long[] shape = weights.info(p.name()).shape();
                    assertThat(shape).as(p.name()).isEqualTo(Arrays.stream(p.shape()).asLongStream().toArray());
                }
            }
        }
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void logitsAndLossesMatchTransformers(String name) {
        SingleDeviceModel m = Golden.load(name);
        TokenBatch batch = batch(name);
        Tensor lossPerRow = cpu.allocate(DType.F32, batch.rows());
        double lossSum = m.loss(batch, lossPerRow);
        float[] rowLoss = cpu.toFloats(lossPerRow);
        int[] targets = cpu.toInts(batch.targets());
        try (SafetensorsFile expected = SafetensorsFile.open(Golden.dir(name).resolve("expected.safetensors"))) {
            assertThat(Golden.relativeError(logits(m, batch), expected.readFloats("logits")))
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
                assertThat(sum / count).isCloseTo(seqLoss[s], Percentage.withPercentage(1e-3));
                total += count;
            }
            assertThat(lossSum / total).isCloseTo(expected.readFloats("loss")[0], Percentage.withPercentage(1e-3));
        }
    }

    /**
     * Full activation checkpointing's recomputed forward ({@link CausalLM#blockRecompute}) gives each block's backward
     * the same bits as the whole forward: the same input gradient and parameter gradients. Llama's form leaves out the
     * down projection and the residual add (the output is null); Gemma's and BLOOM's keep what their backward reads.
     */
    @ParameterizedTest
    @FieldSource("MODELS")
    void theRecomputedForwardGivesTheBackwardTheSameBits(String name) {
        SingleDeviceModel m = Golden.load(name);
        CausalLM model = m.model();
        TokenBatch batch = batch(name);
        Tensor x = model.embedForward(m.params().get(0), batch);
        for (int layer = 0; layer < model.blockCount(); layer++) {
            Tensor w = m.params().get(model.blockUnit(layer));
            BlockActivations whole = model.blockForward(layer, w, x, batch);
            BlockActivations recomputed = model.blockRecompute(layer, w, x, batch);
            if (model instanceof LlamaModel) { // Gemma's form too: its post-MLP norm is computed, the residual sum is not
                assertThat(recomputed.output()).as("%s block %d", name, layer).isNull();
            }
            float[] gradient = new float[(int) whole.output().numel()];
            for (int i = 0; i < gradient.length; i++) {
                gradient[i] = (float) Math.sin(0.37 * i + layer); // any fixed output gradient
            }
            Tensor dOut = cpu.upload(gradient, whole.output().shape());
            Tensor gradsWhole = cpu.allocate(DType.F32, (int) w.numel()), gradsRecomputed = cpu.allocate(DType.F32,
                    (int) w.numel());
            Tensor dxWhole = model.blockBackward(layer, w, gradsWhole, whole, dOut, batch, false);
            Tensor dxRecomputed = model.blockBackward(layer, w, gradsRecomputed, recomputed, dOut, batch, false);
            assertThat(cpu.toFloats(dxRecomputed)).as("%s block %d dx", name, layer).containsExactly(cpu.toFloats(dxWhole));
            assertThat(cpu.toFloats(gradsRecomputed)).as("%s block %d grads", name, layer)
                    .containsExactly(cpu.toFloats(gradsWhole));
            x = whole.output();
        }
    }

    /**
     * In fp8 ({@link BlockLinears#FP8}) the recomputed forward keeps its linears' casts for the backward
     * ({@link Fp8Casts}): the backward takes the weight and input casts of every linear the recompute ran from there
     * (two each: Llama's form leaves out the down projection, Gemma's and BLOOM's run all four), casting only the output
     * gradients and what the recompute left out (12 casts in all, where 12 + 2 x those would be), and computes the same
     * bits as after the whole forward, which keeps no casts (Llama's form keeps its inputs' amaxes, which the CPU backend
     * does not use). The golden models' products here are all of 16s: all in fp8.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"qwen2,3", "gemma3,4", "bloom,4"})
    void inFp8TheBackwardReusesTheRecomputedForwardsCasts(String name, int recomputedLinears) {
        SingleDeviceModel m = Golden.load(name);
        CausalLM model = CausalLMs.create(Golden.config(name), cpu, null, BlockLinears.FP8);
        TokenBatch batch = batch(name);
        assertThat(batch.rows() % 16).isZero();
        Tensor x = model.embedForward(m.params().get(0), batch);
        for (int layer = 0; layer < model.blockCount(); layer++) {
            Tensor w = m.params().get(model.blockUnit(layer));
            BlockActivations whole = model.blockForward(layer, w, x, batch);
            BlockActivations recomputed = model.blockRecompute(layer, w, x, batch);
            Fp8Casts wholeKept = casts(whole); // none, or (Llama's form) a store for its inputs' amaxes only
            if (wholeKept != null) {
                assertThat(wholeKept.amaxesOnly()).isTrue();
            }
            Fp8Casts casts = casts(recomputed);
            assertThat(casts.castsMade()).isEqualTo(2 * recomputedLinears);
            float[] gradient = new float[(int) whole.output().numel()];
            for (int i = 0; i < gradient.length; i++) {
                gradient[i] = (float) Math.sin(0.37 * i + layer);
            }
            Tensor dOut = cpu.upload(gradient, whole.output().shape());
            Tensor gradsWhole = cpu.allocate(DType.F32, (int) w.numel()), gradsRecomputed = cpu.allocate(DType.F32,
                    (int) w.numel());
            Tensor dxWhole = model.blockBackward(layer, w, gradsWhole, whole, dOut, batch, false);
            Tensor dxRecomputed = model.blockBackward(layer, w, gradsRecomputed, recomputed, dOut, batch, false);
            assertThat(casts.castsReused()).as("%s block %d", name, layer).isEqualTo(2 * recomputedLinears);
            assertThat(casts.castsMade()).as("%s block %d", name, layer).isEqualTo(12);
            assertThat(cpu.toFloats(dxRecomputed)).as("%s block %d dx", name, layer).containsExactly(cpu.toFloats(dxWhole));
            assertThat(cpu.toFloats(gradsRecomputed)).as("%s block %d grads", name, layer)
                    .containsExactly(cpu.toFloats(gradsWhole));
            x = whole.output();
        }
    }

    private static Fp8Casts casts(BlockActivations a) {
        return switch (a) {
            case LlamaBlock.Activations llama -> llama.casts();
            case BloomModel.Activations bloom -> bloom.casts();
        };
    }

    /** Logits (N,V) from the model's stages. */
    private float[] logits(SingleDeviceModel m, TokenBatch batch) {
        CausalLM model = m.model();
        Tensor x = model.embedForward(m.params().get(0), batch);
        for (int layer = 0; layer < model.blockCount(); layer++) {
            x = model.blockForward(layer, m.params().get(model.blockUnit(layer)), x, batch).output();
        }
        Tensor head = m.params().get(model.headUnit()), embeddings = m.params().get(0);
        return cpu.toFloats(switch (model) {
            case BloomModel bloom -> bloom.logits(head, embeddings, x);
            case LlamaModel llama -> llama.logits(head, embeddings, x);
            default -> throw new AssertionError("unexpected model " + model);
        });
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void everyGradientMatchesTransformers(String name) {
        SingleDeviceModel m = Golden.load(name);
        TokenBatch batch = batch(name);
        long targets = TokenBatch.countTargets(Golden.intRows(Golden.json(name, "batch.json").get("labels")));
        List<Tensor> grads = m.newGradients();
        m.lossAndGradients(batch, (float) (1.0 / targets), grads);
        int checked = 0;
        try (SafetensorsFile expected = SafetensorsFile.open(Golden.dir(name).resolve("expected.safetensors"))) {
            List<UnitLayout> units = m.model().units();
            for (int u = 0; u < units.size(); u++) {
                float[] g = cpu.toFloats(grads.get(u));
                for (ParamSpec p : units.get(u).params()) {
                    float[] mine = Arrays.copyOfRange(g, (int) p.offset(), (int) p.end());
                    assertThat(Golden.relativeError(mine, expected.readFloats("grad." + p.name())))
                            .as("gradient of %s in %s", p.name(), name).isLessThan(1e-4);
                    checked++;
                }
            }
            assertThat(checked).isEqualTo((int) expected.names().stream().filter(n -> n.startsWith("grad.")).count());
        }
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void generationWithTheKvCacheMatchesTheFullForward(String name) {
        SingleDeviceModel m = Golden.load(name);
        CausalLM model = m.model();
        int[] tokens = Golden.intRows(Golden.json(name, "batch.json").get("input_ids"))[1];
        int[][] prompt = {Arrays.copyOf(tokens, 12)};
        TokenBatch batch = TokenBatch.of(cpu, prompt, prompt);
        float[] full = logits(m, batch);
        int V = model.config().vocabSize();
        KvCache cache = model.newKvCache(1, 16, io.fsdp4j.tensor.DType.F32);
        // the prompt in two pieces, so that the second attends to cached keys
        GeneratorTest.lastLogits(m, cache, Arrays.copyOf(tokens, 7), 0);
        float[] cached = GeneratorTest.lastLogits(m, cache, Arrays.copyOfRange(tokens, 7, 12), 7);
        float[] last = Arrays.copyOfRange(full, 11 * V, 12 * V);
        assertThat(Golden.relativeError(cached, last)).isLessThan(1e-5);
    }
}
