package io.fsdp4j.report;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Plain lines and the bar, drawn into a buffer with a clock the test moves: no terminal, no waiting. */
class StepReporterTest {
    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    private final PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
    private long now;

    private String printed() {
        return bytes.toString(StandardCharsets.UTF_8);
    }

    private StepReporter reporter(int total, int every, boolean interactive) {
        return new StepReporter(total, every, out, interactive, 80, () -> now);
    }

    @Test
    void plainLinesEveryLogStepAndAtTheLast() {
        try (var r = reporter(25, 10, false)) {
            for (int s = 1; s <= 25; s++) {
                r.step(s, 4.1234, 1.234, 3e-3, 1234);
            }
        }
        assertThat(printed()).isEqualTo(String.join(System.lineSeparator(),
                "step    10/25  loss 4.1234  grad_norm 1.234  lr 3.00e-03  tok/s 1234  elapsed 0:00  eta 0:00",
                "step    20/25  loss 4.1234  grad_norm 1.234  lr 3.00e-03  tok/s 1234  elapsed 0:00  eta 0:00",
                "step    25/25  loss 4.1234  grad_norm 1.234  lr 3.00e-03  tok/s 1234  elapsed 0:00", ""));
    }

    @Test
    void plainModeTakesStepMetricsToo() {
        try (var r = reporter(2, 1, false)) {
            r.step(StepMetrics.of(1, 5.5, 0.5, 1e-4, 2048, 2000, 2.0, 2, Double.NaN, 0.25));
        }
        assertThat(printed()).isEqualTo("step     1/2  loss 5.5000  grad_norm 0.500  lr 1.00e-04  tok/s 1024"
                + "  tokens 2.0k  elapsed 0:00  eta 0:00" + System.lineSeparator());
    }

    @Test
    void barIsRedrawnInPlaceAndEndedByClose() {
        try (var r = reporter(4, 1, true)) {
            for (int s = 1; s <= 4; s++) {
                now += 2_000_000_000L; // two seconds a step
                r.step(s, 3.0, 1.0, 1e-3, 500);
            }
            assertThat(printed()).doesNotContain("\n");
        }
        String[] frames = printed().split("\r", -1);
        assertThat(frames).hasSize(5); // "" then one frame per step
        assertThat(frames[1]).startsWith("step 1/4 [").contains("  25%  loss 3.0000  tok/s 500  0:02 eta 0:06");
        // from the second step on, the time per step is measured from the first step, not from the start
        assertThat(frames[2]).contains("  50%").endsWith("eta 0:04");
        assertThat(frames[4]).containsPattern("\\[=+\\] 100%");
        assertThat(frames[4].stripTrailing()).endsWith("took 0:08"); // spaces clear the longer frame before
        assertThat(frames[1]).hasSize(75); // 80 columns, less 1, less 4 kept for numbers that grow
        for (int i = 1; i < frames.length; i++) {
            assertThat(frames[i].stripTrailing().length()).isLessThan(80);
            assertThat(frames[i].indexOf(']')).isEqualTo(frames[1].indexOf(']')); // the bar never shifts
        }
    }

    @Test
    void barFillFollowsTheFraction() {
        var r = reporter(100, 1, true);
        String line = r.barLine(42, 2.5, 1000, 83, 0);
        assertThat(line).isEqualTo("step  42/100 [======>        ]  42%  loss 2.5000  tok/s 1000  0:00 eta 1:23")
                .hasSize(75);
        // the width stays: a longer line later grows into the columns kept free
        assertThat(r.barLine(50, 12.5, 100000, 83, 0)).contains("[=======>       ]").hasSize(78);
        var wide = new StepReporter(100, 1, out, true, 200, () -> now);
        assertThat(wide.barLine(42, 2.5, 1000, 83, 0)).contains("[============>                 ]"); // at most 30
        assertThat(new StepReporter(100, 1, out, true, 80, () -> now).barLine(0, 2.5, 1000, Double.POSITIVE_INFINITY, 0))
                .contains("[>    ").endsWith("eta --:--");
    }

    @Test
    void narrowTerminalsKeepAMinimalBar() {
        var r = new StepReporter(100, 1, out, true, 40, () -> now);
        assertThat(r.barLine(50, 2.5, 1000, 10, 0)).contains("[=====>    ]");
    }

