package io.fsdp4j.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.CheckpointSection;
import io.fsdp4j.config.DeviceKind;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.data.Dataset;
import io.fsdp4j.data.Datasets;
import io.fsdp4j.data.Split;
import io.fsdp4j.dist.JobLayout;
import io.fsdp4j.dist.JobStart;
import io.fsdp4j.fsdp.ParamSource;
import io.fsdp4j.fsdp.RandomInit;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.report.MetricsServer;
import io.fsdp4j.report.Plots;
import io.fsdp4j.report.StepMetrics;
import io.fsdp4j.report.StepReporter;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code fsdp4j train}: resolves a config into a model, its initial weights and the training data, runs the job
 * on CPU ranks, and reports each step (a line on the terminal, a JSON line in {@code log.metrics}) and a summary.
 */
public final class Training {
    private static final double GIB = 1024.0 * 1024 * 1024;

    private Training() {}

    public static int run(TrainConfig config, PrintStream out) {
        config = fitToVisibleGpus(config, out);
        ModelConfig modelConfig = TrainingRun.modelConfig(config);
        List<UnitLayout> layout = CausalLMs.layout(modelConfig);
        Dataset data = trainingData(config, modelConfig);
        config = DataFit.fit(config, modelConfig, data, TrainingRun.job(config).worldSize(), out); // seq_len, epochs
        HeapBudget.require(config, modelConfig, layout); // CPU ranks: the heap holds the whole model's state
        Dataset heldOut = evalData(config, modelConfig);
        ParamSource init = config.model().path() != null ? HfCheckpoint.open(config.model().path(), layout)
                : new RandomInit(config.train().seed(), 0.02, layout);
        try {
            return resumeAndTrain(config, modelConfig, layout, init, data, heldOut, out);
        } finally {
            if (init instanceof HfCheckpoint checkpoint) {
                checkpoint.close();
            }
        }
    }

    private static int resumeAndTrain(TrainConfig config, ModelConfig modelConfig, List<UnitLayout> layout,
                                      ParamSource init, Dataset data, Dataset heldOut, PrintStream out) {
        // the demo evaluates and exports in the process that reports for the job (it hosts rank 0)
        DemoRun demo = config.data().train() == null && TrainingRun.job(config).firstProcess()
                ? DemoRun.prepare(config, modelConfig.vocabSize(), out) : null;
        TrainingRun run = new TrainingRun(config, modelConfig, init, data.sequences(), true);
        var ck = config.checkpoint();
        if (ck.dir() != null) {
            run = run.savingCheckpoints(new TrainingRun.CheckpointPlan(ck.dir(), ck.every(), ck.keep(),
                    config.model().path() == null ? null : config.model().path().toAbsolutePath().toString(),
                    effectiveConfigJson(config)));
        }
        Path resumeDir = ck.resumePath() != null ? Checkpoints.resolve(ck.resumePath())
                : ck.resume().equals(CheckpointSection.RESUME_AUTO) ? Checkpoints.latest(ck.dir()) : null;
        if (ck.dir() != null) {
            Checkpoints.requireOwnDirectory(ck.dir(), resumeDir);
        }
        try (SavedCheckpoint resume = resumeDir == null ? null : openToResume(resumeDir, ck)) {
            if (resume != null) {
                run = run.resumingFrom(resume);
                out.printf(Locale.ROOT, "fsdp4j: resuming from %s (step %d)%n", resumeDir, resume.index().step());
                if (resume.index().step() >= config.train().steps()) {
                    out.printf(Locale.ROOT, "fsdp4j: nothing to do: the checkpoint is at step %d of %d%n",
                            resume.index().step(), config.train().steps());
                    return 0;
                }
            }
            if (demo != null) {
                demo.evaluateBefore(modelConfig, resume != null ? resume.source(SavedCheckpoint.Kind.PARAMS) : init,
                        resume != null ? resume.index().step() : 0);
            }
            return train(config, run, modelConfig, layout, data, heldOut, demo, resume == null ? 0 : resume.index().step(),
                    out);
        }
    }

