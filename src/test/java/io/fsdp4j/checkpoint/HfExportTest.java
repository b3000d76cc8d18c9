package io.fsdp4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.Architecture;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Export: shards and index as transformers writes them, the source's dtype, bounded memory, never half a directory. */
class HfExportTest {
    @TempDir
    Path tmp;

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final List<String> CARRIED = List.of("tokenizer.json", "tokenizer_config.json",
            "generation_config.json", "chat_template.jinja");

    /** The golden Qwen2 model's directory as a bf16 source model with tokenizer files, generation config and template. */
    private Path bf16Source() throws IOException {
        Path src = tmp.resolve("source");
        Files.createDirectories(src);
        ObjectNode config = (ObjectNode) JSON.readTree(Golden.dir("qwen2").resolve("config.json").toFile());
        config.put("dtype", "bfloat16");
        JSON.writeValue(src.resolve("config.json").toFile(), config);
        for (String name : CARRIED) {
            Files.writeString(src.resolve(name), "{\"file\": \"" + name + "\"}\n");
        }
        return src;
    }

    private static List<UnitLayout> layout(ModelConfig config) {
        return CausalLMs.layout(config);
    }

    @Test
    void shardsAndTheirIndexAreWrittenAsTransformersWritesThem() throws IOException {
        Path src = bf16Source();
        ModelConfig config = Golden.config("qwen2");
        Path checkpoint = SyntheticCheckpoint.write(tmp.resolve("ck"), config, src.toString());
        long maxShard = 4000;
        List<String> progress = new ArrayList<>();
        Path out = HfExport.export(checkpoint, tmp.resolve("out"), new HfExport.Options(null, maxShard, progress::add));

        assertThat(out.resolve(HfExport.SINGLE_FILE)).doesNotExist();
        JsonNode index = JSON.readTree(out.resolve(HfExport.INDEX_FILE).toFile());
        Map<String, String> weightMap = new HashMap<>();
        index.get("weight_map").properties().forEach(e -> weightMap.put(e.getKey(), e.getValue().asText()));
        Set<String> files = new HashSet<>(weightMap.values());
        assertThat(files).hasSizeGreaterThan(2);
        assertThat(progress).hasSize(files.size());
        for (String f : files) {
            assertThat(f).matches("model-000\\d\\d-of-" + String.format("%05d", files.size()) + "\\.safetensors");
        }
        // every tensor of the model once, each in the file the index names and in no other
        List<ParamSpec> params = layout(config).stream().flatMap(u -> u.params().stream()).toList();
        assertThat(weightMap.keySet()).containsExactlyInAnyOrderElementsOf(params.stream().map(ParamSpec::name).toList());
        long totalBytes = 0;
        Set<String> seen = new HashSet<>();
        for (String f : files) {
            try (SafetensorsFile file = SafetensorsFile.open(out.resolve(f))) {
                long bytes = 0;
                for (String name : file.names()) {
                    assertThat(seen.add(name)).as(name).isTrue();
                    assertThat(weightMap.get(name)).isEqualTo(f);
                    assertThat(file.info(name).dtype()).isEqualTo("BF16");
                    bytes += file.info(name).byteSize();
                }
                assertThat(file.metadata()).containsEntry("format", "pt");
                assertThat(bytes <= maxShard || file.names().size() == 1).as(f + ": " + bytes + " bytes").isTrue();
                totalBytes += bytes;
            }
        }
        assertThat(seen).hasSize(params.size());
        assertThat(index.get("metadata").get("total_size").asLong()).isEqualTo(totalBytes);
        assertThat(index.get("metadata").get("total_parameters").asLong())
                .isEqualTo(params.stream().mapToLong(ParamSpec::numel).sum());

        // the values, rounded to bf16, read back through the index as fsdp4j loads a model directory
        try (HfCheckpoint weights = HfCheckpoint.open(out, layout(config))) {
            for (int u = 0; u < layout(config).size(); u++) {
                float[] values = new float[(int) layout(config).get(u).numel()];
                weights.read(u, 0, values, 0, values.length);
                for (int i = 0; i < values.length; i++) {
                    assertThat(values[i]).isEqualTo(Half.roundBf16(SyntheticCheckpoint.value(u, i)));
                }
            }
        }
        JsonNode written = JSON.readTree(out.resolve("config.json").toFile());
        assertThat(written.get("torch_dtype").asText()).isEqualTo("bfloat16");
        assertThat(written.get("dtype").asText()).isEqualTo("bfloat16");
        for (String name : CARRIED) {
            assertThat(out.resolve(name)).hasSameTextualContentAs(src.resolve(name));
        }
    }