    @Test
    void redrawsAreThrottledButTheLastStepIsAlwaysDrawn() {
        try (var r = reporter(1000, 1, true)) {
            for (int s = 1; s <= 1000; s++) {
                now += 1_000_000L; // 1 ms a step: a redraw every 100 steps
                r.step(s, 1.0, 1.0, 1e-3, 1);
            }
        }
        long frames = printed().chars().filter(c -> c == '\r').count();
        assertThat(frames).isBetween(10L, 12L);
        assertThat(printed()).contains("step 1000/1000 [");
    }

    @Test
    void aShorterLineClearsTheRestOfTheLongerOne() {
        try (var r = new StepReporter(10, 1, out, true, 200, () -> now)) {
            now += StepReporter.REDRAW_NANOS;
            r.step(1, 10.0, 1, 1, 123456789);
            now += StepReporter.REDRAW_NANOS;
            r.step(2, 1.0, 1, 1, 1);
        }
        String[] frames = printed().split("\r");
        assertThat(frames[2].stripTrailing().length()).isLessThan(frames[1].length());
        assertThat(frames[2].replace(System.lineSeparator(), "")).hasSameSizeAs(frames[1]);
    }

    @Test
    void printlnWritesAboveTheBar() {
        try (var r = reporter(10, 1, true)) {
            now += StepReporter.REDRAW_NANOS;
            r.step(1, 1.0, 1, 1, 1);
            r.println("checkpoint saved");
        }
        String text = printed();
        String bar = text.substring(1, text.indexOf('\r', 1));
        assertThat(text).isEqualTo("\r" + bar + "\r" + " ".repeat(bar.length()) + "\r" + "checkpoint saved"
                + System.lineSeparator() + bar + System.lineSeparator());
    }

    @Test
    void aResumedRunCountsItsOwnSteps() {
        try (var r = reporter(100, 1, true)) {
            now += 5_000_000_000L;
            r.step(51, 1.0, 1, 1, 1);
            now += 1_000_000_000L;
            r.step(52, 1.0, 1, 1, 1); // 1 s a step since step 51: 48 steps left
            assertThat(printed()).endsWith("eta 0:48");
        }
    }

    @Test
    void plainModeNeverDrawsOrAddsAnythingOnClose() {
        var r = reporter(3, 5, false);
        r.println("hello");
        r.close();
        r.close();
        assertThat(printed()).isEqualTo("hello" + System.lineSeparator());
    }

    @Test
    void durations() {
        assertThat(StepReporter.duration(0)).isEqualTo("0:00");
        assertThat(StepReporter.duration(83.4)).isEqualTo("1:23");
        assertThat(StepReporter.duration(3600 + 62)).isEqualTo("1:01:02");
        assertThat(StepReporter.duration(-5)).isEqualTo("0:00");
    }

    @Test
    void plainLinesAndTheBarShowTheEpochTheTokensAndTheTimes() {
        try (var r = reporter(10, 5, false).epochs(4)) { // 4 steps a pass over the data
            for (int s = 1; s <= 10; s++) {
                now += 1_000_000_000L;
                r.step(StepMetrics.of(s, 2.0, 1.0, 1e-3, 4096, 4000, 1.0, 2, Double.NaN, 0.5, false));
            }
        }
        assertThat(printed().lines().toList()).containsExactly(
                "step     5/10  loss 2.0000  grad_norm 1.000  lr 1.00e-03  tok/s 4096  epoch 1.25  tokens 20.5k"
                        + "  elapsed 0:05  eta 0:05",
                "step    10/10  loss 2.0000  grad_norm 1.000  lr 1.00e-03  tok/s 4096  epoch 2.50  tokens 41.0k"
                        + "  elapsed 0:10");
        bytes.reset();
        try (var r = reporter(10, 1, true).epochs(4)) {
            now += 1_000_000_000L;
            r.step(StepMetrics.of(2, 2.0, 1.0, 1e-3, 4096, 4000, 1.0, 2, Double.NaN, 0.5, false));
        }
        assertThat(printed()).contains("ep 0.50  8.2k tok  0:01 eta 0:08");
        assertThat(StepReporter.count(999)).isEqualTo("999");
        assertThat(StepReporter.count(1_234_567)).isEqualTo("1.2M");
        assertThat(StepReporter.count(999_960)).isEqualTo("1.0M");
    }
}
