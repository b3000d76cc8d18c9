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
    void writesOnePageWithEveryChart() throws IOException {
        List<String> lines = new ArrayList<>();
        lines.add("{\"step\":0,\"eval_loss\":5.5}"); // before training
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

        assertThat(written).containsExactly(out.resolve("run.png"));
        BufferedImage image = ImageIO.read(written.getFirst().toFile());
        assertThat(image.getWidth()).isEqualTo(1600);
        assertThat(image.getHeight()).isEqualTo(940);
        // the four small charts are drawn beneath the loss: none of their quarters is blank
        for (int q = 0; q < 4; q++) {
            assertThat(distinctColours(image, q * 400, 560, 400, 380)).as("chart %d", q).isGreaterThan(3);
        }
    }

    private static int distinctColours(BufferedImage image, int x0, int y0, int w, int h) {
        java.util.Set<Integer> colours = new java.util.HashSet<>();
        for (int y = y0; y < y0 + h; y += 3) {
            for (int x = x0; x < x0 + w; x += 3) {
                colours.add(image.getRGB(x, y));
            }
        }
        return colours.size();
    }

    @Test
    void theSmoothedLossIsACentredMovingAverage() {
        var raw = new Plots.Series(new double[] {1, 2, 3, 4}, new double[] {4, 2, 6, 0});
        var smooth = Plots.smoothed(raw);
        assertThat(smooth.steps()).containsExactly(1, 2, 3, 4);
        assertThat(smooth.values()).containsExactly(3.0, 4.0, 8.0 / 3, 3.0); // one point each side, fewer at the ends
        assertThat(Plots.halfWindow(1000)).isEqualTo(40);
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
        assertThat(Plots.write(file, dir)).containsExactly(dir.resolve("run.png"));
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
