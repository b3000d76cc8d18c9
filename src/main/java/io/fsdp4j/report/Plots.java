package io.fsdp4j.report;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import io.fsdp4j.UserError;
import java.awt.Color;
import java.awt.Graphics2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.imageio.ImageIO;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.lines.SeriesLines;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * One PNG page of a run's metrics JSONL ({@code log.metrics}), {@code run.png}, read at a glance: on top the
 * training loss (each step's, faint, and smoothed) with the held-out loss ({@code eval_loss}: before training, every
 * {@code log.eval_every} steps and after) on the same axes; beneath it the gradient norm, the learning rate, tokens
 * per second and peak memory (GPU memory reserved, or the Java heap on CPU ranks). Ticks are round numbers. Drawn
 * headless: no display is needed, but Java needs a font (fontconfig and one font, e.g. Debian's
 * {@code fonts-dejavu-core}).
 */
public final class Plots {
    /** The small charts beneath the loss: the key, its title and its tick pattern. */
    static final List<String[]> SMALL = List.of(
            new String[] {"grad_norm", "gradient norm (before clipping)", "#,##0.###"},
            new String[] {"lr", "learning rate", "0.0#E0"},
            new String[] {"tok_s", "tokens / s", "#,##0"},
            new String[] {"peak_reserved_gib", "peak GPU memory reserved, GiB", "#,##0.##"},
            new String[] {"peak_heap_gib", "peak Java heap in use, GiB", "#,##0.##"});
    /** The page's file name. */
    public static final String PAGE = "run.png";
    private static final int WIDTH = 1600, LOSS_HEIGHT = 560, SMALL_HEIGHT = 380;
    /** Reads a bare {@code NaN} too (Jackson writes non-finite numbers as strings, which are skipped). */
    private static final ObjectMapper JSON = JsonMapper.builder()
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build();

    static {
        // Before anything loads AWT: never look for a display (an unreachable DISPLAY would fail the run).
        if (System.getProperty("java.awt.headless") == null) {
            System.setProperty("java.awt.headless", "true");
        }
    }

    private Plots() {}

    /**
     * Writes the page {@link #PAGE} of the metrics in {@code outDir}; records without a {@code step} (such as a
     * summary line) are skipped, and so are non-finite values (a diverged loss). A chart whose key no record has is
     * left out of the page.
     *
     * @return the files written
     * @throws UserError when the file cannot be read, a line is not JSON, or no record has a step
     */
    public static List<Path> write(Path metricsJsonl, Path outDir) {
        List<JsonNode> records = read(metricsJsonl);
        if (records.isEmpty()) {
            throw new UserError("no step records (JSON lines with \"step\") in " + metricsJsonl);
        }
        try {
            Files.createDirectories(outDir);
        } catch (IOException e) {
            throw new UserError("cannot create the plot directory " + outDir + ": " + e.getMessage());
        }
        Path file = outDir.resolve(PAGE);
        Path parent = metricsJsonl.toAbsolutePath().getParent();
        String run = parent == null || parent.getFileName() == null ? metricsJsonl.getFileName().toString()
                : parent.getFileName().toString();
        try {
            List<XYChart> small = new ArrayList<>();
            for (String[] chart : SMALL) {
                Series series = series(records, chart[0]);
                if (series.steps().length > 0) {
                    small.add(chart(WIDTH / 4, SMALL_HEIGHT, chart[1], chart[2], List.of(new Line(chart[1], series,
                            false, true))));
                }
            }
            XYChart loss = lossChart(records, run);
            BufferedImage page = new BufferedImage(WIDTH, LOSS_HEIGHT + SMALL_HEIGHT, BufferedImage.TYPE_INT_RGB);
            Graphics2D g = page.createGraphics();
            g.setColor(Color.WHITE);
            g.fillRect(0, 0, page.getWidth(), page.getHeight());
            if (loss != null) {
                g.drawImage(BitmapEncoder.getBufferedImage(loss), 0, 0, null);
            }
            for (int i = 0; i < small.size() && i < 4; i++) {
                g.drawImage(BitmapEncoder.getBufferedImage(small.get(i)), i * WIDTH / 4, LOSS_HEIGHT, null);
            }
            g.dispose();
            ImageIO.write(page, "png", file.toFile());
        } catch (IOException e) {
            throw new UserError("cannot write plot " + file + ": " + e.getMessage());
        } catch (RuntimeException | LinkageError | InternalError e) {
            deleteQuietly(file);
            if (fontProblem(e)) {
                throw new UserError("cannot draw plots: Java found no usable font (install fontconfig and a font, "
                        + "e.g. fonts-dejavu-core): " + e, e);
            }
            throw e;
        }
        return List.of(file);
    }

    /** The loss chart: training loss raw and smoothed, held-out loss; null when the file has neither. */
    private static XYChart lossChart(List<JsonNode> records, String run) {
        Series train = series(records, "loss"), heldOut = series(records, "eval_loss");
        List<Line> lines = new ArrayList<>();
        if (train.steps().length > 0) {
            lines.add(new Line("training loss", train, true, train.steps().length <= 50));
            if (train.steps().length >= 3) {
                lines.add(new Line("training loss, smoothed", smoothed(train), false, false));
            }
        }
        if (heldOut.steps().length > 0) {
            lines.add(new Line("held-out loss", heldOut, false, true));
        }
        return lines.isEmpty() ? null : chart(WIDTH, LOSS_HEIGHT, run + ": loss", "#,##0.###", lines);
    }

