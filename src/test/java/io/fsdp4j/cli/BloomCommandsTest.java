package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.safetensors.NamedTensor;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.safetensors.SafetensorsWriter;
import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * BLOOM through every user path, from its Hugging Face directory (the golden fixture): score gives transformers'
 * per-sequence losses, also from a checkpoint saved without the {@code transformer.} prefix as bigscience's are;
 * train saves checkpoints and resumes; export writes BLOOM's config and names with the fused query_key_value
 * weight, which score reads back; bench runs it.
 */
class BloomCommandsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    private static CommandsEndToEndTest.Run run(String... args) {
        return CommandsEndToEndTest.run(args);
    }

    private Path batchJsonl() throws IOException {
        JsonNode batch = Golden.json("bloom", "batch.json");
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < batch.get("input_ids").size(); i++) {
            ObjectNode line = JSON.createObjectNode();
            line.set("input_ids", batch.get("input_ids").get(i));
            line.set("labels", batch.get("labels").get(i));
            lines.add(JSON.writeValueAsString(line));
        }
        return Files.write(tmp.resolve("bloom.jsonl"), lines);
    }

    private static List<JsonNode> jsonLines(String out) {
        return out.lines().filter(l -> l.startsWith("{")).map(l -> {
            try {
                return JSON.readTree(l);
            } catch (IOException e) {
                throw new AssertionError(l, e);
            }
        }).toList();
    }

    private static double meanLoss(CommandsEndToEndTest.Run scored) {
        assertThat(scored.status()).as(scored.err()).isZero();
        return jsonLines(scored.out()).getLast().get("mean_loss").doubleValue();
    }

    /** The golden BLOOM directory with every tensor renamed without "transformer.", as BloomModel saves them. */
    private Path withoutPrefix() throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("bloom-base-names"));
        Files.copy(Golden.dir("bloom").resolve("config.json"), dir.resolve("config.json"));
        List<NamedTensor> tensors = new ArrayList<>();
        try (SafetensorsFile f = SafetensorsFile.open(Golden.dir("bloom").resolve("model.safetensors"))) {
            for (String name : f.names()) {
                assertThat(name).startsWith("transformer.");
                tensors.add(NamedTensor.of(name.substring("transformer.".length()), DType.F32, f.info(name).shape(),
                        f.readFloats(name)));
            }
        }
        SafetensorsWriter.write(dir.resolve("model.safetensors"), tensors);
        return dir;
    }

    @Test
    void scoreGivesTransformersLossesWithOrWithoutTheBaseModelPrefix() throws IOException {
        Path data = batchJsonl();
        for (Path model : List.of(Golden.dir("bloom"), withoutPrefix())) {
            var r = run("score", "--model", model.toString(), "--data", data.toString());
            assertThat(r.status()).as(r.err()).isZero();
            List<JsonNode> lines = jsonLines(r.out());
            try (var expected = SafetensorsFile.open(Golden.dir("bloom").resolve("expected.safetensors"))) {
                float[] seqLoss = expected.readFloats("seq_loss");
                for (int i = 0; i < seqLoss.length; i++) {
                    assertThat(lines.get(i).get("loss").doubleValue()).as("sequence %d of %s", i, model)
                            .isCloseTo(seqLoss[i], Percentage.withPercentage(1e-3));
                }
                assertThat(lines.getLast().get("mean_loss").doubleValue())
                        .isCloseTo(expected.readFloats("loss")[0], Percentage.withPercentage(1e-3));
            }
        }
    }

    @Test
    void trainSavesResumesAndExportsBloomsLayout() throws IOException {
        Path ck = tmp.resolve("ck"), data = batchJsonl();
        String[] common = {"train", "--set", "model.path=" + Golden.dir("bloom"), "--set", "data.train=" + data,
                "--set", "data.seq_len=16", "--set", "train.batch_size=1", "--set", "dist.ranks=2",
                "--set", "checkpoint.dir=" + ck, "--set", "checkpoint.every=2",
                // the schedule of a run cut short, as resuming needs (a fine-tune's warmup_ratio would depend on steps)
                "--set", "optim.lr=3e-3", "--set", "schedule.warmup_steps=10"};
        var first = run(concat(common, "--set", "train.steps=3"));
        assertThat(first.status()).as(first.err()).isZero();
        assertThat(first.out()).contains("BloomForCausalLM");
        var resumed = run(concat(common, "--set", "train.steps=5", "--set", "checkpoint.resume=auto"));
        assertThat(resumed.status()).as(resumed.err()).isZero();
        assertThat(resumed.out()).contains("resuming from").contains("step-00000003").contains("step     4/5");

        // resuming at step 3 continues exactly as an uninterrupted run: the same final loss
        var straight = run("train", "--set", "model.path=" + Golden.dir("bloom"), "--set", "data.train=" + data,
                "--set", "data.seq_len=16", "--set", "train.batch_size=1", "--set", "dist.ranks=2",
                "--set", "train.steps=5", "--set", "optim.lr=3e-3", "--set", "schedule.warmup_steps=10");
        assertThat(straight.status()).as(straight.err()).isZero();
        assertThat(jsonLines(resumed.out()).getLast().get("final_loss").doubleValue())
                .isEqualTo(jsonLines(straight.out()).getLast().get("final_loss").doubleValue());

        Path exported = tmp.resolve("exported");
        var export = run("export", "--checkpoint", ck.toString(), "--out", exported.toString());
        assertThat(export.status()).as(export.err()).isZero();
        JsonNode config = JSON.readTree(exported.resolve("config.json").toFile());
        assertThat(config.get("architectures").get(0).asText()).isEqualTo("BloomForCausalLM");
        assertThat(config.get("n_layer").intValue()).isEqualTo(2);
        assertThat(config.get("n_head").intValue()).isEqualTo(6);
        try (SafetensorsFile weights = SafetensorsFile.open(exported.resolve("model.safetensors"));
             SafetensorsFile original = SafetensorsFile.open(Golden.dir("bloom").resolve("model.safetensors"))) {
            assertThat(weights.names().stream().sorted().toList())
                    .isEqualTo(original.names().stream().sorted().toList());
            assertThat(weights.info("transformer.h.1.self_attention.query_key_value.weight").shape())
                    .containsExactly(3 * 48, 48);
            assertThat(weights.names()).doesNotContain("lm_head.weight"); // tied, as in the original
        }
        double trained = meanLoss(run("score", "--model", exported.toString(), "--data", data.toString()));
        double initial = meanLoss(run("score", "--model", Golden.dir("bloom").toString(), "--data", data.toString()));
        assertThat(trained).isLessThan(initial);
    }

    @Test
    void benchRunsBloom() {
        var r = run("bench", "--warmup", "1", "--steps", "1", "--set", "model.path=" + Golden.dir("bloom"),
                "--set", "data.seq_len=16", "--set", "dist.ranks=2");
        assertThat(r.status()).as(r.err()).isZero();
        JsonNode line = jsonLines(r.out()).getLast();
        assertThat(line.get("params").longValue()).isEqualTo(io.fsdp4j.model.CausalLMs.layout(Golden.config("bloom"))
                .stream().mapToLong(io.fsdp4j.model.UnitLayout::numel).sum());
        assertThat(line.get("loss").doubleValue()).isPositive();
    }

    private static String[] concat(String[] a, String... b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }
}