    @Test
    void weightsThatFitOneShardAreOneFileWithNoIndexInTheDtypeAsked() throws IOException {
        Path src = bf16Source();
        ModelConfig config = Golden.config("qwen2");
        Path checkpoint = SyntheticCheckpoint.write(tmp.resolve("ck"), config, src.toString());
        Path out = HfExport.export(checkpoint, tmp.resolve("out"), DType.F32);

        assertThat(out.resolve(HfExport.INDEX_FILE)).doesNotExist();
        try (SafetensorsFile file = SafetensorsFile.open(out.resolve(HfExport.SINGLE_FILE))) {
            for (int u = 0; u < layout(config).size(); u++) {
                for (ParamSpec p : layout(config).get(u).params()) {
                    assertThat(file.info(p.name()).dtype()).isEqualTo("F32");
                    float[] values = file.readFloats(p.name());
                    for (int i = 0; i < values.length; i++) {
                        assertThat(values[i]).isEqualTo(SyntheticCheckpoint.value(u, p.offset() + i));
                    }
                }
            }
        }
        JsonNode written = JSON.readTree(out.resolve("config.json").toFile());
        assertThat(written.get("torch_dtype").asText()).isEqualTo("float32");
        assertThat(written.get("dtype").asText()).isEqualTo("float32");
    }

    @Test
    void aPresetExportsItsFp32MasterWeightsByDefault() throws IOException {
        Path checkpoint = SyntheticCheckpoint.write(tmp.resolve("ck"), ModelConfig.tiny(), null);
        Path out = HfExport.export(checkpoint, tmp.resolve("out"), HfExport.Options.defaults());
        try (SafetensorsFile file = SafetensorsFile.open(out.resolve(HfExport.SINGLE_FILE))) {
            assertThat(file.info("model.embed_tokens.weight").dtype()).isEqualTo("F32");
        }
        assertThat(JSON.readTree(out.resolve("config.json").toFile()).get("torch_dtype").asText()).isEqualTo("float32");
    }

