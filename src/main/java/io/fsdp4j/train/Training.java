package io.fsdp4j.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.ExitStatus;
import io.fsdp4j.UserError;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.DirectoryLock;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.CheckpointSection;
import io.fsdp4j.config.DataFormat;
import io.fsdp4j.config.DeviceKind;
import io.fsdp4j.config.TooLong;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.config.TrainOn;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.data.Dataset;
import io.fsdp4j.data.DatasetFormat;
import io.fsdp4j.data.Datasets;
import io.fsdp4j.data.ReadOptions;
import io.fsdp4j.data.Split;
import io.fsdp4j.fsdp.RandomInit;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobStart;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.Flops;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.preflight.Fingerprints;
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

    /**
     * Runs {@code config}'s training and returns the exit status: {@link ExitStatus#OK}, or {@link
     * ExitStatus#STOPPED} after SIGTERM or SIGINT (the current step finished, a checkpoint saved where a directory
     * is set). A run that diverges throws {@link DivergedException}; bad input, a {@link UserError}.
     */
    public static int run(TrainConfig config, PrintStream out) {
        try (StopRequest stop = StopRequest.onSignals(System.err)) {
            return run(config, out, stop);
        }
    }

    /** {@link #run}, stopping when {@code stop} is requested. */
    public static int run(TrainConfig config, PrintStream out, StopRequest stop) {
        // what can be refused without writing anything first: the model, the data, and whether the heap holds them
        config = fitToVisibleGpus(config, out);
        ModelConfig modelConfig = TrainingRun.modelConfig(config);
        List<UnitLayout> layout = CausalLMs.layout(modelConfig);
        Dataset data = trainingData(config, modelConfig);
        config = DataFit.fit(config, modelConfig, data, TrainingRun.job(config).worldSize(), out); // seq_len, epochs
        HeapBudget.require(config, modelConfig, layout); // CPU ranks: the heap holds the whole model's state
        // this run's hold on its checkpoint directory (made and written here, before any step) for its whole life;
        // in a job of several processes the first holds it for the job, and the others write a probe there
        var ck = config.checkpoint();
        boolean firstProcess = TrainingRun.job(config).firstProcess();
        try (DirectoryLock lock = ck.dir() == null ? null : firstProcess
                ? DirectoryLock.acquire(ck.dir(), "checkpoint.dir", out) : null) {
            if (ck.dir() != null) { // every process writes its shards there: room for more than the lock's line
                OutputFiles.requireWritableDirectory(ck.dir(), "checkpoint.dir");
            }
            if (lock != null) {
                List<Path> stale = Checkpoints.removeStaleTemporaries(ck.dir());
                if (!stale.isEmpty()) {
                    out.println("fsdp4j: removed what interrupted saves left in " + ck.dir() + ": " + String.join(", ",
                            stale.stream().map(p -> p.getFileName().toString()).toList()));
                }
            }
            if (config.log().metrics() != null && firstProcess) {
                OutputFiles.requireWritableFile(config.log().metrics(), "log.metrics");
            }
            return runLocked(config, modelConfig, layout, data, out, stop);
        }
    }

    private static int runLocked(TrainConfig config, ModelConfig modelConfig, List<UnitLayout> layout, Dataset data,
                                 PrintStream out, StopRequest stop) {
        Dataset heldOut = evalData(config, modelConfig);
        ParamSource init = config.model().path() != null ? HfCheckpoint.open(config.model().path(), layout)
                : new RandomInit(config.train().seed(), 0.02, layout);
        try {
            return resumeAndTrain(config, modelConfig, layout, init, data, heldOut, out, stop);
        } finally {
            if (init instanceof HfCheckpoint checkpoint) {
                checkpoint.close();
            }
        }
    }

    private static int resumeAndTrain(TrainConfig config, ModelConfig modelConfig, List<UnitLayout> layout,
                                      ParamSource init, Dataset data, Dataset heldOut, PrintStream out,
                                      StopRequest stop) {
        // the demo evaluates and exports in the process that reports for the job (it hosts rank 0)
        DemoRun demo = config.data().train() == null && TrainingRun.job(config).firstProcess()
                ? DemoRun.prepare(config, modelConfig.vocabSize(), out) : null;
        TrainingRun run = new TrainingRun(config, modelConfig, init, data.sequences(), true).stoppable(stop);
        var ck = config.checkpoint();
        if (ck.dir() != null) {
            run = run.savingCheckpoints(new TrainingRun.CheckpointPlan(ck.dir(), ck.every(), ck.keep(),
                    config.model().path() == null ? null : config.model().path().toAbsolutePath().toString(),
                    effectiveConfigJson(config), ck.exportEvery()));
        }
        Path resumeDir = ck.resumePath() != null ? Checkpoints.resolve(ck.resumePath())
                : ck.resume().equals(CheckpointSection.RESUME_AUTO) ? newestFinite(ck.dir(), out) : null;
        if (ck.dir() != null) {
            Checkpoints.requireOwnDirectory(ck.dir(), resumeDir);
            if (resumeDir != null && TrainingRun.job(config).firstProcess()) {
                List<Path> removed = Checkpoints.removeNonFiniteAfter(ck.dir(), resumeDir);
                if (!removed.isEmpty()) {
                    out.printf(Locale.ROOT, "fsdp4j: removed %s (not finite), which this run replaces%n", String.join(
                            ", ", removed.stream().map(p -> p.getFileName().toString()).toList()));
                }
            }
        }
        try (SavedCheckpoint resume = resumeDir == null ? null : openToResume(resumeDir, ck)) {
            if (resume != null) {
                ResumeChanges.check(resume.index(), resumeDir.getFileName().toString(), effectiveConfigJson(config),
                        TrainingRun.mesh(config).worldSize(), ck.allowChanges(), out);
                run = run.resumingFrom(resume);
                out.printf(Locale.ROOT, "fsdp4j: resuming from %s (step %d)%n", resumeDir, resume.index().step());
                if (!resume.index().isFinite()) {
                    out.printf(Locale.ROOT, "fsdp4j: note: %s holds values that are not finite: its steps will be "
                            + "skipped, and the run stop after train.max_bad_steps=%d of them%n", resumeDir,
                            config.train().maxBadSteps());
                }
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
     * The checkpoint {@code resume=auto} continues from: the newest in {@code dir} whose state is finite (saying so
     * when newer ones are not), or null when there is none. A directory of checkpoints none of which is finite is
     * refused: resuming from any would only skip steps until the run stops as diverged.
     */
    private static Path newestFinite(Path dir, PrintStream out) {
        Path newest = Checkpoints.latest(dir);
        if (newest == null || Checkpoints.isFinite(newest)) {
            return newest;
        }
        Path finite = Checkpoints.latestFinite(dir);
        if (finite == null) {
            throw new UserError("checkpoint.resume=auto: no checkpoint in " + dir + " holds finite values (newest: "
                    + newest.getFileName() + "); start afresh with another checkpoint.dir, or lower optim.lr");
        }
        out.printf(Locale.ROOT, "fsdp4j: checkpoint.resume=auto: %s holds values that are not finite (the run that "
                + "saved it diverged); taking %s, the newest finite checkpoint%n", newest.getFileName(),
                finite.getFileName());
        return finite;
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
                config.data().pack() ? "packed " : "", config.data().seqLen(), dataName, cutNote(data)
                        + (config.data().pack() ? String.format(Locale.ROOT, ", packing efficiency %.3f (label tokens"
                                + " / positions)", data.packingEfficiency()) : ""));
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
            int maxBad = config.train().maxBadSteps();
            int[] skipped = {0, 0}; // in all, in a row
            reporter.epochs((double) data.sequences().size()
                    / ((long) ranks * config.train().batchSize() * config.train().gradAccum()));
            result = run.run(job, TrainingRun.StepListener.of((step, seconds, peakDeviceBytes) -> {
                if (step.skipped()) {
                    skipped[0]++;
                    skipped[1]++;
                    reporter.println(String.format(Locale.ROOT, "fsdp4j: step %d skipped: loss %s, gradient norm %s "
                            + "(not finite: no rank updated its shards); %d in a row of train.max_bad_steps=%d",
                            step.step(), step.loss(), step.gradNorm(), skipped[1], maxBad));
                } else {
                    skipped[1] = 0;
                }
                boolean gpu = peakDeviceBytes >= 0;
                peakHeap[0] = Math.max(peakHeap[0], gpu ? peakDeviceBytes / GIB : heapUsedGib());
                int gpus = config.dist().devicesFor(ranks, gpu);
                double mfu = Flops.mfu(flopsPerToken, step.tokens() / seconds / gpus, gpu);
                var m = StepMetrics.of(step.step(), step.loss(), step.gradNorm(), step.lr(), step.tokens(),
                        step.lossTokens(), seconds, gpus, mfu, peakHeap[0], gpu);
                reporter.step(m);
                prometheus.record(m);
                Map<String, Object> line = new LinkedHashMap<>(m.toMap());
                line.put("skipped", step.skipped());
                line.put("skipped_steps", skipped[0]);
                if (metrics != null && lineWaits.test(step.step())) {
                    waiting.clear();
                    waiting.add(line);
                } else if (metrics != null && (step.step() % every == 0 || step.step() == steps || step.skipped())) {
                    metrics.write(line);
                }
            }, (step, saved, seconds) -> reporter.println(String.format(Locale.ROOT,
                    "fsdp4j: checkpoint of step %d saved in %s (%.1f s)", step, saved, seconds))),
                    config.data().train() == null); // the demo's final parameters: a collective, so in every process
            if (demo != null && result.ending() instanceof TrainingRun.Completed) {
                List<float[]> finalParams = result.finalParams();
                io.fsdp4j.model.LoraSpec lora = io.fsdp4j.model.LoraSpec.of(config.lora());
                if (lora != null) { // the adapters merged into the base, which the evaluation builds
                    finalParams = lora.merge(io.fsdp4j.model.CausalLMs.create(modelConfig,
                            io.fsdp4j.backend.CpuBackend.INSTANCE, lora).units(), finalParams,
                            io.fsdp4j.model.CausalLMs.layout(modelConfig));
                }
                Map<String, Object> after = demo.evaluateAfter(modelConfig, finalParams);
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
        if (result.ending() instanceof TrainingRun.Diverged d) {
            Path finite = config.checkpoint().dir() == null ? null : Checkpoints.latestFinite(config.checkpoint().dir());
            throw new DivergedException(String.format(Locale.ROOT, "training diverged: the loss (%s) or gradient "
                    + "norm (%s) was not finite at step %d, the %d%s step in a row (train.max_bad_steps=%d): no update "
                    + "was made after step %d; %s; lower optim.lr (or set optim.max_grad_norm), or check the model's "
                    + "weights", d.loss(), d.gradNorm(), d.step(), d.badSteps(), ordinal(d.badSteps()),
                    config.train().maxBadSteps(), d.step() - d.badSteps(), finite == null
                            ? "no finite checkpoint was saved" : "the newest finite checkpoint is " + finite));
        }
        if (result.ending() instanceof TrainingRun.Stopped stopped) {
            Path saved = result.lastCheckpoint();
            if (reports) {
                out.printf(Locale.ROOT, "fsdp4j: stopped by %s after step %d of %d; %s%n", stopped.reason(),
                        stopped.step(), steps, saved == null ? "no checkpoint.dir is set, so nothing was saved"
                                : "checkpoint saved in " + saved + "; to continue, run the same command with "
                                + "checkpoint.resume=auto (or checkpoint.resume=" + saved + ")");
            }
            return ExitStatus.STOPPED;
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

    private static String ordinal(int n) {
        return n % 100 >= 11 && n % 100 <= 13 ? "th" : switch (n % 10) {
            case 1 -> "st";
            case 2 -> "nd";
            case 3 -> "rd";
            default -> "th";
        };
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

    /**
     * The effective config as recorded in checkpoints, with the fingerprint of the training data (its every byte,
     * cached: see {@link Fingerprints}) under {@value ResumeChanges#FINGERPRINTS}, so that a resumed run sees data
     * that changed under the same path.
     */
    private static JsonNode effectiveConfigJson(TrainConfig config) {
        var json = (com.fasterxml.jackson.databind.node.ObjectNode) new ObjectMapper().valueToTree(config.toMap());
        if (config.data().train() != null && java.nio.file.Files.exists(config.data().train())) {
            json.putObject(ResumeChanges.FINGERPRINTS).put("data.train", Fingerprints.ofPath(config.data().train()));
        }
        return json;
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
        if (d.trainMix() != null) {
            return mix(d.trainMix(), config, model, seqLen, Split.TRAIN);
        }
        return d.train() == null ? Datasets.demo(model.vocabSize(), seqLen, d.pack(), Split.TRAIN)
                : Datasets.load(d.train(), config.model().path(), model.vocabSize(), seqLen, d.pack(), Split.TRAIN,
                        readOptions(d));
    }

    /**
     * What to evaluate on: data.eval (the held-out split of token files); without it, the held-out split of the
     * training token files if they have one, or the demo's held-out instructions; else nothing (null).
     */
    private static Dataset evalData(TrainConfig config, ModelConfig model) {
        var d = config.data();
        if (d.evalMix() != null) {
            return mix(d.evalMix(), config, model, d.seqLen(), Split.EVAL);
        }
        if (d.eval() != null) {
            return Datasets.load(d.eval(), config.model().path(), model.vocabSize(), d.seqLen(), d.pack(), Split.EVAL,
                    readOptions(d));
        }
        if (d.train() == null) {
            return Datasets.demo(model.vocabSize(), d.seqLen(), d.pack(), Split.EVAL);
        }
        if (Datasets.hasHeldOut(d.train())) {
            return Datasets.load(d.train(), config.model().path(), model.vocabSize(), d.seqLen(), d.pack(), Split.EVAL,
                    readOptions(d));
        }
        return null;
    }

    /** A weighted mix of datasets (data.train or data.eval as a list of {path, weight}), seeded by train.seed. */
    private static Dataset mix(java.util.List<io.fsdp4j.config.WeightedPath> mix, TrainConfig config, ModelConfig model,
                               int seqLen, Split split) {
        var d = config.data();
        var parts = mix.stream().map(w -> Datasets.load(w.path(), config.model().path(), model.vocabSize(),
                seqLen, d.pack(), split, readOptions(d))).toList();
        return Datasets.mix(parts, mix.stream().mapToDouble(io.fsdp4j.config.WeightedPath::weight).toArray(),
                config.train().seed());
    }

    /** data.format, data.chat_template and data.train_on, as the data package reads them. */
    private static ReadOptions readOptions(io.fsdp4j.config.DataSection d) {
        return new ReadOptions(d.format() == DataFormat.AUTO ? null : DatasetFormat.parse(d.format().spelling()),
                d.chatTemplate(), d.trainOn() == TrainOn.ALL, d.tooLong() == TooLong.DROP);
    }

    /** What became of the documents when cut into sequences, when anything did. */
    private static String cutNote(Dataset data) {
        if (data.truncated() == 0 && data.skipped() == 0) {
            return "";
        }
        return String.format(Locale.ROOT, " (%d of %d documents truncated, %d left out: no loss within data.seq_len,"
                        + " or longer with data.too_long=drop)",
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
