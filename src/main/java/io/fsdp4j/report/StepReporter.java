package io.fsdp4j.report;

import java.io.Console;
import java.io.PrintStream;
import java.util.Locale;
import java.util.function.LongSupplier;

/**
 * Shows training progress on standard output. On a terminal: one line redrawn in place ({@code \r}) with a bar,
 * the step, loss, tok/s, the epoch, the tokens trained on, the time taken and the time left. Otherwise (a file, a
 * pipe, a dumb terminal): a plain line every {@code log.every} steps and at the last step, the metrics JSONL's main
 * keys and the same progress:
 * <pre>step    10/100  loss 4.1234  grad_norm 1.234  lr 3.00e-03  tok/s 1234  epoch 0.31  tokens 41.0k  elapsed 0:12  eta 1:48</pre>
 * The epoch is shown once {@link #epochs} gives the steps of one; the tokens once steps come as {@link StepMetrics}
 * (every step of a run has as many: the global batch at {@code data.seq_len}, so a resumed run counts its earlier
 * steps too).
 * Close it (try-with-resources) before printing anything else: on a terminal that ends the bar's line. Lines
 * that must appear while it runs go through {@link #println}, which keeps the bar below them.
 */
public final class StepReporter implements AutoCloseable {
    /** Redraws of the bar at most this often; the first and the last step are always drawn. */
    static final long REDRAW_NANOS = 100_000_000L;
    private static final int DEFAULT_COLUMNS = 80;
    private static final int MIN_BAR = 10, MAX_BAR = 30;
    /** Columns kept free at the first frame for numbers that grow later (loss above 10, tok/s a digit more). */
    private static final int SLACK = 4;

    private final int totalSteps;
    private final int every;
    private final PrintStream out;
    private final boolean interactive;
    private final int columns;
    private final LongSupplier nanoClock;
    private final long createdNanos;
    private int firstStep = -1;
    private long firstStepNanos;
    private long lastDrawNanos;
    private String barLine;
    private int drawnLength;
    private int barWidth;
    private boolean barOnScreen;
    private boolean closed;
    private double stepsPerEpoch; // 0: not known
    private long tokensPerStep = -1; // -1: not known

    /**
     * Draws a bar when {@code out} is {@link System#out} and that is an interactive terminal
     * ({@link #isInteractiveTerminal}); plain lines otherwise (a test's buffer, a file).
     */
    public StepReporter(int totalSteps, int every, PrintStream out) {
        this(totalSteps, every, out, out == System.out && isInteractiveTerminal());
    }

    /**
     * @param totalSteps  the step the run ends at ({@code train.steps})
     * @param every       plain mode prints every this many steps ({@code log.every}) and at {@code totalSteps}
     * @param interactive draw a bar redrawn in place rather than plain lines
     */
    public StepReporter(int totalSteps, int every, PrintStream out, boolean interactive) {
        this(totalSteps, every, out, interactive, terminalColumns(), System::nanoTime);
    }

    StepReporter(int totalSteps, int every, PrintStream out, boolean interactive, int columns, LongSupplier nanoClock) {
        if (totalSteps < 1 || every < 1) {
            throw new IllegalArgumentException("totalSteps and every must be >= 1: " + totalSteps + ", " + every);
        }
        this.totalSteps = totalSteps;
        this.every = every;
        this.out = out;
        this.interactive = interactive;
        this.columns = columns;
        this.nanoClock = nanoClock;
        this.createdNanos = nanoClock.getAsLong();
    }

    /**
     * True when standard input and output are a terminal that is not {@code TERM=dumb}. (Since JDK 22
     * {@link System#console()} is non-null even when redirected; {@link Console#isTerminal()} tells.)
     */
    public static boolean isInteractiveTerminal() {
        Console console = System.console();
        return console != null && console.isTerminal() && !"dumb".equals(System.getenv("TERM"));
    }

    public boolean interactive() {
        return interactive;
    }

    /** Shows the epoch of each step: a pass over the training data takes {@code stepsPerEpoch} steps. */
    public StepReporter epochs(double stepsPerEpoch) {
        this.stepsPerEpoch = stepsPerEpoch;
        return this;
    }

    /** Reports a step: redraws the bar, or prints a plain line if this step is one to log. */
    public void step(StepMetrics m) {
        synchronized (this) {
            tokensPerStep = m.tokens();
        }
        step(m.step(), m.loss(), m.gradNorm(), m.lr(), m.tokPerSec());
    }

    /** Reports a step: redraws the bar, or prints a plain line if this step is one to log. */
    public synchronized void step(int step, double loss, double gradNorm, double lr, double tokPerSec) {
        long now = nanoClock.getAsLong();
        if (firstStep < 0) {
            firstStep = step;
            firstStepNanos = now;
        }
        double elapsed = (now - createdNanos) / 1e9, eta = step >= totalSteps ? -1 : etaSeconds(step, now);
        if (!interactive) {
            if (step % every == 0 || step == totalSteps) {
                out.println(plainLine(step, totalSteps, loss, gradNorm, lr, tokPerSec) + progress(step, elapsed, eta));
            }
            return;
        }
        barLine = barLine(step, loss, tokPerSec, eta, elapsed);
        if (!barOnScreen || step >= totalSteps || step == firstStep || now - lastDrawNanos >= REDRAW_NANOS) {
            draw(barLine);
            lastDrawNanos = now;
        }
    }