    @Test
    void aCrashMidExportLeavesNoDirectoryThatLooksCompleteAndTheNextExportReplacesTheLeftover() throws IOException {
        ModelConfig config = Golden.config("qwen2");
        Path checkpoint = SyntheticCheckpoint.write(tmp.resolve("ck"), config, bf16Source().toString());
        Path out = tmp.resolve("out");
        List<String> shardsAtCrash = new ArrayList<>();
        assertThatThrownBy(() -> HfExport.export(checkpoint, out, new HfExport.Options(null, 4000, line -> {
            // the state of the disk when the process dies after its first shard
            assertThat(out).doesNotExist();
            try (Stream<Path> hidden = Files.list(tmp)) {
                hidden.filter(p -> p.getFileName().toString().startsWith(".out")).forEach(p -> {
                    assertThat(p.resolve("config.json")).doesNotExist();
                    assertThat(p.resolve(HfExport.INDEX_FILE)).doesNotExist();
                    shardsAtCrash.add(p.getFileName().toString());
                });
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            throw new IllegalStateException("killed");
        }))).hasMessage("killed");
        assertThat(shardsAtCrash).hasSize(1);
        assertThat(out).doesNotExist();

        // a leftover temporary directory (as a killed process leaves it) is replaced by the next export
        Path leftover = tmp.resolve(".out.tmp");
        Files.createDirectories(leftover);
        Files.writeString(leftover.resolve("model-00001-of-00009.safetensors"), "partial");
        HfExport.export(checkpoint, out, new HfExport.Options(null, 4000, line -> { }));
        assertThat(leftover).doesNotExist();
        assertThat(out.resolve("model-00001-of-00009.safetensors")).doesNotExist();
        assertThat(out.resolve(HfExport.INDEX_FILE)).exists();
    }

    @Test
    void aTensorLargerThanTheLimitGetsAShardOfItsOwn() {
        ModelConfig config = Golden.config("qwen2");
        List<HfExport.Shard> shards = HfExport.plan(layout(config), DType.F32, 2 * 160 * 32); // half the embedding
        assertThat(shards.getFirst().params()).extracting(p -> p.spec().name()).containsExactly("model.embed_tokens.weight");
        assertThat(shards.getFirst().bytes()).isEqualTo(4L * 160 * 32);
        assertThat(shards).allSatisfy(s -> assertThat(s.bytes() <= 2 * 160 * 32 || s.params().size() == 1).isTrue());
        assertThat(HfExport.plan(layout(config), DType.F32, HfExport.DEFAULT_MAX_SHARD_BYTES))
                .singleElement().extracting(HfExport.Shard::file).isEqualTo(HfExport.SINGLE_FILE);
    }

    @Test
    void shardSizesAreReadAsTransformersSpellsThem() {
        assertThat(HfExport.parseSize("5GB")).isEqualTo(5_000_000_000L);
        assertThat(HfExport.parseSize("500MB")).isEqualTo(500_000_000L);
        assertThat(HfExport.parseSize("2GiB")).isEqualTo(2L << 30);
        assertThat(HfExport.parseSize("1.5kb")).isEqualTo(1500L);
        assertThat(HfExport.parseSize("123456")).isEqualTo(123456L);
        assertThatThrownBy(() -> HfExport.parseSize("5 gigs")).isInstanceOf(UserError.class)
                .hasMessageContaining("--max-shard-size");
        assertThatThrownBy(() -> HfExport.parseSize("0GB")).isInstanceOf(UserError.class);
    }

    /**
     * A model whose embedding alone (8.4M floats, 34 MB) is larger than the whole heap, and whose weights as floats
     * (91 MB) nearly three times it, exports through the CLI in a child JVM of -Xmx32m: the old export, which built
     * every tensor as a float[], runs out of memory there. Memory is one chunk whatever the model, so the same holds
     * for a 7B model in 1 GiB.
     */
    @Test
    void aModelLargerThanTheHeapExportsInASmallHeap() throws Exception {
        ModelConfig config = new ModelConfig(Architecture.QWEN2, 16384, 512, 1536, 2, 8, 2, 64, 1e6, 1e-6, false,
                true, 0, 4096);
        long floats = layout(config).stream().mapToLong(UnitLayout::numel).sum();
        assertThat(floats * 4).isGreaterThan(2L * 32 * 1024 * 1024);
        Path checkpoint = SyntheticCheckpoint.write(tmp.resolve("ck"), config, null);
        Path out = tmp.resolve("out");
        String java = ProcessHandle.current().info().command().orElseThrow();
        List<String> command = List.of(java, "-Xmx32m", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"),
                "io.fsdp4j.cli.Main", "export", "--checkpoint", checkpoint.toString(), "--out", out.toString(),
                "--dtype", "bf16", "--max-shard-size", "40MB");
        Path log = tmp.resolve("child.log");
        Process child = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        assertThat(child.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(child.exitValue()).as(Files.readString(log)).isZero();
        JsonNode index = JSON.readTree(out.resolve(HfExport.INDEX_FILE).toFile());
        assertThat(index.get("metadata").get("total_size").asLong()).isEqualTo(floats * 2);
        try (HfCheckpoint weights = HfCheckpoint.open(out, layout(config))) {
            float[] some = new float[1000];
            int last = layout(config).size() - 1;
            long start = layout(config).get(last).numel() - some.length;
            weights.read(last, start, some, 0, some.length);
            for (int i = 0; i < some.length; i++) {
                assertThat(some[i]).isEqualTo(Half.roundBf16(SyntheticCheckpoint.value(last, start + i)));
            }
        }
    }
}
