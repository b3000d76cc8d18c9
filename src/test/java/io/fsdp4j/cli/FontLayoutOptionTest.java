package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.report.Plots;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * bin/fsdp4j runs the JVM with Java2D's JNI binding of HarfBuzz ({@code sun.font.layout.ffm=false}), whose first use
 * costs less than the FFM one's: the plots it draws must be the same bytes either way.
 */
class FontLayoutOptionTest {
    @TempDir
    Path dir;

    @Test
    void binFsdp4jPassesTheOption() throws IOException {
        assertThat(Files.readString(Path.of("bin/fsdp4j"))).contains("font=(-Dsun.font.layout.ffm=false)")
                .contains("\"${font[@]}\" ${FSDP4J_JAVA_OPTS:-}");
    }

    @Test
    void bothBindingsDrawTheSamePlot() throws Exception {
        List<String> lines = new ArrayList<>();
        lines.add("{\"step\":0,\"eval_loss\":5.5}");
        for (int s = 1; s <= 40; s++) {
            lines.add(String.format(Locale.ROOT, "{\"step\":%d,\"loss\":%.4f,\"grad_norm\":%.3f,\"lr\":0.001,"
                    + "\"tokens\":512,\"tok_s\":%.1f,\"peak_heap_gib\":0.5}", s, 5.0 / Math.sqrt(s), 1.0 / s, 900.0 + s));
        }
        lines.add("{\"step\":40,\"eval_loss\":2.1}");
        Path metrics = Files.write(dir.resolve("metrics.jsonl"), lines);
        byte[] ffm = plot(metrics, "true"), jni = plot(metrics, "false");
        assertThat(jni).isNotEmpty().isEqualTo(ffm);
    }

    /** The page {@link Plots#write} draws of {@code metrics} in a JVM of its own with the given binding. */
    private byte[] plot(Path metrics, String ffm) throws Exception {
        Path out = dir.resolve("plots-" + ffm);
        Path log = dir.resolve("log-" + ffm);
        Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Dsun.font.layout.ffm=" + ffm, "-cp", System.getProperty("java.class.path"), Draw.class.getName(),
                metrics.toString(), out.toString()).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(Files.readString(log)).isZero();
        return Files.readAllBytes(out.resolve(Plots.PAGE));
    }

    /** Draws the plots of a metrics file (args: the file, the output directory). */
    public static final class Draw {
        public static void main(String[] args) {
            Plots.write(Path.of(args[0]), Path.of(args[1]));
        }
    }
}