    /**
     * Opens the checkpoint to resume from; with {@code resume=auto}, an unreadable newest checkpoint is an error that
     * names the one before it (nothing is deleted, nothing is skipped silently).
     */
    private static SavedCheckpoint openToResume(Path dir, CheckpointSection ck) {
        try {
            return SavedCheckpoint.open(dir);
        } catch (UserError e) {
            List<Path> all = ck.resumePath() == null ? Checkpoints.list(ck.dir()) : List.of();
            if (all.size() < 2) {
                throw e;
            }
            Path before = all.get(all.size() - 2);
            throw new UserError(e.getMessage() + "; the checkpoint before it is " + before + ": set checkpoint.resume="
                    + before + " to continue from it");
        }
    }

    private static int train(TrainConfig config, TrainingRun run, ModelConfig modelConfig, List<UnitLayout> layout,
                             Dataset data, Dataset heldOut, DemoRun demo, int resumedStep, PrintStream out) {
        // the rendezvous and the preflight (which may start the job without unhealthy nodes), then this process's ranks
        JobStart.Joined job = run.start();
        var mesh = job.ranks().mesh();
        long params = layout.stream().mapToLong(UnitLayout::numel).sum();
        int ranks = mesh.worldSize();
        String modelName = config.model().path() != null ? config.model().path().toString() : config.model().preset();
        String dataName = data.name();
        out.printf(Locale.ROOT, "fsdp4j: %s (%s, %,d parameters) on %d ranks, %s (mesh %d x %d), %d %ssequences "
                        + "of %d tokens from %s%s%n", modelName, modelConfig.architecture().hfName(), params, ranks,
                config.fsdp().strategy(), mesh.replicas(), mesh.shardSize(), data.sequences().size(),
                config.data().pack() ? "packed " : "", config.data().seqLen(), dataName, cutNote(data));
        if (config.fsdp().cpuOffload()) {
            out.println("fsdp4j: fsdp.cpu_offload: parameter, gradient and AdamW shards in host memory; host AdamW "
                    + io.fsdp4j.optim.HostAdamW.describe());
        }
        int steps = config.train().steps(), every = config.log().every();
        double[] peakHeap = {0};
        long startNanos = System.nanoTime();
        // in a job of several processes the first reports for the job (it hosts rank 0): the others write no files
        boolean reports = job.layout().firstProcess();
        if (reports) {
            RunDirectory.start(config, resumedStep > 0, out);
        }
        Path metricsPath = config.log().metrics();
        MetricsFile metrics = metricsPath == null || !reports ? null
                : resumedStep > 0 ? MetricsFile.resume(metricsPath, resumedStep) : MetricsFile.create(metricsPath);
        // a step that is evaluated gets one line with its step keys and the eval_ keys: its step line waits here for
        // the evaluation (the demo's last step for the demo's own, after training)
        List<Map<String, Object>> waiting = new java.util.ArrayList<>();
        boolean evaluates = heldOut != null && (demo == null || config.log().evalEvery() > 0);
        int evalEvery = config.log().evalEvery();
        java.util.function.IntPredicate lineWaits = step -> evaluates && (step == steps || evalEvery > 0
                && step % evalEvery == 0) || demo != null && step == steps;
        if (evaluates) {
            run = run.evaluating(new TrainingRun.EvalPlan(heldOut.sequences(), evalEvery, (step, e) -> {
                out.printf(Locale.ROOT, "fsdp4j: eval %s: loss %.4f, perplexity %.3f (%d tokens of %s)%n",
                        step == 0 ? "before training" : "at step " + step, e.loss(), e.perplexity(), e.tokens(),
                        heldOut.name());
                if (metrics != null && step == 0) { // a line of its own: no step was trained yet
                    Map<String, Object> before = new LinkedHashMap<>();
                    before.put("step", 0);
                    before.put("eval_loss", e.loss());
                    before.put("eval_perplexity", e.perplexity());
                    before.put("eval_tokens", e.tokens());
                    metrics.write(before);
                    return;
                }
                if (metrics != null && !waiting.isEmpty()) {
                    Map<String, Object> line = waiting.getLast();
                    line.put("eval_loss", e.loss());
                    line.put("eval_perplexity", e.perplexity());
                    line.put("eval_tokens", e.tokens());
                    if (demo == null || step != steps) {
                        metrics.write(line);
                        waiting.clear();
                    }
                }
            }));
        }
        TrainingRun.Result result;
        try (var reporter = new StepReporter(steps, every, out);
             var prometheus = MetricsServer.start(reports ? config.log().prometheusPort() : 0, null)) {
            double flopsPerToken = Flops.perToken(modelConfig, params, config.data().seqLen());
            reporter.epochs((double) data.sequences().size()
                    / ((long) ranks * config.train().batchSize() * config.train().gradAccum()));
            result = run.run(job, TrainingRun.StepListener.of((step, seconds, peakDeviceBytes) -> {
                boolean gpu = peakDeviceBytes >= 0;
                peakHeap[0] = Math.max(peakHeap[0], gpu ? peakDeviceBytes / GIB : heapUsedGib());
                int gpus = config.dist().devicesFor(ranks, gpu);
                double mfu = Flops.mfu(flopsPerToken, step.tokens() / seconds / gpus, gpu);
                var m = StepMetrics.of(step.step(), step.loss(), step.gradNorm(), step.lr(), step.tokens(),
                        step.lossTokens(), seconds, gpus, mfu, peakHeap[0], gpu);
                reporter.step(m);
                prometheus.record(m);
                if (metrics != null && lineWaits.test(step.step())) {
                    waiting.clear();
                    waiting.add(new LinkedHashMap<>(m.toMap()));
                } else if (metrics != null && (step.step() % every == 0 || step.step() == steps)) {
                    metrics.write(m.toMap());
                }
            }, (step, saved, seconds) -> reporter.println(String.format(Locale.ROOT,
                    "fsdp4j: checkpoint of step %d saved in %s (%.1f s)", step, saved, seconds))),
                    config.data().train() == null); // the demo's final parameters: a collective, so in every process
            if (demo != null) {
                Map<String, Object> after = demo.evaluateAfter(modelConfig, result.finalParams());
                if (!waiting.isEmpty()) {
                    waiting.getLast().putAll(after);
                }
            }
            if (metrics != null && !waiting.isEmpty()) { // the last step's line, with what was evaluated after it
                metrics.write(waiting.getLast());
            }
        } finally {
            if (metrics != null) {
                metrics.close();
            }
        }
        if (!reports) {
            JobLayout place = job.layout();
            out.printf(Locale.ROOT, "fsdp4j: %s finished; %s reports for the job%n",
                    place.describeProcess(place.process()), place.describeProcess(0));
            return 0;
        }
        if (config.log().metrics() != null) {
            writePlots(config.log().metrics(), out);
        }
        double wall = (System.nanoTime() - startNanos) / 1e9;
        long tokens = result.steps().stream().mapToLong(StepResult::tokens).sum();
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("summary", true);
        summary.put("wall_s", wall);
        summary.put("steps", steps);
        // every step has as many tokens (the global batch at data.seq_len): a resumed run counts its earlier steps too
        long earlier = result.steps().isEmpty() ? 0 : (long) resumedStep * result.steps().getFirst().tokens();
        summary.put("tokens", earlier + tokens);
        summary.put("resumed_at_step", resumedStep);
        summary.put("tok_s", tokens / wall); // this invocation's: its tokens over its time
        summary.put("tok_s_rank", tokens / wall / ranks);
        summary.put("world_size", ranks);
        summary.put("devices", result.devices());
        summary.put("model", modelName);
        summary.put("parameters", params);
        summary.put("dataset", dataName);
        summary.put("strategy", config.fsdp().strategy().toString());
        summary.put("final_loss", result.steps().isEmpty() ? null : result.steps().getLast().loss());
        summary.put("checkpoint", config.checkpoint().dir() == null ? null
                : String.valueOf(Checkpoints.latest(config.checkpoint().dir())));
        if (demo != null) {
            demo.finish(summary);
        } else {
            RunDirectory.finish(config, summary, out);
        }
        summary.put("peak_memory_gib", peakHeap[0]);
        summary.put("rank_bytes", result.memory().stream().map(Training::bytesOf).toList());
        out.println(MetricsFile.json(summary));
        return 0;
    }