    /** Prints a line of its own; on a terminal above the bar, which is drawn again beneath it. */
    public synchronized void println(String line) {
        if (barOnScreen) {
            out.print("\r" + " ".repeat(drawnLength) + "\r");
        }
        out.println(line);
        if (barOnScreen) {
            out.print(barLine);
            drawnLength = barLine.length();
        }
        out.flush();
    }

    /** Ends the bar's line, so that what is printed next starts on a line of its own. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (barOnScreen) {
            out.println();
        }
        out.flush();
    }

    /** The plain line, the format {@code fsdp4j train} has always printed. */
    static String plainLine(int step, int totalSteps, double loss, double gradNorm, double lr, double tokPerSec) {
        return String.format(Locale.ROOT, "step %5d/%d  loss %.4f  grad_norm %.3f  lr %.2e  tok/s %.0f",
                step, totalSteps, loss, gradNorm, lr, tokPerSec);
    }

    /** The plain line's progress: {@code  epoch 0.31  tokens 41.0k  elapsed 0:12  eta 1:48} (no eta at the end). */
    private String progress(int step, double elapsedSeconds, double etaSeconds) {
        StringBuilder b = new StringBuilder();
        if (stepsPerEpoch > 0) {
            b.append(String.format(Locale.ROOT, "  epoch %.2f", step / stepsPerEpoch));
        }
        if (tokensPerStep >= 0) {
            b.append("  tokens ").append(count((long) step * tokensPerStep));
        }
        b.append("  elapsed ").append(duration(elapsedSeconds));
        if (etaSeconds >= 0) {
            b.append("  eta ").append(Double.isFinite(etaSeconds) ? duration(etaSeconds) : "--:--");
        }
        return b.toString();
    }

    /** {@code 950}, {@code 41.0k}, {@code 3.2M}, {@code 1.5G}. */
    static String count(long n) {
        if (n < 1000) {
            return Long.toString(n);
        }
        String[] units = {"k", "M", "G", "T"};
        double v = n;
        int u = -1;
        while (v >= 999.95 && u < units.length - 1) {
            v /= 1000;
            u++;
        }
        return String.format(Locale.ROOT, "%.1f%s", v, units[u]);
    }

    /**
     * The bar: {@code step  42/100 [=======>      ]  42%  loss 4.1234  tok/s 1234  ep 0.42  41.0k tok  0:12 eta 1:23},
     * at the first frame
     * {@code columns - 5} wide where the bar's minimum width allows, the bar's width kept after that; after the last
     * step "took" and the run's time.
     *
     * @param etaSeconds time left, or negative when done (then {@code elapsedSeconds} is shown)
     */
    String barLine(int step, double loss, double tokPerSec, double etaSeconds, double elapsedSeconds) {
        int digits = Integer.toString(totalSteps).length();
        double fraction = Math.clamp((double) step / totalSteps, 0.0, 1.0);
        String head = String.format(Locale.ROOT, "step %" + digits + "d/%d ", step, totalSteps);
        String epoch = stepsPerEpoch > 0 ? String.format(Locale.ROOT, "  ep %.2f", step / stepsPerEpoch) : "";
        String tokens = tokensPerStep >= 0 ? "  " + count((long) step * tokensPerStep) + " tok" : "";
        String tail = String.format(Locale.ROOT, " %3d%%  loss %.4f  tok/s %.0f%s%s  %s", (int) (fraction * 100), loss,
                tokPerSec, epoch, tokens, etaSeconds < 0 ? "took " + duration(elapsedSeconds)
                        : duration(elapsedSeconds) + " eta " + (Double.isFinite(etaSeconds) ? duration(etaSeconds)
                        : "--:--"));
        if (barWidth == 0) { // fixed at the first frame, so that the bar does not shift as the numbers change
            barWidth = Math.clamp(columns - 1 - head.length() - tail.length() - 2 - SLACK, MIN_BAR, MAX_BAR);
        }
        int filled = (int) (fraction * barWidth);
        String bar = "=".repeat(filled) + (filled < barWidth ? ">" + " ".repeat(barWidth - filled - 1) : "");
        return head + "[" + bar + "]" + tail;
    }

    /**
     * Seconds left at the mean time per step. The first step's time (JIT warm-up, first allocations) is left out
     * once a second step is in; until then it is the time since this reporter was made.
     */
    private double etaSeconds(int step, long now) {
        double perStep = step > firstStep ? (now - firstStepNanos) / 1e9 / (step - firstStep)
                : (now - createdNanos) / 1e9;
        return perStep * (totalSteps - step);
    }

    /** Overwrites the line drawn before; spaces clear what a longer one left. */
    private void draw(String line) {
        out.print("\r" + line + " ".repeat(Math.max(0, drawnLength - line.length())));
        drawnLength = line.length();
        out.flush();
        barOnScreen = true;
    }

    /** {@code m:ss}, or {@code h:mm:ss} from an hour. */
    static String duration(double seconds) {
        long s = Math.round(Math.max(0, seconds));
        return s >= 3600 ? String.format(Locale.ROOT, "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60)
                : String.format(Locale.ROOT, "%d:%02d", s / 60, s % 60);
    }

    /** {@code COLUMNS} where the shell exports it, else 80. */
    private static int terminalColumns() {
        try {
            String columns = System.getenv("COLUMNS");
            return columns == null ? DEFAULT_COLUMNS : Math.max(20, Integer.parseInt(columns.trim()));
        } catch (NumberFormatException e) {
            return DEFAULT_COLUMNS;
        }
    }
}
