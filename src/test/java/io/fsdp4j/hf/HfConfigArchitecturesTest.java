package io.fsdp4j.hf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.model.Architecture;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.RopeScaling;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * config.json of BLOOM and of Llamas with rope scaling, in transformers 5's form (rope_parameters) and 4's
 * (rope_scaling beside a top-level rope_theta); unsupported settings refused in one line naming the key.
 */
class HfConfigArchitecturesTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    private ObjectNode golden(String name) throws IOException {
        return (ObjectNode) JSON.readTree(Files.readString(Golden.dir(name).resolve("config.json")));
    }

    private ModelConfig read(ObjectNode config) throws IOException {
        Files.writeString(tmp.resolve("config.json"), config.toString());
        return HfConfig.read(tmp);
    }

    @Test
    void transformers4RopeScalingIsReadBesideATopLevelTheta() throws IOException {
        ObjectNode c = golden("llama3-rope");
        c.remove("rope_parameters");
        c.put("rope_theta", 500000.0);
        c.putObject("rope_scaling").put("rope_type", "llama3").put("factor", 8.0).put("low_freq_factor", 1.0)
                .put("high_freq_factor", 4.0).put("original_max_position_embeddings", 8192);
        ModelConfig m = read(c);
        assertThat(m.ropeTheta()).isEqualTo(500000.0);
        assertThat(m.ropeScaling()).isEqualTo(RopeScaling.llama3(8.0, 1.0, 4.0, 8192));

        c.putObject("rope_scaling").put("type", "linear").put("factor", 2.0); // the oldest spelling of the type
        assertThat(read(c).ropeScaling()).isEqualTo(RopeScaling.linear(2.0));
        c.putObject("rope_scaling").put("rope_type", "dynamic").put("factor", 3.0);
        assertThat(read(c).ropeScaling()).isEqualTo(RopeScaling.dynamic(3.0));
        c.putNull("rope_scaling");
        assertThat(read(c).ropeScaling()).isEqualTo(RopeScaling.NONE);
    }

    @ParameterizedTest
    @ValueSource(strings = {"yarn", "proportional"})
    void otherRopeTypesAreRefusedInOneLineListingTheSupportedOnes(String type) throws IOException {
        ObjectNode c = golden("llama3-rope");
        ((ObjectNode) c.get("rope_parameters")).put("rope_type", type);
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class)
                .hasMessageContaining("rope_parameters.rope_type")
                .hasMessageContaining("'" + type + "'")
                .hasMessageEndingWith("supported rope types: default, linear, dynamic, llama3, longrope")
                .satisfies(e -> assertThat(e.getMessage()).doesNotContain("\n"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"longrope", "su"}) // su: Phi-3's first name for it
    void longropeNeedsItsFactorsAndReadsPhi3sTransformers4Form(String type) throws IOException {
        ObjectNode c = golden("llama3-rope");
        ((ObjectNode) c.get("rope_parameters")).put("rope_type", type);
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class).hasMessageContaining("short_factor");

        ObjectNode phi3 = golden("phi3");
        ModelConfig m = read(phi3);
        assertThat(m.architecture()).isEqualTo(Architecture.PHI3);
        assertThat(m.ropeScaling().type()).isEqualTo(RopeScaling.Type.LONGROPE);
        assertThat(m.ropeScaling().longFactor()).containsExactly(1.2, 2.5, 4.0, 8.0);
        assertThat(m.ropeScaling().attentionFactor()).isCloseTo(Math.sqrt(2), org.assertj.core.data.Offset.offset(1e-12));
        assertThat(m.slidingWindow()).isEqualTo(6);
        phi3.remove("rope_parameters"); // transformers 4: rope_scaling beside rope_theta and the original length
        phi3.put("rope_theta", 10000.0);
        phi3.putObject("rope_scaling").put("type", type).set("short_factor", JSON.valueToTree(new double[] {1, 1.5, 2, 3}));
        ((ObjectNode) phi3.get("rope_scaling")).set("long_factor", JSON.valueToTree(new double[] {1.2, 2.5, 4, 8}));
        assertThat(read(phi3)).isEqualTo(m);
    }

    @Test
    void aScalingWithoutItsKeysOrWithPartialRotationIsRefused() throws IOException {
        ObjectNode c = golden("llama3-rope");
        ((ObjectNode) c.get("rope_parameters")).remove("low_freq_factor");
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class)
                .hasMessageContaining("rope_parameters.low_freq_factor");
        ObjectNode d = golden("llama-linear-rope");
        ((ObjectNode) d.get("rope_parameters")).put("factor", "four");
        assertThatThrownBy(() -> read(d)).isInstanceOf(UserError.class).hasMessageContaining("must be a number");
        ObjectNode e = golden("llama-linear-rope");
        ((ObjectNode) e.get("rope_parameters")).put("partial_rotary_factor", 0.5);
        assertThatThrownBy(() -> read(e)).isInstanceOf(UserError.class).hasMessageContaining("partial_rotary_factor");
    }

    @Test
    void bloomKeysAndAliases() throws IOException {
        ObjectNode c = golden("bloom");
        ModelConfig m = read(c);
        assertThat(m).isEqualTo(ModelConfig.bloom(160, 48, 2, 6, 1e-5, true, 2048));
        c.remove("hidden_size");
        c.put("n_embed", 48); // older BLOOM configs (bloom-560m's and others) spell it so
        assertThat(read(c)).isEqualTo(m);
        c.put("apply_residual_connection_post_layernorm", true);
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class)
                .hasMessageContaining("apply_residual_connection_post_layernorm");
        c.put("apply_residual_connection_post_layernorm", false);
        c.put("n_head", 5);
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class).hasMessageContaining("n_head");
    }

    @Test
    void qwen3TakesItsHeadSizeFromTheConfigAndRefusesWhatItDoesNotImplement() throws IOException {
        ObjectNode c = golden("qwen3");
        ModelConfig m = read(c);
        assertThat(m.architecture()).isEqualTo(Architecture.QWEN3);
        assertThat(m.headDim()).isEqualTo(16).isNotEqualTo(m.hidden() / m.heads());
        c.remove("head_dim"); // Qwen3Config's default is 128, not hidden / heads
        assertThat(read(c).headDim()).isEqualTo(128);
        c.put("head_dim", 16);
        c.put("attention_bias", true);
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class).hasMessageContaining("attention_bias");
        c.put("attention_bias", false);
        c.put("use_sliding_window", true);
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class).hasMessageContaining("use_sliding_window");
        c.put("use_sliding_window", false);
        c.put("tie_word_embeddings", false);
        assertThat(read(c).tieEmbeddings()).isFalse();
        c.putArray("architectures").add("Qwen3MoeForCausalLM");
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class)
                .hasMessageContaining("Qwen3MoeForCausalLM").hasMessageContaining("Qwen3ForCausalLM");
    }

    @Test
    void gemma3ReadsItsLayerKindsAndBothRopesInEitherFormAndSoftCapsWhereSet() throws IOException {
        ObjectNode c = golden("gemma3");
        ModelConfig m = read(c);
        assertThat(m.architecture()).isEqualTo(Architecture.GEMMA3);
        assertThat(m.gemma().slidingLayers()).containsExactly(true, true, false);
        assertThat(m.gemma().queryPreAttnScalar()).isEqualTo(12.0);
        assertThat(m.gemma().localRopeTheta()).isEqualTo(10000.0);
        assertThat(m.gemma().padTokenId()).isZero();
        assertThat(m.ropeTheta()).isEqualTo(1e6);
        assertThat(m.ropeScaling()).isEqualTo(RopeScaling.linear(4.0));
        assertThat(m.slidingWindow()).isEqualTo(5);

        // transformers 4's keys: rope_theta, rope_local_base_freq, rope_scaling (global layers), sliding_window_pattern
        c.remove("rope_parameters");
        c.remove("layer_types");
        c.put("rope_theta", 1e6).put("rope_local_base_freq", 10000.0).put("sliding_window_pattern", 3);
        c.putObject("rope_scaling").put("rope_type", "linear").put("factor", 4.0);
        assertThat(read(c)).isEqualTo(m);
        c.put("sliding_window_pattern", 2);
        assertThat(read(c).gemma().slidingLayers()).containsExactly(true, false, true);

        assertThat(m.gemma().finalSoftcap()).isZero();
        assertThat(m.gemma().attnSoftcap()).isZero();
        c.put("final_logit_softcapping", 30.0);
        assertThat(read(c).gemma().finalSoftcap()).isEqualTo(30.0);
        c.put("final_logit_softcapping", -1.0);
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class).hasMessageContaining("final_logit_softcapping");
        c.putNull("final_logit_softcapping");
        c.put("hidden_activation", "gelu");
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class).hasMessageContaining("hidden_activation");
        c.put("hidden_activation", "gelu_pytorch_tanh");
        c.putArray("layer_types").add("sliding_attention");
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class).hasMessageContaining("layer_types");
    }

    @Test
    void gemma2HasItsSoftCapsAlternatingLayersAndOneRope() throws IOException {
        ObjectNode c = new ObjectMapper().createObjectNode();
        c.putArray("architectures").add("Gemma2ForCausalLM");
        c.put("num_hidden_layers", 4);
        ModelConfig m = read(c); // Gemma2Config's defaults
        assertThat(m.architecture()).isEqualTo(Architecture.GEMMA2);
        assertThat(m.gemma().attnSoftcap()).isEqualTo(50.0);
        assertThat(m.gemma().finalSoftcap()).isEqualTo(30.0);
        assertThat(m.gemma().slidingLayers()).containsExactly(true, false, true, false);
        assertThat(m.gemma().localRopeTheta()).isEqualTo(m.ropeTheta()).isEqualTo(10000.0);
        assertThat(m.headDim()).isEqualTo(256);
        assertThat(m.vocabSize()).isEqualTo(256000);
        c.putNull("attn_logit_softcapping");
        assertThat(read(c).gemma().attnSoftcap()).isZero();
        c.putObject("rope_parameters").put("rope_type", "linear").put("factor", 2.0).put("rope_theta", 1e4);
        assertThatThrownBy(() -> read(c)).isInstanceOf(UserError.class).hasMessageContaining("rope_parameters.rope_type");
    }

    @Test
    void exportedConfigsReadBackTheSame() throws IOException {
        for (String name : Golden.ARCH_MODELS) {
            ModelConfig m = Golden.config(name);
            Files.writeString(tmp.resolve("config.json"), HfConfig.toJson(m).toString());
            assertThat(HfConfig.read(tmp)).as(name).isEqualTo(m);
        }
        for (ModelConfig preset : new ModelConfig[] {ModelConfig.llama31_8b(), ModelConfig.bloom560m(),
                ModelConfig.qwen3_0_6b(), ModelConfig.qwen3_8b(), ModelConfig.qwen3_32b(), ModelConfig.gemma3_1b(),
                ModelConfig.gemma3_12b(), ModelConfig.gemma3_27b(), ModelConfig.phi3Mini(),
                ModelConfig.phi3Medium()}) {
            Files.writeString(tmp.resolve("config.json"), HfConfig.toJson(preset).toString());
            assertThat(HfConfig.read(tmp)).isEqualTo(preset);
        }
        assertThat(HfConfig.toJson(Golden.config("bloom")).get("model_type").asText()).isEqualTo("bloom");
        assertThat(Golden.config("bloom").architecture()).isEqualTo(Architecture.BLOOM);
    }
}
