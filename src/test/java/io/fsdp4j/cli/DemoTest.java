package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.hf.HfConfig;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.safetensors.SafetensorsFile;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The README's main command, {@code fsdp4j train} with no config, shortened to a few steps: it fine-tunes on the
 * shipped instructions, evaluates the held-out split before and after (the loss falls measurably), and leaves a
 * checkpoint, metrics and a Hugging Face export in the run directory that its summary names.
 */
class DemoTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    @Test
    void theDemoFineTunesEvaluatesSavesAndExports() throws IOException {
        Path run = tmp.resolve("run");
        CommandsEndToEndTest.Run r = CommandsEndToEndTest.run("train", "--set", "train.steps=20",
                "--set", "train.batch_size=2", "--set", "checkpoint.dir=" + run.resolve("checkpoints"),
                "--set", "log.metrics=" + run.resolve("metrics.jsonl"), "--set", "dist.device=cpu");
        assertThat(r.status()).as(r.err()).isZero();
        assertThat(r.out()).contains("demo:", "held-out before training", "held-out after training",
                "built-in demo instructions", "(expected ");
        JsonNode summary = JSON.readTree(r.out().lines().reduce((a, b) -> b).orElseThrow());
        assertThat(summary.get("run_dir").asText()).isEqualTo(run.toAbsolutePath().toString());
        JsonNode before = summary.get("eval_before"), after = summary.get("eval_after");
        assertThat(before.get("loss").doubleValue()).isCloseTo(Math.log(256), org.assertj.core.data.Offset.offset(0.2));
        assertThat(after.get("loss").doubleValue()).as("held-out loss after 20 steps")
                .isLessThan(before.get("loss").doubleValue() - 1.0);
        assertThat(after.get("perplexity").doubleValue()).isLessThan(before.get("perplexity").doubleValue() / 2.5);
        assertThat(after.get("examples").intValue()).isEqualTo(100);

        assertThat(run.resolve("checkpoints/step-00000020/index.json")).exists();
        assertThat(summary.get("checkpoint").asText()).endsWith("step-00000020");
        Path export = Path.of(summary.get("export").asText());
        assertThat(export).isEqualTo(run.toAbsolutePath().resolve("export"));
        assertThat(HfConfig.read(export)).isEqualTo(ModelConfig.tiny());
        try (var weights = SafetensorsFile.open(export.resolve("model.safetensors"))) {
            assertThat(weights.contains("model.embed_tokens.weight")).isTrue();
        }
        List<JsonNode> metrics = Files.readAllLines(run.resolve("metrics.jsonl")).stream().map(DemoTest::parse).toList();
        // one line a step, each with every key the interface promises; the last one carries the evaluation after
        // training (the one before is in the summary)
        assertThat(metrics).hasSize(20);
        for (JsonNode m : metrics) {
            for (String key : List.of("step", "loss", "grad_norm", "lr", "tokens", "tok_s", "tok_s_rank",
                    "peak_heap_gib")) {
                assertThat(m.has(key)).as("step %s has %s", m.get("step"), key).isTrue();
            }
            // CPU ranks: the interface's keys too, mfu null (no peak rate), the rate per rank, the heap as memory
            assertThat(m.get("mfu").isNull()).isTrue();
            assertThat(m.get("tok_s_gpu").doubleValue()).isEqualTo(m.get("tok_s_rank").doubleValue());
            assertThat(m.get("peak_reserved_gib").doubleValue()).isEqualTo(m.get("peak_heap_gib").doubleValue());
        }
        assertThat(metrics.getFirst().get("step").intValue()).isEqualTo(1);
        assertThat(metrics.getLast().get("step").intValue()).isEqualTo(20);
        assertThat(metrics.getLast().get("eval_loss").doubleValue()).isEqualTo(after.get("loss").doubleValue());
        assertThat(metrics.getLast().get("eval_exact_match").doubleValue()).isEqualTo(after.get("exact_match").doubleValue());
        assertThat(metrics.stream().filter(m -> m.has("eval_loss"))).hasSize(1);

        // run again into the same run directory: refused before any work, the export is kept
        CommandsEndToEndTest.Run again = CommandsEndToEndTest.run("train", "--set", "train.steps=21",
                "--set", "checkpoint.dir=" + run.resolve("checkpoints"), "--set", "log.metrics=" + tmp.resolve("m.jsonl"));
        again.failsWith("export", "exists already");
        assertThat(export.resolve("model.safetensors")).exists();
    }

    @Test
    void theDemoSettingsAreShownAndAnySetOverridesThem() throws IOException {
        CommandsEndToEndTest.Run r = CommandsEndToEndTest.run("train", "--print-config", "--set", "train.steps=7");
        JsonNode config = JSON.readTree(r.out());
        assertThat(config.at("/train/steps").intValue()).isEqualTo(7);
        assertThat(config.at("/train/batch_size").intValue()).isEqualTo(8);
        assertThat(config.at("/checkpoint/dir").asText()).matches("runs/demo-\\d{8}-\\d{6}/checkpoints");
        assertThat(config.at("/log/metrics").asText()).matches("runs/demo-\\d{8}-\\d{6}/metrics.jsonl");
        // a process of a multi-process job leaves the run directory to checkpoint.dir (each would name its own)
        var clock = java.time.Clock.fixed(java.time.Instant.parse("2026-11-23T18:00:00Z"), java.time.ZoneOffset.UTC);
        assertThat(io.fsdp4j.train.Demo.settings(clock, java.util.Map.of(), null))
                .contains("checkpoint.dir=runs/demo-20261123-180000/checkpoints");
        assertThat(io.fsdp4j.train.Demo.settings(clock, java.util.Map.of("WORLD_SIZE", "2"), null))
                .noneMatch(s -> s.startsWith("checkpoint.") || s.startsWith("log.")).contains("train.batch_size=8");
        // a run.dir given is the demo's one run directory: its checkpoints and metrics go there too
        Path mine = tmp.resolve("mine");
        JsonNode inMine = JSON.readTree(CommandsEndToEndTest.run("train", "--print-config", "--set", "run.dir=" + mine)
                .out());
        assertThat(inMine.at("/checkpoint/dir").asText()).isEqualTo(mine.resolve("checkpoints").toString());
        assertThat(inMine.at("/log/metrics").asText()).isEqualTo(mine.resolve("metrics.jsonl").toString());
        // with data.train, nothing of the demo is applied: a run directory of the model's name
        Path data = Files.writeString(tmp.resolve("x.jsonl"), "{\"input_ids\": [1, 2, 3]}\n");
        JsonNode plain = JSON.readTree(CommandsEndToEndTest.run("train", "--print-config", "--set", "data.train=" + data)
                .out());
        assertThat(plain.at("/train/batch_size").intValue()).isEqualTo(2);
        assertThat(plain.at("/checkpoint/dir").asText()).matches("runs/tiny-\\d{8}-\\d{6}(-\\d+)?/checkpoints");
    }

    private static JsonNode parse(String line) {
        try {
            return JSON.readTree(line);
        } catch (IOException e) {
            throw new AssertionError(line, e);
        }
    }
}