    /** One line of a chart: faint lines are drawn thin and pale, behind the others. */
    private record Line(String name, Series series, boolean faint, boolean markers) {}

    private static XYChart chart(int width, int height, String title, String yPattern, List<Line> lines) {
        XYChart chart = new XYChartBuilder().width(width).height(height).title(title).xAxisTitle("step").build();
        var styler = chart.getStyler();
        styler.setChartBackgroundColor(Color.WHITE);
        styler.setLegendVisible(lines.size() > 1);
        styler.setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNE);
        styler.setYAxisDecimalPattern(yPattern);
        styler.setXAxisDecimalPattern("#,##0");
        Color[] colours = {new Color(31, 119, 180), new Color(31, 119, 180), new Color(214, 39, 40)};
        int i = 0;
        double[] firstX = null, firstY = null;
        for (Line line : lines) {
            XYSeries s = chart.addSeries(line.name(), line.series().steps(), line.series().values());
            Color colour = line.faint() ? new Color(31, 119, 180, 70) : colours[Math.min(i, colours.length - 1)];
            s.setLineColor(colour);
            s.setMarkerColor(colour);
            s.setMarker(line.markers() ? SeriesMarkers.CIRCLE : SeriesMarkers.NONE);
            if (line.faint()) {
                s.setLineWidth(1f);
            }
            if (firstX == null) {
                firstX = line.series().steps();
                firstY = line.series().values();
            }
            i++;
        }
        if (firstX != null && firstX.length >= 2) {
            // XChart labels every point of equally spaced x values, which run together (knowm/XChart#731);
            // one invisible point off that grid brings back round-number ticks
            XYSeries offGrid = chart.addSeries(" ", new double[] {(firstX[0] + firstX[1]) / 2}, new double[] {firstY[0]});
            offGrid.setMarker(SeriesMarkers.NONE);
            offGrid.setLineStyle(SeriesLines.NONE);
            offGrid.setShowInLegend(false);
        }
        return chart;
    }

    /**
     * The values averaged over a window centred on each point (a twentieth-odd of the points on each side, at least
     * one; shorter at the ends): the trend, without the lag of a moving average that looks only back.
     */
    static Series smoothed(Series raw) {
        double[] v = raw.values(), out = new double[v.length];
        int half = halfWindow(v.length);
        for (int i = 0; i < v.length; i++) {
            int from = Math.max(0, i - half), to = Math.min(v.length - 1, i + half);
            double sum = 0;
            for (int j = from; j <= to; j++) {
                sum += v[j];
            }
            out[i] = sum / (to - from + 1);
        }
        return new Series(raw.steps(), out);
    }

    /** Points on each side of the smoothing window of {@code n} points. */
    static int halfWindow(int n) {
        return Math.max(1, n / 25);
    }

    /** The (step, value) points of one key, in file order. */
    record Series(double[] steps, double[] values) {}

    static Series series(List<JsonNode> records, String key) {
        var steps = new ArrayList<Double>();
        var values = new ArrayList<Double>();
        for (JsonNode r : records) {
            JsonNode v = r.get(key);
            if (v != null && v.isNumber() && Double.isFinite(v.doubleValue())) {
                steps.add(r.get("step").doubleValue());
                values.add(v.doubleValue());
            }
        }
        return new Series(steps.stream().mapToDouble(Double::doubleValue).toArray(),
                values.stream().mapToDouble(Double::doubleValue).toArray());
    }

    static List<JsonNode> read(Path metricsJsonl) {
        List<String> lines;
        try {
            lines = Files.readAllLines(metricsJsonl);
        } catch (IOException e) {
            throw new UserError("cannot read metrics file " + metricsJsonl + ": " + e.getMessage());
        }
        List<JsonNode> records = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i).strip();
            if (line.isEmpty()) {
                continue;
            }
            JsonNode node;
            try {
                node = JSON.readTree(line);
            } catch (JsonProcessingException e) {
                throw new UserError(metricsJsonl + ":" + (i + 1) + ": not a JSON object: "
                        + e.getOriginalMessage());
            }
            if (node.isObject() && node.path("step").isNumber()) {
                records.add(node);
            }
        }
        return records;
    }

    private static void deleteQuietly(Path file) {
        try {
            Files.deleteIfExists(file);
        } catch (IOException ignored) {
            // the error being reported matters more than a half-written file
        }
    }

    /** A missing font or fontconfig surfaces as an error thrown from inside the JDK's font code. */
    private static boolean fontProblem(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof UnsatisfiedLinkError || String.valueOf(t.getMessage()).toLowerCase().contains("font")) {
                return true;
            }
            for (StackTraceElement frame : t.getStackTrace()) {
                if (frame.getClassName().startsWith("sun.font.")
                        || frame.getClassName().startsWith("sun.awt.FontConfiguration")) {
                    return true;
                }
            }
        }
        return false;
    }
}
