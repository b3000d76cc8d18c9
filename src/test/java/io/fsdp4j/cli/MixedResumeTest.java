package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A weighted mix of two datasets ({@code data.train} as a YAML list of {path, weight}), trained on CPU ranks: a run
 * stopped at a checkpoint and resumed continues on the trajectory of a run never stopped, step for step.
 */
class MixedResumeTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    private static void train(Path config, int steps, Path run) {
        var out = new ByteArrayOutputStream();
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8)) {
            int status = Main.execute(new String[] {"train", config.toString(), "--set", "train.steps=" + steps,
                    "--set", "checkpoint.dir=" + run.resolve("checkpoints"), "--set", "checkpoint.resume=auto",
                    "--set", "log.metrics=" + run.resolve("metrics.jsonl")}, o, o, false);
            assertThat(status).as(out.toString(StandardCharsets.UTF_8)).isZero();
        }
    }

    @Test
    void aMixedRunResumedMidEpochContinuesTheExactOrder() throws IOException {
        Path all = Golden.jsonl("qwen2", "train.json", true, tmp);
        List<String> lines = Files.readAllLines(all);
        Path a = Files.write(tmp.resolve("a.jsonl"), lines.subList(0, lines.size() / 2));
        Path b = Files.write(tmp.resolve("b.jsonl"), lines.subList(lines.size() / 2, lines.size()));
        Path config = Files.writeString(tmp.resolve("mix.yaml"), """
                model:
                  path: %s
                data:
                  train:
                    - {path: %s, weight: 3}
                    - {path: %s, weight: 1}
                  seq_len: 16
                train:
                  batch_size: 1
                dist:
                  ranks: 2
                  device: cpu
                optim:
                  lr: 0.003
                schedule:
                  kind: constant
                  warmup_steps: 0
                checkpoint:
                  every: 3
                """.formatted(Golden.dir("qwen2"), a, b));
        Path stopped = tmp.resolve("stopped"), straight = tmp.resolve("straight");
        train(config, 3, stopped);
        train(config, 7, stopped); // resumes from step 3
        train(config, 7, straight);
        List<JsonNode> expected = steps(straight.resolve("metrics.jsonl"));
        List<JsonNode> actual = steps(stopped.resolve("metrics.jsonl"));
        assertThat(expected).hasSize(7);
        // resumed, not started again: the file holds steps 1..3 of the first run, then 4..7
        assertThat(actual.stream().map(s -> s.get("step").intValue()).toList()).containsExactly(1, 2, 3, 4, 5, 6, 7);
        for (int s = 1; s <= 7; s++) {
            JsonNode want = expected.get(s - 1), got = actual.get(s - 1);
            for (String key : List.of("loss", "grad_norm", "loss_tokens")) {
                assertThat(got.get(key)).as("%s at step %d", key, s).isEqualTo(want.get(key));
            }
        }
    }

    private static List<JsonNode> steps(Path metrics) throws IOException {
        List<JsonNode> steps = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) {
            JsonNode node = JSON.readTree(line);
            if (node.has("loss") && node.has("step")) {
                steps.add(node);
            }
        }
        return steps;
    }
}