    /** PNG plots of the metrics beside the metrics file; a machine without fonts gets a note, not a failure. */
    private static void writePlots(Path metrics, PrintStream out) {
        Path dir = metrics.toAbsolutePath().getParent().resolve("plots");
        try {
            out.println("fsdp4j: plots in " + Plots.write(metrics, dir).getFirst());
        } catch (UserError e) {
            out.println("fsdp4j: no plots: " + e.getMessage());
        }
    }

    private static JsonNode effectiveConfigJson(TrainConfig config) {
        return new ObjectMapper().valueToTree(config.toMap());
    }

    private static Map<String, Object> bytesOf(RankMemory m) {
        Map<String, Object> bytes = new LinkedHashMap<>();
        bytes.put("rank", m.rank());
        bytes.put("params", m.paramBytes());
        bytes.put("grads", m.gradBytes());
        bytes.put("optimizer", m.optimizerBytes());
        bytes.put("device", m.deviceBytes());
        bytes.put("host", m.hostBytes());
        return bytes;
    }

    /** data.train, or the built-in demo's instructions when it is not set. */
    private static Dataset trainingData(TrainConfig config, ModelConfig model) {
        var d = config.data();
        int seqLen = DataFit.readLength(config, model); // data.seq_len, or with auto the model's context
        return d.train() == null ? Datasets.demo(model.vocabSize(), seqLen, d.pack(), Split.TRAIN)
                : Datasets.load(d.train(), config.model().path(), model.vocabSize(), seqLen, d.pack(), Split.TRAIN);
    }

