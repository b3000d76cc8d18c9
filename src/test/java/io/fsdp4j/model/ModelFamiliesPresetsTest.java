package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The Qwen3 presets (bench and plan use them) have the released checkpoints' shapes: their parameter counts are those
 * of Qwen3-0.6B to Qwen3-32B (embeddings counted once where tied), head size 128 whatever hidden / heads is, and
 * q_norm and k_norm of 128 in every block. The Gemma 3 presets: Gemma-3-1B's count, the language models of 4B to
 * 27B (their vision towers aside), one global layer in six, and the query scale of 27B (168, not its head size).
 * The Gemma 2 presets: Gemma-2-2B's to 27B's counts, sliding and global layers alternating, both soft caps.
 * Phi-3-mini's and Phi-3-medium's counts, with q|k|v and gate|up fused under their checkpoint names.
 */
class ModelFamiliesPresetsTest {

    @ParameterizedTest
    @CsvSource({"qwen3-0.6b, 596049920, true", "qwen3-1.7b, 1720574976, true", "qwen3-4b, 4022468096, true",
        "qwen3-8b, 8190735360, false", "qwen3-14b, 14768307200, false", "qwen3-32b, 32762123264, false"})
    void presetsHaveTheReleasedShapes(String name, long parameters, boolean tied) {
        ModelConfig c = ModelConfig.preset(name);
        assertThat(c.architecture()).isEqualTo(Architecture.QWEN3);
        assertThat(c.tieEmbeddings()).isEqualTo(tied);
        assertThat(c.headDim()).isEqualTo(128);
        assertThat(CausalLMs.layout(c).stream().mapToLong(UnitLayout::numel).sum()).isEqualTo(parameters);
        UnitLayout block = CausalLMs.layout(c).get(1);
        assertThat(block.param("model.layers.0.self_attn.k_norm.weight").shape()).containsExactly(128);
        assertThat(block.param("model.layers.0.self_attn.q_proj.weight").shape())
                .containsExactly(c.heads() * 128, c.hidden());
    }

    @ParameterizedTest
    @CsvSource({"gemma-3-1b, 999885952, 256, 256, 512", "gemma-3-4b, 3880263168, 256, 256, 1024",
        "gemma-3-12b, 11766034176, 256, 256, 1024", "gemma-3-27b, 27009346304, 128, 168, 1024"})
    void gemmaPresetsHaveTheReleasedShapes(String name, long parameters, int headDim, double queryScalar, int window) {
        ModelConfig c = ModelConfig.preset(name);
        assertThat(c.architecture()).isEqualTo(Architecture.GEMMA3);
        assertThat(CausalLMs.layout(c).stream().mapToLong(UnitLayout::numel).sum()).isEqualTo(parameters);
        assertThat(c.headDim()).isEqualTo(headDim);
        assertThat(c.gemma().queryPreAttnScalar()).isEqualTo(queryScalar);
        assertThat(c.slidingWindow()).isEqualTo(window);
        assertThat(c.gemma().slidingLayers().subList(0, 6)).containsExactly(true, true, true, true, true, false);
        assertThat(c.withLayers(4).gemma().slidingLayers()).hasSize(4);
    }

    @ParameterizedTest
    @CsvSource({"gemma-2-2b, 2614341888, 256, 256", "gemma-2-9b, 9241705984, 256, 256",
        "gemma-2-27b, 27227128320, 128, 144"})
    void gemma2PresetsHaveTheReleasedShapes(String name, long parameters, int headDim, double queryScalar) {
        ModelConfig c = ModelConfig.preset(name);
        assertThat(c.architecture()).isEqualTo(Architecture.GEMMA2);
        assertThat(CausalLMs.layout(c).stream().mapToLong(UnitLayout::numel).sum()).isEqualTo(parameters);
        assertThat(c.headDim()).isEqualTo(headDim);
        assertThat(c.gemma().queryPreAttnScalar()).isEqualTo(queryScalar);
        assertThat(c.gemma().slidingLayers().subList(0, 4)).containsExactly(true, false, true, false);
        assertThat(c.gemma().attnSoftcap()).isEqualTo(50.0);
        assertThat(c.gemma().finalSoftcap()).isEqualTo(30.0);
        assertThat(CausalLMs.layout(c).get(1).params().stream().map(ParamSpec::name))
                .doesNotContain("model.layers.0.self_attn.q_norm.weight")
                .contains("model.layers.0.pre_feedforward_layernorm.weight");
    }

    @ParameterizedTest
    @CsvSource({"phi-3-mini, 3821079552, 9216", "phi-3-medium, 13960238080, 7680"})
    void phiPresetsHaveTheReleasedShapes(String name, long parameters, int qkvRows) {
        ModelConfig c = ModelConfig.preset(name);
        assertThat(c.architecture()).isEqualTo(Architecture.PHI3);
        assertThat(CausalLMs.layout(c).stream().mapToLong(UnitLayout::numel).sum()).isEqualTo(parameters);
        UnitLayout block = CausalLMs.layout(c).get(1);
        assertThat(block.param("model.layers.0.self_attn.qkv_proj.weight").shape()).containsExactly(qkvRows, c.hidden());
        assertThat(block.param("model.layers.0.mlp.gate_up_proj.weight").shape())
                .containsExactly(2 * c.intermediate(), c.hidden());
    }
}
