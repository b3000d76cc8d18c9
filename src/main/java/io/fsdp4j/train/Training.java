package io.fsdp4j.train;

import io.fsdp4j.ExitStatus;
import io.fsdp4j.UserError;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.DirectoryLock;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.CheckpointSection;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Dataset;
import io.fsdp4j.fsdp.RandomInit;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobStart;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.report.MetricsFile;
import io.fsdp4j.report.Plots;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.IntPredicate;
import java.util.function.IntSupplier;

/**
 * {@code fsdp4j train} from a config: resolves it into a model, its initial weights and the data
 * ({@link TrainingInputs}), locks the checkpoint directory and test-writes the outputs, picks the checkpoint to resume
 * from, runs the {@link TrainingJob} with what the config asks beside the steps ({@link Outputs}: the demo's or a run
 * directory's), and reports each step ({@link RunReport}) and a summary.
 */
public final class Training {
    private Training() {}

    /**
     * What a run does beside its steps, as its config says: evaluations at their cadence, an export of the last
     * checkpoint at the end, and its part of the summary. The demo (no {@code data.train}) evaluates its held-out
     * answers before and after and exports into its run directory; any other run evaluates {@code data.eval}'s loss
     * and exports into {@code run.dir}.
     */
    private record Outputs(List<Evaluator> evaluators, TrainingJob.Export exportAtEnd,
                           Consumer<Map<String, Object>> summary) {
        static Outputs of(TrainConfig config, ModelConfig model, Dataset heldOut, boolean reports, PrintStream out) {
            List<Evaluator> evaluators = new ArrayList<>();
            boolean demo = config.data().train() == null;
            if (heldOut != null && (!demo || config.log().evalEvery() > 0)) { // the demo evaluates before and after
                evaluators.add(new HeldOutLoss(heldOut.sequences(), config.log().evalEvery(), (step, e) ->
                        out.printf(Locale.ROOT, "fsdp4j: eval %s: loss %.4f, perplexity %.3f (%d tokens of %s)%n",
                                step == 0 ? "before training" : "at step " + step, e.loss(), e.perplexity(),
                                e.tokens(), heldOut.name())));
            }
            if (demo) { // evaluated and exported in the process that reports for the job (it hosts rank 0)
                Demo preset = Demo.of(config, model.vocabSize(), reports, out);
                evaluators.add(preset);
                return new Outputs(List.copyOf(evaluators), preset.exportAtEnd(), preset::finish);
            }
            TrainingJob.Export export = RunDirectory.exportAtEnd(config);
            return new Outputs(List.copyOf(evaluators), export,
                    summary -> RunDirectory.finish(config, export, summary, out));
        }
    }

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
        config = TrainingInputs.fitToVisibleGpus(config, out);
        ModelConfig modelConfig = TrainingInputs.modelConfig(config);
        List<UnitLayout> layout = CausalLMs.layout(modelConfig);
        Dataset data = TrainingInputs.trainingData(config, modelConfig);
        config = DataFit.fit(config, modelConfig, data, JobSetup.layout(config).worldSize(), out); // seq_len, epochs
        // the packed documents' length (Dataset.documentTokens), read once where first asked for: by the auto settings
        // (GPUs) and by the report's MFU
        int[] documents = {-1};
        IntSupplier documentTokens = () -> documents[0] >= 0 ? documents[0] : (documents[0] = data.documentTokens());
        config = MemoryFit.fit(config, modelConfig, documentTokens, out); // the auto settings, at that seq_len
        HeapBudget.require(config, modelConfig, layout); // CPU ranks: the heap holds the whole model's state
        // this run's hold on its checkpoint directory (made and written here, before any step) for its whole life;
        // in a job of several processes the first holds it for the job, and the others write a probe there
        var ck = config.checkpoint();
        boolean firstProcess = JobSetup.layout(config).firstProcess();
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
            if (config.log().tensorboardDir() != null && firstProcess) {
                OutputFiles.requireWritableDirectory(config.log().tensorboardDir(), "log.tensorboard");
            }
            return runLocked(config, modelConfig, layout, data, documentTokens, out, stop);
        }
    }

    private static int runLocked(TrainConfig config, ModelConfig modelConfig, List<UnitLayout> layout, Dataset data,
                                 IntSupplier documentTokens, PrintStream out, StopRequest stop) {
        Dataset heldOut = TrainingInputs.evalData(config, modelConfig);
        ParamSource init = config.model().path() != null ? HfCheckpoint.open(config.model().path(), layout)
                : new RandomInit(config.train().seed(), 0.02, layout);
        try {
            return resumeAndTrain(config, modelConfig, layout, init, data, documentTokens, heldOut, out, stop);
        } finally {
            if (init instanceof HfCheckpoint checkpoint) {
                checkpoint.close();
            }
        }
    }

    private static int resumeAndTrain(TrainConfig config, ModelConfig modelConfig, List<UnitLayout> layout,
                                      ParamSource init, Dataset data, IntSupplier documentTokens,
                                      Dataset heldOut, PrintStream out, StopRequest stop) {
        boolean reports = JobSetup.layout(config).firstProcess();
        Outputs outputs = Outputs.of(config, modelConfig, heldOut, reports, out);
        TrainingJob job = new TrainingJob(config, modelConfig, init, data.sequences(), true).stoppable(stop);
        for (Evaluator evaluator : outputs.evaluators()) {
            job = job.evaluating(evaluator);
        }
        var ck = config.checkpoint();
        if (ck.dir() != null) {
            job = job.savingCheckpoints(new TrainingJob.CheckpointPlan(ck.dir(), ck.every(), ck.keep(),
                    config.model().path() == null ? null : config.model().path().toAbsolutePath().toString(),
                    TrainingInputs.effectiveConfigJson(config), ck.exportEvery(), outputs.exportAtEnd()));
        }
        Path resumeDir = ck.resumePath() != null ? Checkpoints.resolve(ck.resumePath())
                : ck.resume().equals(CheckpointSection.RESUME_AUTO) ? newestFinite(ck.dir(), out) : null;
        if (ck.dir() != null) {
            Checkpoints.requireOwnDirectory(ck.dir(), resumeDir);
            if (resumeDir != null && reports) {
                List<Path> removed = Checkpoints.removeNonFiniteAfter(ck.dir(), resumeDir);
                if (!removed.isEmpty()) {
                    out.printf(Locale.ROOT, "fsdp4j: removed %s (not finite), which this run replaces%n", String.join(
                            ", ", removed.stream().map(p -> p.getFileName().toString()).toList()));
                }
            }
        }
        try (SavedCheckpoint resume = resumeDir == null ? null : openToResume(resumeDir, ck)) {
            if (resume != null) {
                ResumeChanges.check(resume.index(), resumeDir.getFileName().toString(),
                        TrainingInputs.effectiveConfigJson(config), JobSetup.mesh(config).worldSize(),
                        ck.allowChanges(), out);
                job = job.resumingFrom(resume);
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
            return train(config, job, modelConfig, layout, data, documentTokens, outputs,
                    resume == null ? 0 : resume.index().step(), out);
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

    private static int train(TrainConfig config, TrainingJob job, ModelConfig modelConfig, List<UnitLayout> layout,
                             Dataset data, IntSupplier documentTokens, Outputs outputs, int resumedStep,
                             PrintStream out) {
        // the rendezvous and the preflight (which may start the job without unhealthy nodes), then this process's ranks
        JobStart.Joined started = JobSetup.start(config, job.mesh(), true);
        var mesh = started.ranks().mesh();
        long params = layout.stream().mapToLong(UnitLayout::numel).sum();
        int ranks = mesh.worldSize();
        String modelName = config.model().path() != null ? config.model().path().toString() : config.model().preset();
        out.printf(Locale.ROOT, "fsdp4j: %s (%s, %,d parameters) on %d ranks, %s (mesh %d x %d), %d %ssequences "
                        + "of %d tokens from %s%s%n", modelName, modelConfig.architecture().hfName(), params, ranks,
                config.fsdp().strategy(), mesh.replicas(), mesh.shardSize(), data.sequences().size(),
                config.data().pack() ? "packed " : "", config.data().seqLen(), data.name(),
                TrainingInputs.cutNote(data) + (config.data().pack() ? String.format(Locale.ROOT, ", packing "
                        + "efficiency %.3f (label tokens / positions)", data.packingEfficiency()) : ""));
        if (config.fsdp().cpuOffload()) {
            out.println("fsdp4j: fsdp.cpu_offload: parameter, gradient and AdamW shards in host memory; host AdamW "
                    + io.fsdp4j.optim.HostAdamW.describe());
        }
        int steps = config.train().steps();
        long startNanos = System.nanoTime();
        // in a job of several processes the first reports for the job (it hosts rank 0): the others write no files
        boolean reports = started.layout().firstProcess();
        if (reports) {
            RunDirectory.start(config, resumedStep > 0, out);
        }
        MetricsFile metrics = reports ? MetricsFile.open(config.log(), resumedStep) : null; // and log.tensorboard
        // a step that is evaluated gets one line with its step keys and the eval_ keys: its line waits for them
        IntPredicate evaluated = step -> outputs.evaluators().stream()
                .anyMatch(e -> e.dueAt(step, resumedStep + 1, steps));
        TrainingJob.Result result;
        double peakMemoryGib;
        try (var report = new RunReport(config, modelConfig, params, ranks, documentTokens.getAsInt(), metrics, evaluated,
                reports, out)) {
            report.epochs((double) data.sequences().size()
                    / ((long) ranks * config.train().batchSize() * config.train().gradAccum()));
            result = job.run(started, report, false);
            peakMemoryGib = report.peakMemoryGib();
        }
        if (result.ending() instanceof TrainingJob.Diverged d) {
            Path finite = config.checkpoint().dir() == null ? null : Checkpoints.latestFinite(config.checkpoint().dir());
            throw new DivergedException(String.format(Locale.ROOT, "training diverged: the loss (%s) or gradient "
                    + "norm (%s) was not finite at step %d, the %d%s step in a row (train.max_bad_steps=%d): no update "
                    + "was made after step %d; %s; lower optim.lr (or set optim.max_grad_norm), or check the model's "
                    + "weights", d.loss(), d.gradNorm(), d.step(), d.badSteps(), ordinal(d.badSteps()),
                    config.train().maxBadSteps(), d.step() - d.badSteps(), finite == null
                            ? "no finite checkpoint was saved" : "the newest finite checkpoint is " + finite));
        }
        if (result.ending() instanceof TrainingJob.Stopped stopped) {
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
            JobLayout place = started.layout();
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
        summary.put("tokens", result.tokensSeen()); // a resumed run counts its earlier steps too
        summary.put("resumed_at_step", resumedStep);
        summary.put("tok_s", tokens / wall); // this invocation's: its tokens over its time
        summary.put("tok_s_rank", tokens / wall / ranks);
        summary.put("world_size", ranks);
        summary.put("devices", result.devices());
        summary.put("model", modelName);
        summary.put("parameters", params);
        summary.put("dataset", data.name());
        summary.put("strategy", config.fsdp().strategy().toString());
        summary.put("final_loss", result.steps().isEmpty() ? null : result.steps().getLast().loss());
        summary.put("checkpoint", config.checkpoint().dir() == null ? null
                : String.valueOf(Checkpoints.latest(config.checkpoint().dir())));
        outputs.summary().accept(summary);
        summary.put("peak_memory_gib", peakMemoryGib);
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
}
