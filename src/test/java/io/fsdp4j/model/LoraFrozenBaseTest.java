package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.config.LoraSection;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Under LoRA the base is frozen and its backward computes only what the adapters need: no weight-gradient product
 * for a base linear or the LM head (counted by the backend: two a targeted linear, B's and A's, and nothing else),
 * no gradient buffer for the frozen units, a block's buffer the adapters' size.
 */
class LoraFrozenBaseTest {
    private static final ModelConfig CONFIG = Golden.config("qwen2"); // 2 blocks, q/k/v biases, an untied head

    @ParameterizedTest(name = "adapters on {0}")
    @ValueSource(strings = {"all-linear", "q_proj,v_proj", "down_proj"})
    void theFrozenBaseComputesNoWeightGradient(String targets) {
        List<String> modules = new LoraSection(4, 8, 0, List.of(targets.split(",")), false, null)
                .modules(LoraSpec.linears(CONFIG.architecture()), LoraSpec.peftDefaults(CONFIG.architecture()));
        CpuBackend be = CpuBackend.counting();
        CausalLM model = CausalLMs.create(CONFIG, be, new LoraSpec(4, 2.0, modules));
        var rng = new SplittableRandom(5);
        List<Tensor> params = new ArrayList<>();
        for (UnitLayout u : model.units()) {
            float[] v = new float[Math.toIntExact(u.numel())];
            for (int i = 0; i < v.length; i++) {
                v[i] = (float) (0.05 * rng.nextGaussian()); // B nonzero too: every adapter's gradient flows
            }
            params.add(be.upload(v, v.length));
        }
        SingleDeviceModel single = new SingleDeviceModel(model, be, params);
        List<Tensor> grads = single.newGradients();
        assertThat(grads.get(CausalLM.embeddingUnit())).as("frozen embeddings: no buffer").isNull();
        assertThat(grads.get(model.headUnit())).as("frozen head: no buffer").isNull();
        for (int layer = 0; layer < model.blockCount(); layer++) {
            int u = model.blockUnit(layer);
            assertThat(grads.get(u).numel()).isEqualTo(model.units().get(u).numel() - model.frozenNumel(u));
        }
        int[][] ids = new int[2][12];
        for (int[] row : ids) {
            Arrays.setAll(row, i -> rng.nextInt(CONFIG.vocabSize()));
        }
        double loss = single.lossAndGradients(TokenBatch.of(be, ids, ids), 1f / 22, grads);

        assertThat(loss).isFinite();
        assertThat(be.weightGradients()).as("dW products: B's and A's of each adapter, none of the base or head")
                .isEqualTo(2L * modules.size() * model.blockCount());
        for (int layer = 0; layer < model.blockCount(); layer++) {
            float[] g = be.toFloats(grads.get(model.blockUnit(layer)));
            for (ParamSpec p : model.units().get(model.blockUnit(layer)).params()) {
                if (p.offset() < model.frozenNumel(model.blockUnit(layer))) {
                    continue;
                }
                long base = model.frozenNumel(model.blockUnit(layer));
                double sum = 0;
                for (long i = p.offset() - base; i < p.end() - base; i++) {
                    sum += Math.abs(g[(int) i]);
                }
                assertThat(sum).as("%s has a gradient", p.name()).isPositive();
            }
        }
    }

    /** A frozen head (no gradient buffers, as the engine passes it): the same dx, bit for bit, and no LM-head product. */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"qwen2", "bloom", "gemma2", "llama"})
    void aFrozenHeadGivesTheSameInputGradientWithoutItsWeightProduct(String family) {
        ModelConfig config = Golden.config(family);
        CpuBackend be = CpuBackend.counting();
        CausalLM model = CausalLMs.create(config, be);
        var rng = new SplittableRandom(9);
        Tensor[] units = new Tensor[2];
        int[] which = {CausalLM.embeddingUnit(), model.headUnit()};
        for (int i = 0; i < 2; i++) {
            float[] v = new float[Math.toIntExact(model.units().get(which[i]).numel())];
            for (int j = 0; j < v.length; j++) {
                v[j] = (float) (1 + 0.05 * rng.nextGaussian()); // norms near 1, the rest small: a sane head
            }
            units[i] = be.upload(v, v.length);
        }
        int[][] ids = new int[2][7];
        for (int[] row : ids) {
            Arrays.setAll(row, i -> rng.nextInt(config.vocabSize()));
        }
        TokenBatch batch = TokenBatch.of(be, ids, ids);
        int n = batch.rows(), c = config.hidden();
        float[] xs = new float[n * c];
        for (int i = 0; i < xs.length; i++) {
            xs[i] = (float) rng.nextGaussian();
        }
        Tensor x = be.upload(xs, n, c), dxTrained = be.allocate(DType.F32, n, c);
        Tensor dxFrozen = be.allocate(DType.F32, n, c);
        Tensor headGrads = be.allocate(DType.F32, Math.toIntExact(units[1].numel()));
        Tensor embeddingGrads = be.allocate(DType.F32, Math.toIntExact(units[0].numel()));
        double trained = model.headLoss(units[1], units[0], x, batch, 0.1f, headGrads, embeddingGrads, dxTrained, null);
        long products = be.weightGradients();
        assertThat(products).as("the trained head's LM-head product").isPositive();
        double frozen = model.headLoss(units[1], units[0], x, batch, 0.1f, null, null, dxFrozen, null);
        assertThat(be.weightGradients()).as("a frozen head computes no weight product").isEqualTo(products);
        assertThat(frozen).isEqualTo(trained);
        assertThat(be.toFloats(dxFrozen)).containsExactly(be.toFloats(dxTrained));
    }
}
