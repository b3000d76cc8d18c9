package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.report.MetricsFile;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a run reports of its loss scale: an overflow's skip says so in one line with the scale before and after it
 * (not as a step that was not finite, and not counted in a row of train.max_bad_steps), and every metrics line of a
 * scaled run has its step's loss_scale; a run without scaling has none.
 */
class LossScaleReportTest {
    @TempDir
    Path tmp;

    private String report(TrainConfig config, Path metrics, StepResult... steps) throws IOException {
        var bytes = new ByteArrayOutputStream();
        try (var out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
             MetricsFile file = MetricsFile.create(metrics);
             var report = new RunReport(config, Golden.config("llama"), 1000, 1, 0, file, step -> false, false, out)) {
            for (StepResult s : steps) {
                report.onStep(s, 0.5, -1);
            }
        }
        return bytes.toString(StandardCharsets.UTF_8);
    }

    @Test
    void anOverflowIsReportedWithTheScaleBeforeAndAfter() throws IOException {
        TrainConfig config = TrainConfig.load(null, List.of("fsdp.param_dtype=fp16", "train.steps=3", "log.every=1"));
        Path metrics = tmp.resolve("metrics.jsonl");
        String out = report(config, metrics,
                new StepResult(1, 2.5, Double.POSITIVE_INFINITY, 1e-3, 64, 60, true, 65536, true),
                new StepResult(2, Double.NaN, Double.NaN, 1e-3, 64, 60, true, 32768, false),
                new StepResult(3, 2.4, 1.5, 1e-3, 64, 60, false, 16384, false));
        assertThat(out).contains("fsdp4j: step 1 skipped: the gradients overflowed at loss scale 65536 (not finite on "
                + "some rank: no rank updated its shards); loss scale now 32768")
                .contains("fsdp4j: step 2 skipped: loss NaN, gradient norm NaN (not finite: no rank updated its shards); "
                        + "1 in a row of train.max_bad_steps=3");
        List<JsonNode> lines = Files.readAllLines(metrics).stream().map(LossScaleReportTest::json).toList();
        assertThat(lines).extracting(l -> l.get("loss_scale").doubleValue()).containsExactly(65536.0, 32768.0, 16384.0);
        assertThat(lines.getLast().get("skipped_steps").intValue()).isEqualTo(2);
    }

    @Test
    void aRunWithoutScalingLogsNoScale() throws IOException {
        Path metrics = tmp.resolve("plain.jsonl");
        report(TrainConfig.load(null, List.of("train.steps=1")), metrics, new StepResult(1, 2.5, 1.0, 1e-3, 64, 60, false));
        assertThat(json(Files.readAllLines(metrics).getFirst()).has("loss_scale")).isFalse();
    }

    private static JsonNode json(String line) {
        try {
            return new ObjectMapper().readTree(line);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
