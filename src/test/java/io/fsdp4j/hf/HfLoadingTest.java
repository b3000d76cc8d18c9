package io.fsdp4j.hf;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.NamedTensor;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.safetensors.SafetensorsWriter;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Hugging Face model directories in their several forms load to the same parameters. */
class HfLoadingTest {
    @TempDir
    Path tmp;

    private static List<float[]> load(Path dir) {
        ModelConfig config = HfConfig.read(dir);
        try (HfCheckpoint weights = HfCheckpoint.open(dir, LlamaModel.layout(config))) {
            List<float[]> units = new ArrayList<>();
            List<UnitLayout> layout = LlamaModel.layout(config);
            for (int u = 0; u < layout.size(); u++) {
                float[] values = new float[(int) layout.get(u).numel()];
                weights.read(u, 0, values, 0, values.length);
                units.add(values);
            }
            return units;
        }
    }

    @Test
    void aShardedCheckpointLoadsAsTheSingleFile() {
        List<float[]> single = load(Golden.dir("llama")), sharded = load(Golden.dir("llama-sharded"));
        assertThat(sharded).hasSameSizeAs(single);
        for (int u = 0; u < single.size(); u++) {
            assertThat(sharded.get(u)).isEqualTo(single.get(u));
        }
    }

    @Test
    void readingARangeGivesTheSameElementsAsReadingTheWholeUnit() {
        ModelConfig config = HfConfig.read(Golden.dir("qwen2"));
        List<UnitLayout> layout = LlamaModel.layout(config);
        float[] whole = load(Golden.dir("qwen2")).get(1);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), layout)) {
            float[] part = new float[1000];
            weights.read(1, 1234, part, 0, part.length); // spans several parameters of block 0
            assertThat(part).isEqualTo(java.util.Arrays.copyOfRange(whole, 1234, 2234));
        }
    }

    @Test
    void bf16AndF16WeightsLoadAsTheirRoundedValues() throws IOException {
        Path src = Golden.dir("mistral");
        List<float[]> reference = load(src);
        for (DType dtype : List.of(DType.BF16, DType.F16)) {
            Path dir = Files.createDirectories(tmp.resolve(dtype.name()));
            Files.copy(src.resolve("config.json"), dir.resolve("config.json"));
            List<NamedTensor> tensors = new ArrayList<>();
            try (SafetensorsFile f = SafetensorsFile.open(src.resolve("model.safetensors"))) {
                for (String name : f.names()) {
                    tensors.add(NamedTensor.of(name, dtype, f.info(name).shape(), f.readFloats(name)));
                }
            }
            SafetensorsWriter.write(dir.resolve("model.safetensors"), tensors);
            List<float[]> loaded = load(dir);
            for (int u = 0; u < reference.size(); u++) {
                float[] ref = reference.get(u), got = loaded.get(u);
                for (int i = 0; i < ref.length; i++) {
                    float expected = dtype == DType.BF16 ? Half.roundBf16(ref[i]) : Half.fromF16(Half.toF16(ref[i]));
                    assertThat(got[i]).isEqualTo(expected);
                }
            }
        }
    }

    @Test
    void ropeThetaIsReadInBothSpellings() throws IOException {
        ObjectMapper json = new ObjectMapper();
        ObjectNode config = (ObjectNode) json.readTree(Golden.dir("llama").resolve("config.json").toFile());
        double theta = config.get("rope_parameters").get("rope_theta").doubleValue();
        assertThat(HfConfig.read(Golden.dir("llama")).ropeTheta()).isEqualTo(theta);
        config.remove("rope_parameters");
        config.put("rope_theta", 12345.0);
        Path dir = Files.createDirectories(tmp.resolve("legacy"));
        json.writeValue(dir.resolve("config.json").toFile(), config);
        assertThat(HfConfig.read(dir).ropeTheta()).isEqualTo(12345.0);
    }

    @Test
    void parameterNamesAreThoseOfTheCheckpoint() {
        ModelConfig config = HfConfig.read(Golden.dir("qwen2"));
        try (SafetensorsFile f = SafetensorsFile.open(Golden.dir("qwen2").resolve("model.safetensors"))) {
            List<String> ours = LlamaModel.layout(config).stream().flatMap(u -> u.params().stream())
                    .map(ParamSpec::name).sorted().toList();
            assertThat(ours).isEqualTo(f.names().stream().sorted().toList());
        }
    }
}
