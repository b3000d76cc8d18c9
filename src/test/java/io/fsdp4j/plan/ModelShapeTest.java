package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import java.util.List;
import org.junit.jupiter.api.Test;

class ModelShapeTest {

    @Test
    void parameterCountsAreTheLayoutsSums() {
        for (ModelConfig c : List.of(ModelConfig.qwen25_7b(), ModelConfig.qwen25_1_5b(), ModelConfig.tiny(),
                ModelConfig.mistral7b())) {
            List<UnitLayout> layout = LlamaModel.layout(c);
            ModelShape m = ModelShape.of(c);
            assertThat(m.parameters()).isEqualTo(layout.stream().mapToLong(UnitLayout::numel).sum());
            assertThat(m.blocks()).isEqualTo(c.layers());
            for (int u = 0; u < layout.size(); u++) {
                assertThat(m.numel(u)).isEqualTo(layout.get(u).numel());
            }
        }
        // the figures fsdp4j's bench printed for these presets
        assertThat(ModelShape.of(ModelConfig.qwen25_7b()).parameters()).isEqualTo(7_615_616_512L);
        assertThat(ModelShape.of(ModelConfig.qwen25_1_5b()).parameters()).isEqualTo(1_543_714_304L);
    }

    @Test
    void shardsArePaddedAtTheEndToAMultipleOfTheGroup() {
        ModelShape m = ModelShape.of(ModelConfig.tiny());
        for (int u = 0; u <= m.headUnit(); u++) {
            for (int group : new int[] {1, 2, 3, 7, 8, 1000}) {
                long shard = m.shardNumel(u, group), padded = m.paddedNumel(u, group);
                assertThat(padded).isEqualTo(shard * group);
                assertThat(padded).isGreaterThanOrEqualTo(m.numel(u));
                assertThat(padded - m.numel(u)).isLessThan(group);
            }
        }
        // tiny's head is its final norm alone (128 elements, tied embeddings): 3 ranks hold 43 each, one padded
        assertThat(m.numel(m.headUnit())).isEqualTo(128);
        assertThat(m.shardNumel(m.headUnit(), 3)).isEqualTo(43);
        assertThat(m.paddedNumel(m.headUnit(), 3)).isEqualTo(129);
    }

    @Test
    void matrixParametersExcludeTheLookupAndCountATiedHead() {
        ModelConfig c = ModelConfig.qwen25_7b();
        ModelShape m = ModelShape.of(c);
        long blockMatrices = LlamaModel.layout(c).get(1).params().stream()
                .filter(p -> p.kind() == ParamSpec.Kind.MATRIX).mapToLong(ParamSpec::numel).sum();
        long q = (long) c.qkvWidth() * c.hidden(), o = (long) c.hidden() * c.hidden();
        long mlp = 3L * c.intermediate() * c.hidden();
        assertThat(blockMatrices).isEqualTo(q + o + mlp);
        assertThat(m.matrixParams(1)).isEqualTo(blockMatrices);
        assertThat(m.matrixParams(0)).isZero();
        assertThat(m.matrixParams(m.headUnit())).isEqualTo((long) c.vocabSize() * c.hidden());
        ModelShape tied = ModelShape.of(ModelConfig.qwen25_1_5b());
        assertThat(tied.tied()).isTrue();
        assertThat(tied.numel(tied.headUnit())).isEqualTo(1536); // the final norm only
        assertThat(tied.matrixParams(tied.headUnit())).isEqualTo(151_936L * 1536);
    }
}
