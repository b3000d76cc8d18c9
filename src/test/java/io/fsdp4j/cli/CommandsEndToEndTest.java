package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.safetensors.SafetensorsFile;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code score} and {@code train} as a user runs them, in-process: correct output on good input, and for each kind
 * of bad input a single {@code error:} line on stderr and exit status 2.
 */
class CommandsEndToEndTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    record Run(int status, String out, String err) {
        void failsWith(String... fragments) {
            assertThat(status).as("exit status; stderr: %s", err).isEqualTo(2);
            assertThat(err.lines().toList()).as("stderr").hasSize(1);
            assertThat(err).startsWith("error: ");
            for (String f : fragments) {
                assertThat(err).contains(f);
            }
        }
    }

    static Run run(String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int status;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            status = Main.execute(args, o, e, false);
        }
        return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    /** A copy of a golden model directory, with config.json changed by {@code edit}. */
    private Path modelCopy(String name, Consumer<ObjectNode> edit) throws IOException {
        Path dir = Files.createTempDirectory(tmp, name + "-copy");
        try (var files = Files.list(Golden.dir(name))) {
            for (Path f : files.toList()) {
                Files.copy(f, dir.resolve(f.getFileName()));
            }
        }
        ObjectNode config = (ObjectNode) JSON.readTree(dir.resolve("config.json").toFile());
        edit.accept(config);
        JSON.writeValue(dir.resolve("config.json").toFile(), config);
        return dir;
    }

    /** The golden batch as pre-tokenized JSONL. */
    private Path batchJsonl(String name) {
        return Golden.jsonl(name, "batch.json", true, tmp);
    }

    @Test
    void scorePrintsEachSequencesLossAndTheTokenWeightedMean() throws IOException {
        Run r = run("score", "--model", Golden.dir("mistral").toString(), "--data", batchJsonl("mistral").toString());
        assertThat(r.status).as(r.err).isZero();
        List<JsonNode> lines = r.out.lines().map(CommandsEndToEndTest::parse).toList();
        assertThat(lines).hasSize(5);
        try (var expected = SafetensorsFile.open(Golden.dir("mistral").resolve("expected.safetensors"))) {
            float[] seqLoss = expected.readFloats("seq_loss"), seqTokens = expected.readFloats("seq_tokens");
            for (int i = 0; i < 4; i++) {
                assertThat(lines.get(i).get("index").intValue()).isEqualTo(i);
                assertThat(lines.get(i).get("tokens").intValue()).isEqualTo((int) seqTokens[i]);
                assertThat(lines.get(i).get("loss").doubleValue()).isCloseTo(seqLoss[i], org.assertj.core.data.Percentage.withPercentage(1e-3));
            }
            assertThat(lines.get(4).get("mean_loss").doubleValue())
                    .isCloseTo(expected.readFloats("loss")[0], org.assertj.core.data.Percentage.withPercentage(1e-3));
        }
    }

    private static JsonNode parse(String line) {
        try {
            return JSON.readTree(line);
        } catch (IOException e) {
            throw new AssertionError("not JSON: " + line, e);
        }
    }

    @Test
    void aMissingKeyTheModelNeedsIsNamed() throws IOException {
        Path model = modelCopy("qwen2", c -> c.remove("num_hidden_layers"));
        run("score", "--model", model.toString(), "--data", batchJsonl("qwen2").toString())
                .failsWith("num_hidden_layers", "missing");
    }

    @Test
    void anUnsupportedArchitectureListsTheSupportedOnes() throws IOException {
        Path model = modelCopy("qwen2", c -> c.putArray("architectures").add("GPT2LMHeadModel"));
        run("score", "--model", model.toString(), "--data", batchJsonl("qwen2").toString())
                .failsWith("GPT2LMHeadModel", "Qwen2ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM");
    }

    @Test
    void anUnsupportedSettingIsRefusedNotIgnored() throws IOException {
        Path model = modelCopy("llama", c -> c.put("hidden_act", "gelu"));
        run("score", "--model", model.toString(), "--data", batchJsonl("llama").toString()).failsWith("hidden_act", "gelu");
        Path scaled = modelCopy("llama", c -> ((ObjectNode) c.get("rope_parameters")).put("rope_type", "yarn"));
        run("score", "--model", scaled.toString(), "--data", batchJsonl("llama").toString()).failsWith("rope_type", "yarn");
    }

    @Test
    void aTensorWhoseShapeDisagreesWithTheConfigIsNamed() throws IOException {
        Path model = modelCopy("llama", c -> c.put("intermediate_size", 50));
        run("score", "--model", model.toString(), "--data", batchJsonl("llama").toString())
                .failsWith("model.layers.0.mlp.gate_proj.weight", "[48, 32]", "[50, 32]");
    }

    @Test
    void aTruncatedOrCorruptCheckpointIsRefused() throws IOException {
        Path truncated = modelCopy("llama", c -> { });
        try (var f = new RandomAccessFile(truncated.resolve("model.safetensors").toFile(), "rw")) {
            f.setLength(f.length() - 1000);
        }
        run("score", "--model", truncated.toString(), "--data", batchJsonl("llama").toString()).failsWith("truncated");
        Path corrupt = modelCopy("qwen2", c -> { });
        try (var f = new RandomAccessFile(corrupt.resolve("model.safetensors").toFile(), "rw")) {
            f.seek(8);
            f.write("!!!!".getBytes(StandardCharsets.US_ASCII)); // the header's JSON no longer parses
        }
        run("score", "--model", corrupt.toString(), "--data", batchJsonl("qwen2").toString()).failsWith("model.safetensors");
    }

    @Test
    void aTokenOutsideTheVocabularyNamesTheLine() throws IOException {
        Path data = Files.write(tmp.resolve("bad.jsonl"), List.of("{\"input_ids\":[1,2,3]}", "{\"input_ids\":[4,160,5]}"));
        run("score", "--model", Golden.dir("qwen2").toString(), "--data", data.toString())
                .failsWith("line 2", "160", "vocabulary");
    }

    @Test
    void trainWritesMetricsAndASummary() throws IOException {
        Path metrics = tmp.resolve("out/metrics.jsonl");
        Run r = run("train", "--set", "model.path=" + Golden.dir("qwen2"), "--set", "data.train=" + batchJsonl("qwen2"),
                "--set", "data.seq_len=16", "--set", "train.steps=3", "--set", "train.batch_size=2",
                "--set", "dist.ranks=2", "--set", "log.metrics=" + metrics);
        assertThat(r.status).as(r.err).isZero();
        List<JsonNode> steps = Files.readAllLines(metrics).stream().map(CommandsEndToEndTest::parse).toList();
        assertThat(steps).hasSize(3);
        for (String key : List.of("step", "loss", "grad_norm", "lr", "tokens", "tok_s", "tok_s_rank", "peak_heap_gib")) {
            assertThat(steps.get(0).has(key)).as("metrics key %s", key).isTrue();
        }
        for (String key : List.of("tok_s_gpu", "mfu", "peak_reserved_gib")) { // the interface's keys, on CPU ranks too
            assertThat(steps.get(0).has(key)).as("metrics key %s on CPU ranks", key).isTrue();
        }
        assertThat(steps.get(0).get("mfu").isNull()).as("no peak rate on CPU ranks").isTrue();
        assertThat(steps.get(2).get("step").intValue()).isEqualTo(3);
        assertThat(steps.get(0).get("tokens").intValue()).isEqualTo(4 * 16);
        JsonNode summary = parse(r.out.lines().reduce((a, b) -> b).orElseThrow());
        assertThat(summary.get("world_size").intValue()).isEqualTo(2);
        assertThat(summary.get("tokens").intValue()).isEqualTo(3 * 4 * 16);
        assertThat(summary.get("strategy").asText()).isEqualTo("full_shard");
        assertThat(summary.get("rank_bytes")).hasSize(2);
    }

    @Test
    void trainRefusesAnImpossibleMeshAndABadKey() {
        run("train", "--set", "dist.ranks=3", "--set", "fsdp.strategy=hybrid_shard", "--set", "fsdp.shard_size=2")
                .failsWith("world size 3", "fsdp.shard_size");
        run("train", "--set", "fsdp.strategy=zero3").failsWith("fsdp.strategy", "full_shard", "hybrid_shard");
        run("train", "--set", "model.preset=gpt-5").failsWith("gpt-5", "qwen2.5-7b");
    }

    @Test
    void trainSavesResumesAndExportsAHuggingFaceDirectory() throws IOException {
        Path ck = tmp.resolve("ck"), data = batchJsonl("qwen2");
        String[] common = {"train", "--set", "model.path=" + Golden.dir("qwen2"), "--set", "data.train=" + data,
                "--set", "data.seq_len=16", "--set", "train.batch_size=2", "--set", "dist.ranks=2",
                "--set", "checkpoint.dir=" + ck, "--set", "checkpoint.every=2"};
        Run first = run(concat(common, "--set", "train.steps=3"));
        assertThat(first.status).as(first.err).isZero();
        assertThat(ck.resolve("step-00000002/index.json")).exists();
        assertThat(ck.resolve("step-00000003/index.json")).exists();
        Run resumed = run(concat(common, "--set", "train.steps=5", "--set", "checkpoint.resume=auto"));
        assertThat(resumed.status).as(resumed.err).isZero();
        assertThat(resumed.out).contains("resuming from").contains("step-00000003").contains("step     4/5")
                .doesNotContain("step     3/5");
        Path exported = tmp.resolve("exported");
        Run export = run("export", "--checkpoint", ck.toString(), "--out", exported.toString());
        assertThat(export.status).as(export.err).isZero();
        assertThat(export.out).contains("step-00000005");
        JsonNode original = JSON.readTree(Golden.dir("qwen2").resolve("config.json").toFile());
        ObjectNode written = (ObjectNode) JSON.readTree(exported.resolve("config.json").toFile());
        written.set("torch_dtype", original.get("torch_dtype"));
        if (original.get("torch_dtype") == null) {
            written.remove("torch_dtype");
        }
        assertThat(written).isEqualTo(original);
        Run scored = run("score", "--model", exported.toString(), "--data", data.toString());
        assertThat(scored.status).as(scored.err).isZero();
        double trainedLoss = parse(scored.out.lines().reduce((a, b) -> b).orElseThrow()).get("mean_loss").doubleValue();
        double initialLoss = parse(run("score", "--model", Golden.dir("qwen2").toString(), "--data", data.toString())
                .out.lines().reduce((a, b) -> b).orElseThrow()).get("mean_loss").doubleValue();
        assertThat(trainedLoss).isLessThan(initialLoss); // five steps on these sequences lowered their loss
        run("export", "--checkpoint", ck.toString(), "--out", exported.toString()).failsWith("not empty");
        run("export", "--checkpoint", tmp.toString(), "--out", tmp.resolve("x").toString()).failsWith("index.json");
    }

    @Test
    void aPresetExportsWithAConfigThatReadsBackTheSame() throws IOException {
        Path ck = tmp.resolve("ck");
        Path text = Files.writeString(tmp.resolve("text.txt"), "a few bytes of text for the tiny preset ".repeat(8));
        Run r = run("train", "--set", "data.train=" + text, "--set", "train.steps=1", "--set", "data.seq_len=16",
                "--set", "checkpoint.dir=" + ck);
        assertThat(r.status).as(r.err).isZero();
        Path exported = tmp.resolve("tiny-hf");
        assertThat(run("export", "--checkpoint", ck.toString(), "--out", exported.toString(), "--dtype", "bf16").status).isZero();
        assertThat(io.fsdp4j.hf.HfConfig.read(exported)).isEqualTo(io.fsdp4j.model.ModelConfig.tiny());
        try (var f = SafetensorsFile.open(exported.resolve("model.safetensors"))) {
            assertThat(f.info("model.embed_tokens.weight").dtype()).isEqualTo("BF16");
        }
    }

    private static String[] concat(String[] a, String... b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }

    @Test
    void benchPrintsThePeersFields() {
        Run r = run("bench", "--warmup", "1", "--steps", "2", "--set", "data.seq_len=32", "--set", "dist.ranks=2");
        assertThat(r.status).as(r.err).isZero();
        JsonNode line = parse(r.out.strip());
        for (String key : List.of("impl", "model", "params", "world", "seq", "steps", "loss", "tok_s", "tok_s_gpu",
                "step_s", "mfu", "peak_reserved_gib")) {
            assertThat(line.has(key)).as("bench field %s", key).isTrue();
        }
        assertThat(line.get("impl").asText()).isEqualTo("fsdp4j");
        assertThat(line.get("param_copy").asText()).isEqualTo("per_gather"); // what plan --bench models the step with
        assertThat(line.get("blocks_not_checkpointed").intValue()).isZero(); // and this
        assertThat(line.get("world").intValue()).isEqualTo(2);
        assertThat(line.get("seq").intValue()).isEqualTo(32);
        assertThat(line.get("tok_s").doubleValue()).isPositive();
        assertThat(line.get("tok_s_gpu").doubleValue()).isCloseTo(line.get("tok_s").doubleValue() / 2,
                org.assertj.core.data.Percentage.withPercentage(1e-6));
    }

    /**
     * With no options at all: the peer's 2048 tokens do not fit the default preset (tiny, 1024 positions), so bench
     * runs at the model's longest sequence and says so on standard error; a length the user sets is kept (and refused
     * with one line when the model cannot take it).
     */
    @Test
    void benchWithItsDefaultsRunsAtTheLongestSequenceTheModelTakes() {
        Run r = run("bench", "--warmup", "0", "--steps", "1", "--set", "dist.ranks=1");
        assertThat(r.status).as(r.err).isZero();
        int positions = io.fsdp4j.model.ModelConfig.tiny().maxPositions();
        assertThat(positions).isLessThan(2048);
        assertThat(parse(r.out.strip()).get("seq").intValue()).isEqualTo(positions);
        assertThat(r.err).contains(positions + " tokens a sequence, the model's max_position_embeddings");
        Run chosen = run("bench", "--warmup", "0", "--steps", "1", "--set", "dist.ranks=1", "--set", "data.seq_len=2048");
        assertThat(chosen.status).isEqualTo(2);
        assertThat(chosen.err.strip()).startsWith("error: ").contains("max_position_embeddings").doesNotContain("\n");
    }

    /** model.layers: the tiny preset's first 2 of its 4 blocks, named as the peer's offload script names such a run. */
    @Test
    void benchOfAPresetsFirstLayers() {
        Run whole = run("bench", "--warmup", "0", "--steps", "1", "--set", "data.seq_len=16", "--set", "dist.ranks=1");
        Run half = run("bench", "--warmup", "0", "--steps", "1", "--set", "data.seq_len=16", "--set", "dist.ranks=1",
                "--set", "model.layers=2");
        assertThat(half.status).as(half.err).isZero();
        JsonNode w = parse(whole.out.strip()), h = parse(half.out.strip());
        assertThat(h.get("model").asText()).isEqualTo("tiny-2l");
        var tiny = io.fsdp4j.model.ModelConfig.tiny();
        long perBlock = io.fsdp4j.model.CausalLMs.layout(tiny).get(1).numel();
        assertThat(w.get("params").longValue() - h.get("params").longValue()).isEqualTo(2 * perBlock);
        Run tooMany = run("bench", "--warmup", "0", "--steps", "1", "--set", "model.layers=9");
        assertThat(tooMany.status).isEqualTo(2);
        assertThat(tooMany.err.strip()).startsWith("error: model.layers=9 is outside 1..4").doesNotContain("\n");
    }

    @Test
    void benchRefusesKeysItWouldNotRead() {
        for (String[] keyAndHint : new String[][] {{"data.train=/tmp/x.jsonl", "fsdp4j train"},
                {"train.steps=100", "--steps"}, {"data.eval = e.jsonl", "fsdp4j eval"}}) {
            Run r = run("bench", "--warmup", "0", "--steps", "1", "--set", keyAndHint[0]);
            String key = keyAndHint[0].substring(0, keyAndHint[0].indexOf('=')).strip();
            assertThat(r.status).isEqualTo(2);
            assertThat(r.err.strip()).startsWith("error: fsdp4j bench does not read '" + key + "'")
                    .contains(keyAndHint[1]).doesNotContain("\n");
            assertThat(r.out).isEmpty();
        }
    }

    @Test
    void benchProfileOnCpuRanksSaysItNeedsAGpu() {
        Run r = run("bench", "--profile", "--warmup", "0", "--steps", "1", "--set", "data.seq_len=32",
                "--set", "dist.device=cpu");
        assertThat(r.status).isEqualTo(2);
        assertThat(r.err.strip()).startsWith("error: bench --profile").contains("dist.device=cuda").doesNotContain("\n");
        Run alone = run("bench", "--profile-ops", "0", "--warmup", "0", "--steps", "1");
        assertThat(alone.status).isEqualTo(2);
        assertThat(alone.err.strip()).isEqualTo("error: --profile-ops N goes with --profile, N >= 0 (0 lists every operation)");
    }
}
