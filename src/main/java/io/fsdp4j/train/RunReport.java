package io.fsdp4j.train;

import io.fsdp4j.config.LossScaling;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.model.Flops;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.plan.Workload;
import io.fsdp4j.report.MetricsFile;
import io.fsdp4j.report.MetricsServer;
import io.fsdp4j.report.StepMetrics;
import io.fsdp4j.report.StepReporter;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.IntPredicate;

/**
 * What {@code fsdp4j train} reports while its job runs (from rank 0): a line per step on the terminal, the step's
 * metrics to Prometheus and, in the process that reports for the job, to {@code log.metrics}, where the line of a step
 * that is evaluated waits for its {@code eval_} keys. {@link #close} writes a line still waiting and closes the file.
 */
final class RunReport implements TrainingJob.StepListener, AutoCloseable {
    private static final double GIB = 1024.0 * 1024 * 1024;

    private final TrainConfig config;
    private final int ranks;
    private final double flopsPerToken;
    private final IntPredicate evaluated;
    private final PrintStream out;
    private final StepReporter reporter;
    private final MetricsServer prometheus;
    private final MetricsFile metrics;
    private int skipped, skippedInRow;
    private double peakMemoryGib;
    private Map<String, Object> waiting; // the line of an evaluated step, until its evaluation

    /**
     * @param documentTokens the length of the documents packed into each sequence
     *                       ({@link io.fsdp4j.data.Dataset#documentTokens}; 0: one a sequence): MFU counts attention
     *                       within them
     * @param metrics        the metrics file to write (null: none)
     * @param evaluated      whether a step is evaluated after it (its line waits for the eval_ keys)
     * @param reports        this process reports for the job (serves Prometheus)
     */
    RunReport(TrainConfig config, ModelConfig model, long params, int ranks, int documentTokens, MetricsFile metrics,
              IntPredicate evaluated, boolean reports, PrintStream out) {
        this.config = config;
        this.ranks = ranks;
        this.flopsPerToken = Flops.perToken(model, params,
                Workload.attentionSpan(config.data().seqLen(), documentTokens));
        this.evaluated = evaluated;
        this.out = out;
        this.metrics = metrics;
        this.reporter = new StepReporter(config.train().steps(), config.log().every(), out);
        this.prometheus = MetricsServer.start(reports ? config.log().prometheusPort() : 0, null);
    }

    /** The FLOPs MFU counts a token ({@link Flops#perToken}, attention within the packed documents). */
    double flopsPerToken() {
        return flopsPerToken;
    }

    /** A loss scale as a user reads it: 65536, 0.5. */
    private static String scale(double s) {
        return s == Math.rint(s) && Math.abs(s) < 1e15 ? Long.toString((long) s) : Double.toString(s);
    }

    /** Tells the terminal's progress how many epochs the steps make. */
    void epochs(double epochs) {
        reporter.epochs(epochs);
    }

    /** The highest memory seen after a step: the device's peak reserved memory on GPUs, the heap in use on CPUs. */
    double peakMemoryGib() {
        return peakMemoryGib;
    }

    @Override
    public void onStep(StepResult step, double seconds, long peakDeviceBytes) {
        if (step.overflowed()) {
            skipped++;
            reporter.println(String.format(Locale.ROOT, "fsdp4j: step %d skipped: the gradients overflowed at loss "
                    + "scale %s (not finite on some rank: no rank updated its shards); loss scale now %s",
                    step.step(), scale(step.lossScale()), scale(step.lossScale() * LossScaling.BACKOFF_FACTOR)));
        } else if (step.skipped()) {
            skipped++;
            skippedInRow++;
            reporter.println(String.format(Locale.ROOT, "fsdp4j: step %d skipped: loss %s, gradient norm %s "
                    + "(not finite: no rank updated its shards); %d in a row of train.max_bad_steps=%d",
                    step.step(), step.loss(), step.gradNorm(), skippedInRow, config.train().maxBadSteps()));
        } else {
            skippedInRow = 0;
        }
        boolean gpu = peakDeviceBytes >= 0;
        peakMemoryGib = Math.max(peakMemoryGib, gpu ? peakDeviceBytes / GIB : heapUsedGib());
        int gpus = config.dist().devicesFor(ranks, gpu);
        double mfu = Flops.mfu(flopsPerToken, step.tokens() / seconds / gpus, gpu);
        var m = StepMetrics.of(step.step(), step.loss(), step.gradNorm(), step.lr(), step.tokens(), step.lossTokens(),
                seconds, gpus, mfu, peakMemoryGib, gpu);
        reporter.step(m);
        prometheus.record(m);
        Map<String, Object> line = new LinkedHashMap<>(m.toMap());
        line.put("skipped", step.skipped());
        line.put("skipped_steps", skipped);
        if (config.fsdp().lossScale().mode() != LossScaling.Mode.NONE) {
            line.put("loss_scale", step.lossScale());
        }
        int steps = config.train().steps();
        if (metrics != null && evaluated.test(step.step())) {
            waiting = line;
        } else if (metrics != null && (step.step() % config.log().every() == 0 || step.step() == steps
                || step.skipped())) {
            metrics.write(line);
        }
    }

    @Override
    public void onCheckpoint(int step, Path dir, double seconds) {
        reporter.println(String.format(Locale.ROOT, "fsdp4j: checkpoint of step %d saved in %s (%.1f s)",
                step, dir, seconds));
    }

    @Override
    public void onNote(String line) {
        reporter.println("fsdp4j: " + line);
    }

    /** Before training, a line of its own (no step was trained yet); after a step, that step's line completed. */
    @Override
    public void onEval(int step, Map<String, Object> keys) {
        if (metrics == null || keys.isEmpty()) {
            return;
        }
        if (step == 0) {
            Map<String, Object> before = new LinkedHashMap<>();
            before.put("step", 0);
            before.putAll(keys);
            metrics.write(before);
        } else if (waiting != null) {
            waiting.putAll(keys);
            metrics.write(waiting);
            waiting = null;
        }
    }

    @Override
    public void close() {
        try (reporter; prometheus) {
            if (metrics != null && waiting != null) { // a stop or divergence ended the run before its evaluation
                metrics.write(waiting);
            }
        } finally {
            if (metrics != null) {
                metrics.close();
            }
        }
    }

    private static double heapUsedGib() {
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed() / GIB;
    }
}
