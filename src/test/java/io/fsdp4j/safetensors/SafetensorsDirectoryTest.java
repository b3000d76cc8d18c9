package io.fsdp4j.safetensors;

import static io.fsdp4j.safetensors.TestFiles.assertUserError;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SafetensorsDirectoryTest {
    private static final Path GOLDEN = Path.of("src/test/resources/golden/llama-sharded");

    @TempDir
    Path dir;

    private static NamedTensor f32(String name, float... values) {
        return NamedTensor.of(name, DType.F32, new long[] {values.length}, values);
    }

    /** Two shards and an index that lists the tensors in an order of its own. */
    private void writeSharded(String index) throws IOException {
        SafetensorsWriter.write(dir.resolve("model-00001-of-00002.safetensors"),
                List.of(f32("embed", 1, 2), f32("layer0", 3)));
        SafetensorsWriter.write(dir.resolve("model-00002-of-00002.safetensors"),
                List.of(f32("layer1", 4, 5, 6), NamedTensor.ofInts("ids", new long[] {1}, new int[] {7})));
        Files.writeString(dir.resolve(SafetensorsDirectory.INDEX_FILE), index);
    }

    private static final String GOOD_INDEX = """
            {"metadata": {"total_size": 28},
             "weight_map": {
               "layer1": "model-00002-of-00002.safetensors",
               "embed": "model-00001-of-00002.safetensors",
               "ids": "model-00002-of-00002.safetensors",
               "layer0": "model-00001-of-00002.safetensors"}}""";

    @Test
    void opensASingleFile() {
        SafetensorsWriter.write(dir.resolve("model.safetensors"), List.of(f32("b", 1), f32("a", 2, 3)));
        try (SafetensorsDirectory d = SafetensorsDirectory.open(dir)) {
            assertThat(d.directory()).isEqualTo(dir);
            assertThat(d.files()).hasSize(1);
            assertThat(d.names()).containsExactly("b", "a");
            assertThat(d.readFloats("a")).containsExactly(2, 3);
            assertThat(d.info("a").shape()).containsExactly(2);
        }
    }

    @Test
    void opensAShardedDirectory() throws IOException {
        writeSharded(GOOD_INDEX);
        try (SafetensorsDirectory d = SafetensorsDirectory.open(dir)) {
            assertThat(d.names()).containsExactly("layer1", "embed", "ids", "layer0");
            assertThat(d.files()).extracting(f -> f.path().getFileName().toString())
                    .containsExactly("model-00002-of-00002.safetensors", "model-00001-of-00002.safetensors");
            assertThat(d.readFloats("embed")).containsExactly(1, 2);
            assertThat(d.readFloats("layer0")).containsExactly(3);
            assertThat(d.readFloats("layer1")).containsExactly(4, 5, 6);
            assertThat(d.readInts("ids")).containsExactly(7);
            float[] part = new float[2];
            d.readFloats("layer1", 1, part, 0, 2);
            assertThat(part).containsExactly(5, 6);
            assertThat(d.fileOf("ids").path().getFileName().toString()).isEqualTo("model-00002-of-00002.safetensors");
            assertThat(d.info("layer1").numel()).isEqualTo(3);
            assertUserError(() -> d.info("lm_head"), dir, "'lm_head'", "missing from the checkpoint");
        }
        try (SafetensorsDirectory d = SafetensorsDirectory.open(dir.resolve(SafetensorsDirectory.INDEX_FILE))) {
            assertThat(d.names()).hasSize(4);
        }
    }

    @Test
    void closeClosesEveryShard() throws IOException {
        writeSharded(GOOD_INDEX);
        SafetensorsDirectory d = SafetensorsDirectory.open(dir);
        List<SafetensorsFile> files = new ArrayList<>(d.files());
        d.close();
        for (SafetensorsFile f : files) {
            assertThatThrownBy(() -> f.raw(f.names().getFirst())).isInstanceOf(IllegalStateException.class);
        }
    }

    @Test
    void missingShardFile() throws IOException {
        writeSharded(GOOD_INDEX.replace("\"ids\": \"model-00002-of-00002", "\"ids\": \"model-00003-of-00002"));
        Path index = dir.resolve(SafetensorsDirectory.INDEX_FILE);
        assertUserError(() -> SafetensorsDirectory.open(dir), index, "'ids'",
                "'model-00003-of-00002.safetensors', which does not exist");
    }

    @Test
    void tensorMissingFromItsShard() throws IOException {
        writeSharded(GOOD_INDEX.replace("\"layer0\": \"model-00001", "\"layer0\": \"model-00002")
                .replace("\"layer1\"", "\"layer9\""));
        Path index = dir.resolve(SafetensorsDirectory.INDEX_FILE);
        assertUserError(() -> SafetensorsDirectory.open(dir), index, "'layer9'",
                "that file does not contain it (no shard does)");
        writeSharded(GOOD_INDEX.replace("\"layer0\": \"model-00001", "\"layer0\": \"model-00002"));
        assertUserError(() -> SafetensorsDirectory.open(dir), index, "'layer0'",
                "does not contain it (it is in 'model-00001-of-00002.safetensors')");
    }

    @Test
    void tensorInTwoShards() throws IOException {
        writeSharded(GOOD_INDEX);
        SafetensorsWriter.write(dir.resolve("model-00002-of-00002.safetensors"),
                List.of(f32("layer1", 4, 5, 6), NamedTensor.ofInts("ids", new long[] {1}, new int[] {7}),
                        f32("embed", 0, 0)));
        assertUserError(() -> SafetensorsDirectory.open(dir), dir.resolve(SafetensorsDirectory.INDEX_FILE),
                "'embed' is in both");
    }

    @Test
    void badIndexFiles() throws IOException {
        Path index = dir.resolve(SafetensorsDirectory.INDEX_FILE);
        writeSharded("{\"metadata\": {}}");
        assertUserError(() -> SafetensorsDirectory.open(dir), index, "no \"weight_map\"");
        writeSharded("{\"weight_map\": {\"a\": 3}}");
        assertUserError(() -> SafetensorsDirectory.open(dir), index, "'a' is a number");
        writeSharded("{\"weight_map\": {\"a\": \"../x.safetensors\"}}");
        assertUserError(() -> SafetensorsDirectory.open(dir), index, "outside the directory");
        writeSharded("{\"weight_map\": {}}");
        assertUserError(() -> SafetensorsDirectory.open(dir), index, "weight_map is empty");
        writeSharded("{\"weight_map\": ");
        assertUserError(() -> SafetensorsDirectory.open(dir), index, "index is not valid JSON");
    }

    @Test
    void directoryWithoutWeights() throws IOException {
        assertUserError(() -> SafetensorsDirectory.open(dir), dir,
                "no model.safetensors or model.safetensors.index.json in the directory");
        Files.write(dir.resolve("pytorch_model.bin"), new byte[1]);
        assertUserError(() -> SafetensorsDirectory.open(dir), dir, "(found pytorch_model.bin)");
        Path absent = dir.resolve("absent");
        assertUserError(() -> SafetensorsDirectory.open(absent), absent, "no such directory");
    }

    /** The Hugging Face checkpoint in src/test/resources, when present: every tensor of its index reads. */
    @Test
    void readsEveryTensorOfTheGoldenCheckpoint() throws IOException {
        assumeTrue(Files.isRegularFile(GOLDEN.resolve(SafetensorsDirectory.INDEX_FILE)), "no golden checkpoint");
        JsonNode weightMap = new ObjectMapper().readTree(GOLDEN.resolve(SafetensorsDirectory.INDEX_FILE).toFile())
                .get("weight_map");
        List<String> indexed = new ArrayList<>();
        weightMap.fieldNames().forEachRemaining(indexed::add);
        java.util.Set<String> shards = new java.util.HashSet<>();
        weightMap.forEach(file -> shards.add(file.textValue()));
        try (SafetensorsDirectory d = SafetensorsDirectory.open(GOLDEN)) {
            assertThat(d.names()).containsExactlyElementsOf(indexed);
            assertThat(d.files()).hasSize(shards.size());
            for (String name : indexed) {
                TensorInfo info = d.info(name);
                int length = switch (info.dtype()) {
                    case "I32", "I64" -> d.readInts(name).length;
                    default -> {
                        float[] values = d.readFloats(name);
                        for (float v : values) {
                            assertThat(Float.isFinite(v)).as(name).isTrue();
                        }
                        yield values.length;
                    }
                };
                assertThat((long) length).as(name).isEqualTo(info.numel());
            }
        }
    }
}
