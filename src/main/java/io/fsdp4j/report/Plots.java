package io.fsdp4j.report;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import io.fsdp4j.UserError;
import java.awt.Color;
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
 * PNG charts of a metrics JSONL ({@code log.metrics}): one per key against {@code step}, named after the key
 * ({@code loss.png}, {@code grad_norm.png}, {@code lr.png}, {@code tok_s.png}, {@code peak_reserved_gib.png}, and
 * {@code eval_loss.png} when the run evaluated held-out data). Drawn headless: no display is
 * needed, but Java needs a font (fontconfig and one font, e.g. Debian's {@code fonts-dejavu-core}).
 */
public final class Plots {
    /** The keys plotted, in order, with the y-axis title of each. */
    static final List<String[]> CHARTS = List.of(
            new String[] {"loss", "loss"},
            new String[] {"grad_norm", "gradient norm (before clipping)"},
            new String[] {"lr", "learning rate"},
            new String[] {"tok_s", "tokens / s"},
            new String[] {"peak_reserved_gib", "peak GPU memory reserved, GiB"},
            new String[] {"peak_heap_gib", "peak Java heap in use, GiB"},
            new String[] {"eval_loss", "held-out loss"});
    private static final int WIDTH = 800, HEIGHT = 500;
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
     * Writes a chart for each plotted key that has a finite value in some record; records without a {@code step}
     * (such as a summary line) are skipped, and so are non-finite values (a diverged loss).
     *
     * @return the files written, in the order of {@link #CHARTS}
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
        List<Path> written = new ArrayList<>();
        for (String[] chart : CHARTS) {
            Series series = series(records, chart[0]);
            if (series.steps().length == 0) {
                continue;
            }
            Path file = outDir.resolve(chart[0] + ".png");
            draw(series, chart[0], chart[1], metricsJsonl.getFileName() + ": " + chart[1], file);
            written.add(file);
        }
        return written;
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

    private static void draw(Series series, String key, String yTitle, String title, Path file) {
        try {
            XYChart chart = new XYChartBuilder().width(WIDTH).height(HEIGHT).title(title)
                    .xAxisTitle("step").yAxisTitle(yTitle).build();
            chart.getStyler().setLegendVisible(false);
            chart.getStyler().setChartBackgroundColor(Color.WHITE);
            if (key.equals("lr")) {
                chart.getStyler().setYAxisDecimalPattern("0.0##E0"); // 3e-5 would otherwise read 0
            }
            XYSeries s = chart.addSeries(yTitle, series.steps(), series.values());
            s.setMarker(series.steps().length > 50 ? SeriesMarkers.NONE : SeriesMarkers.CIRCLE);
            if (series.steps().length >= 3) {
                // XChart labels every point of equally spaced x values, which run together (knowm/XChart#731);
                // one invisible point off that grid brings back round-number ticks
                double[] x = series.steps();
                XYSeries offGrid = chart.addSeries(" ", new double[] {(x[0] + x[1]) / 2},
                        new double[] {series.values()[0]});
                offGrid.setMarker(SeriesMarkers.NONE);
                offGrid.setLineStyle(SeriesLines.NONE);
                offGrid.setShowInLegend(false);
            }
            ImageIO.write(BitmapEncoder.getBufferedImage(chart), "png", file.toFile());
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