    /**
     * What to evaluate on: data.eval (the held-out split of token files); without it, the held-out split of the
     * training token files if they have one, or the demo's held-out instructions; else nothing (null).
     */
    private static Dataset evalData(TrainConfig config, ModelConfig model) {
        var d = config.data();
        if (d.eval() != null) {
            return Datasets.load(d.eval(), config.model().path(), model.vocabSize(), d.seqLen(), d.pack(), Split.EVAL);
        }
        if (d.train() == null) {
            return Datasets.demo(model.vocabSize(), d.seqLen(), d.pack(), Split.EVAL);
        }
        if (Datasets.hasHeldOut(d.train())) {
            return Datasets.load(d.train(), config.model().path(), model.vocabSize(), d.seqLen(), d.pack(), Split.EVAL);
        }
        return null;
    }

    /** What became of the documents when cut into sequences, when anything did. */
    private static String cutNote(Dataset data) {
        if (data.truncated() == 0 && data.skipped() == 0) {
            return "";
        }
        return String.format(Locale.ROOT, " (%d of %d documents truncated, %d left out: no loss within data.seq_len)",
                data.truncated(), data.documents(), data.skipped());
    }

    /**
     * With {@code dist.device=auto} on a machine with GPUs, the job runs on them; a rank count above the number
     * of GPUs (such as the demo's default of 2 on a one-GPU machine) is lowered to it, and said so.
     */
    private static TrainConfig fitToVisibleGpus(TrainConfig config, PrintStream out) {
        if (config.dist().device() != DeviceKind.AUTO || !NativeLibraries.cudaAvailable() || config.dist().shareGpu()
                || TrainingRun.job(config).multiProcess()) { // every node must count its ranks alike
            return config;
        }
        int gpus = io.fsdp4j.cuda.Cuda.deviceCount();
        if (config.dist().ranks() <= gpus) {
            return config;
        }
        out.printf(Locale.ROOT, "fsdp4j: %d GPU(s) visible: running %d rank(s) instead of dist.ranks=%d%n", gpus, gpus,
                config.dist().ranks());
        return config.with("dist.ranks=" + gpus);
    }

    private static double heapUsedGib() {
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed() / GIB;
    }
}
