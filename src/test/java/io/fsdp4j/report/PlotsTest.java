package io.fsdp4j.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PlotsTest {
    @TempDir
    Path dir;

    private Path metrics(List<String> lines) throws IOException {
        return Files.write(dir.resolve("metrics.jsonl"), lines);
    }

    private static String record(int step, String loss) {
        return String.format(Locale.ROOT, "{\"step\":%d,\"loss\":%s,\"grad_norm\":%.3f,\"lr\":%.6f,\"tokens\":512,"
                + "\"tok_s\":%.1f,\"mfu\":null,\"peak_reserved_gib\":%.3f}", step, loss, 1.0 / step,
                1e-3 * Math.min(1, step / 5.0), 1000.0 + step, 0.5 + 0.01 * Math.min(step, 10));
    }

    @Test
    void writesOnePngPerKey() throws IOException {
        List<String> lines = new ArrayList<>();
        for (int s = 1; s <= 60; s++) {
            lines.add(record(s, String.format(Locale.ROOT, "%.4f", 5.0 / Math.sqrt(s))));
        }
        lines.add(record(61, "NaN")); // a diverged step: left out of the loss chart
        lines.add("{\"step\":30,\"eval_loss\":2.5}");
        lines.add("{\"step\":60,\"eval_loss\":2.1}");
        lines.add("");
        lines.add("{\"summary\":true,\"tokens\":30720}"); // no step: skipped
        Path out = dir.resolve("plots");

        List<Path> written = Plots.write(metrics(lines), out);

        assertThat(written).containsExactly(out.resolve("loss.png"), out.resolve("grad_norm.png"),
                out.resolve("lr.png"), out.resolve("tok_s.png"), out.resolve("peak_reserved_gib.png"),
                out.resolve("eval_loss.png"));
        for (Path png : written) {
            BufferedImage image = ImageIO.read(png.toFile());
            assertThat(image.getWidth()).isEqualTo(800);
            assertThat(image.getHeight()).isEqualTo(500);
        }
    }

    @Test
    void seriesSkipsNonFiniteAndMissingValues() {
        var records = Plots.read(writeUnchecked(List.of(record(1, "2.0"), record(2, "NaN"), "{\"step\":3}",
                record(4, "1.0"))));
        var loss = Plots.series(records, "loss");
        assertThat(loss.steps()).containsExactly(1, 4);
        assertThat(loss.values()).containsExactly(2.0, 1.0);
    }

    @Test
    void keysAbsentFromTheFileGetNoChart() throws IOException {
        Path file = metrics(List.of("{\"step\":1,\"loss\":2.0}", "{\"step\":2,\"loss\":1.5}"));
        assertThat(Plots.write(file, dir)).containsExactly(dir.resolve("loss.png"));
    }

    @Test
    void badInputIsAUserError() throws IOException {
        Path bad = metrics(List.of("{\"step\":1,\"loss\":2.0}", "{\"step\":2,"));
        assertThatThrownBy(() -> Plots.write(bad, dir)).isInstanceOf(UserError.class)
                .hasMessageStartingWith(bad + ":2: not a JSON object");
        Path empty = metrics(List.of());
        assertThatThrownBy(() -> Plots.write(empty, dir)).isInstanceOf(UserError.class)
                .hasMessageContaining("no step records");
        assertThatThrownBy(() -> Plots.write(dir.resolve("missing.jsonl"), dir)).isInstanceOf(UserError.class)
                .hasMessageContaining("cannot read metrics file");
    }

    private Path writeUnchecked(List<String> lines) {
        try {
            return metrics(lines);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
