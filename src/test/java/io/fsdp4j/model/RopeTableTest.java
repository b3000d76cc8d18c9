package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Rotary frequencies of every supported rope type against transformers' own (its ROPE_INIT_FUNCTIONS, float32;
 * llama3-rope/inv_freq.json, made by tools/golden/make_golden_arch.py), dynamic NTK scaling at lengths within and
 * beyond max_position_embeddings among them; and the table built from them.
 */
class RopeTableTest {

    private static ModelConfig config(int headDim, int maxPositions, double theta, RopeScaling scaling) {
        return new ModelConfig(Architecture.LLAMA, 16, 2 * headDim, 16, 1, 2, 2, headDim, theta, 1e-5, false, false, 0,
                maxPositions, scaling);
    }

    private static RopeScaling scaling(JsonNode rope) {
        return switch (rope.get("rope_type").asText()) {
            case "default" -> RopeScaling.NONE;
            case "linear" -> RopeScaling.linear(rope.get("factor").asDouble());
            case "dynamic" -> RopeScaling.dynamic(rope.get("factor").asDouble());
            case "llama3" -> RopeScaling.llama3(rope.get("factor").asDouble(), rope.get("low_freq_factor").asDouble(),
                    rope.get("high_freq_factor").asDouble(), rope.get("original_max_position_embeddings").asInt());
            default -> throw new AssertionError(rope);
        };
    }

    @Test
    void inverseFrequenciesMatchTransformers() {
        JsonNode cases = Golden.json("llama3-rope", "inv_freq.json").get("cases");
        List<String> seen = new ArrayList<>();
        for (JsonNode c : cases) {
            assertThat(c.get("source").asText()).as("fixture made with transformers").isEqualTo("transformers");
            JsonNode rope = c.get("rope_parameters");
            int maxPositions = c.get("max_position_embeddings").asInt();
            ModelConfig m = config(c.get("head_dim").asInt(), maxPositions, rope.get("rope_theta").asDouble(), scaling(rope));
            int seqLen = c.get("seq_len").isNull() ? maxPositions : c.get("seq_len").asInt();
            double[] mine = RopeTable.inverseFrequencies(m, seqLen);
            JsonNode theirs = c.get("inv_freq");
            assertThat(mine).hasSize(theirs.size());
            for (int j = 0; j < mine.length; j++) {
                double t = theirs.get(j).asDouble();
                assertThat(mine[j]).as("%s inv_freq[%d]", c.get("name").asText(), j).isCloseTo(t, within(1e-6 * t)); // transformers computes in fp32
            }
            seen.add(c.get("name").asText());
        }
        assertThat(seen).contains("llama3.1-8b", "dynamic-within", "dynamic-beyond", "linear");
    }

    @Test
    void aSavedConfigFromBeforeRopeScalingReadsAsUnscaled() throws Exception {
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        var node = (com.fasterxml.jackson.databind.node.ObjectNode) json.valueToTree(ModelConfig.tiny());
        assertThat(json.treeToValue(node, ModelConfig.class)).isEqualTo(ModelConfig.tiny());
        node.remove("ropeScaling"); // as a checkpoint's index.json written before the field existed
        assertThat(json.treeToValue(node, ModelConfig.class)).isEqualTo(ModelConfig.tiny());
        ModelConfig scaled = ModelConfig.llama31_8b();
        assertThat(json.treeToValue(json.valueToTree(scaled), ModelConfig.class)).isEqualTo(scaled);
        ModelConfig bloom = ModelConfig.bloom560m();
        assertThat(json.treeToValue(json.valueToTree(bloom), ModelConfig.class)).isEqualTo(bloom);
    }

    @Test
    void dynamicScalingIsTheDefaultWithinMaxPositions() {
        ModelConfig plain = config(8, 64, 10000.0, RopeScaling.NONE);
        ModelConfig dynamic = plain.withRopeScaling(RopeScaling.dynamic(2.0));
        for (int len : new int[] {1, 16, 64}) {
            assertThat(RopeTable.inverseFrequencies(dynamic, len)).containsExactly(RopeTable.inverseFrequencies(plain, len));
        }
        double[] beyond = RopeTable.inverseFrequencies(dynamic, 200), base = RopeTable.inverseFrequencies(plain, 200);
        assertThat(beyond[0]).isEqualTo(base[0]); // the first frequency is 1 whatever the base
        assertThat(beyond[3]).isLessThan(base[3]); // a larger base: slower rotations
        RopeTable table = RopeTable.of(dynamic, 64), plainTable = RopeTable.of(plain, 64);
        assertThat(table.cos()).containsExactly(plainTable.cos());
    }

    @Test
    void sequencesBeyondMaxPositionsAreRefusedSayingWhyForDynamicScaling() {
        var cpu = io.fsdp4j.backend.CpuBackend.INSTANCE;
        ModelConfig dynamic = config(8, 8, 10000.0, RopeScaling.dynamic(2.0));
        TokenBatch longBatch = TokenBatch.of(cpu, new int[][] {new int[9]}, new int[][] {new int[9]});
        LlamaModel model = new LlamaModel(dynamic, cpu);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> model.embedForward(cpu.allocate(
                        io.fsdp4j.tensor.DType.F32, 16 * 16), longBatch))
                .isInstanceOf(io.fsdp4j.UserError.class)
                .hasMessageContaining("sequence length 9 exceeds the model's max_position_embeddings of 8")
                .hasMessageContaining("rope_type dynamic").hasMessageContaining("data.seq_len of at most 8");
    }

    @Test
    void theTableRotatesByPositionTimesFrequency() {
        ModelConfig m = config(8, 512, 100.0, RopeScaling.llama3(8.0, 1.0, 4.0, 64));
        double[] inv = RopeTable.inverseFrequencies(m, 512);
        RopeTable table = RopeTable.of(m, 20);
        for (int p = 0; p < 20; p++) {
            for (int j = 0; j < 4; j++) {
                assertThat(table.cos()[p * 4 + j]).isEqualTo((float) Math.cos(p * inv[j]));
                assertThat(table.sin()[p * 4 + j]).isEqualTo((float) Math.sin(p * inv[j]));
            }
        }
        // llama3 with these settings: frequency 0 kept, 1 and 2 interpolated, 3 divided by the factor
        double[] plain = RopeTable.inverseFrequencies(m.withRopeScaling(RopeScaling.NONE), 512);
        assertThat(inv[0]).isEqualTo(plain[0]);
        assertThat(inv[1]).isStrictlyBetween(plain[1] / 8, plain[1]);
        assertThat(inv[2]).isStrictlyBetween(plain[2] / 8, plain[2]);
        assertThat(inv[3]).isCloseTo(plain[3] / 8, within(1e-15));
    }
}
