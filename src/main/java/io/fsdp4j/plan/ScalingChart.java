package io.fsdp4j.plan;

import io.fsdp4j.UserError;
import io.fsdp4j.config.ShardingStrategy;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * {@code --plot FILE.png}: predicted tokens/s against GPU count, one line per strategy, both axes logarithmic;
 * counts where a strategy does not fit are left out of its line. Drawn headless, like the training plots
 * ({@link io.fsdp4j.report.Plots}): Java needs fontconfig and one font.
 */
public final class ScalingChart {
    private static final int WIDTH = 900, HEIGHT = 560;

    static {
        if (System.getProperty("java.awt.headless") == null) {
            System.setProperty("java.awt.headless", "true");
        }
    }

    private ScalingChart() {}

    public static void write(Path file, String title, Map<Integer, Map<ShardingStrategy, Double>> scaling) {
        try {
            Path parent = file.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            XYChart chart = new XYChartBuilder().width(WIDTH).height(HEIGHT).title(title)
                    .xAxisTitle("GPUs").yAxisTitle("tokens / s (predicted)").build();
            chart.getStyler().setChartBackgroundColor(Color.WHITE);
            chart.getStyler().setXAxisLogarithmic(true);
            chart.getStyler().setYAxisLogarithmic(true);
            chart.getStyler().setXAxisDecimalPattern("#,###");
            chart.getStyler().setYAxisDecimalPattern("#,###");
            int lines = 0;
            for (ShardingStrategy s : ShardingStrategy.values()) {
                List<Double> x = new ArrayList<>(), y = new ArrayList<>();
                scaling.forEach((gpus, row) -> {
                    double v = row.getOrDefault(s, Double.NaN);
                    if (Double.isFinite(v) && v > 0) {
                        x.add((double) gpus);
                        y.add(v);
                    }
                });
                if (!x.isEmpty()) {
                    XYSeries series = chart.addSeries(s.spelling(), x, y);
                    series.setMarker(SeriesMarkers.CIRCLE);
                    lines++;
                }
            }
            if (lines == 0) {
                throw new UserError("nothing to plot: no strategy fits at any GPU count");
            }
            ImageIO.write(BitmapEncoder.getBufferedImage(chart), "png", file.toFile());
        } catch (IOException e) {
            throw new UserError("cannot write plot " + file + ": " + e.getMessage());
        } catch (RuntimeException | LinkageError | InternalError e) {
            if (e instanceof UserError || !(e instanceof Error || fontProblem(e))) {
                throw e;
            }
            throw new UserError("cannot draw the plot: Java found no usable font (install fontconfig and a font, "
                    + "e.g. fonts-dejavu-core): " + e, e);
        }
    }

    /** A missing font or fontconfig surfaces as an exception thrown from the JDK's font code. */
    private static boolean fontProblem(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            for (StackTraceElement frame : t.getStackTrace()) {
                if (frame.getClassName().startsWith("sun.font.")) {
                    return true;
                }
            }
        }
        return false;
    }
}
