package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.ByteTokenizer;
import io.fsdp4j.data.Dataset;
import io.fsdp4j.data.Datasets;
import io.fsdp4j.data.EvalAnswer;
import io.fsdp4j.data.Split;
import io.fsdp4j.eval.Evaluation;
import io.fsdp4j.eval.ShardedEvaluation;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The built-in demo ({@code fsdp4j train} without {@code data.train}), a preset the training loop runs like any other
 * config: its {@link #settings} (the tiny preset fine-tuned on the shipped instructions, prompt tokens carrying no
 * loss), an {@link Evaluator} of the held-out split before and after training (loss, perplexity, and exact match and
 * F1 of greedy answers), and the last checkpoint exported ({@link #exportAtEnd}), with its checkpoints, metrics and
 * plots in one run directory: the parent of {@code checkpoint.dir}, {@code runs/demo-<UTC time>} by default.
 */
public final class Demo implements Evaluator {
    /** The most bytes generated per answer: every demo answer is shorter, and generation stops at EOS or a newline. */
    static final int MAX_ANSWER_BYTES = 12;
    /** Held-out examples evaluated (the first ones of the split, which mixes the tasks). */
    static final int EVALUATED = 100;
    /**
     * Held-out examples a rank evaluates per forward: its whole share in one batch (each row is computed as it would be
     * alone, so the numbers are those of one example at a time; one at a time, every generated token was a product of
     * one row, which packs each weight for a single row and ran 6% of the demo's time).
     */
    static final int EVAL_BATCH = EVALUATED;
    /** Predictions shown after training. */
    private static final int SHOWN = 4;
    /** The demo's optimizer steps. */
    static final int DEMO_STEPS = 200;

    private final TrainConfig config;
    private final Dataset heldOut;
    private final PrintStream out;
    private final Path runDir; // null without checkpoint.dir: nothing is saved
    private Result before;
    private Result after;

    /**
     * Loss and answers on the held-out split. exactMatch: the percentage of answers that are exactly the expected
     * text (the demo's answers are case-sensitive and may be a lone "a", which SQuAD's normalisation would
     * accept in any case, or drop as an article); answers: SQuAD's exact match and F1.
     */
    record Result(Evaluation.LossResult loss, double exactMatch, Evaluation.SquadResult answers) {
        Result(Evaluation.LossResult loss, Evaluation.SquadResult answers, List<EvalAnswer> examples) {
            this(loss, strictExactMatch(answers, examples), answers);
        }

        private static double strictExactMatch(Evaluation.SquadResult answers, List<EvalAnswer> examples) {
            long exact = 0;
            for (int i = 0; i < examples.size(); i++) {
                if (examples.get(i).answers().contains(answers.predictions().get(i).prediction())) {
                    exact++;
                }
            }
            return 100.0 * exact / examples.size();
        }

        Map<String, Object> toMap() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("loss", loss.loss());
            m.put("perplexity", loss.perplexity());
            m.put("exact_match", exactMatch);
            m.put("squad_f1", answers.f1());
            m.put("examples", answers.questions());
            return m;
        }
    }

    private Demo(TrainConfig config, Dataset heldOut, PrintStream out, Path runDir) {
        this.config = config;
        int n = Math.min(EVALUATED, heldOut.answers().size());
        if (heldOut.sequences().size() != heldOut.answers().size()) {
            throw new IllegalStateException("the demo's held-out sequences and answers differ in number");
        }
        this.heldOut = new Dataset(heldOut.name(), heldOut.sequences().subList(0, n), heldOut.answers().subList(0, n),
                n, heldOut.truncated(), heldOut.skipped());
        this.out = out;
        this.runDir = runDir;
    }

    /**
     * The demo's settings, applied before the user's {@code --set} (which override them): about 1.5 minutes on
     * two CPU ranks of a 2-core machine, with everything written under {@code runDir} when the user gave one
     * ({@code run.dir}), else under {@code runs/demo-<UTC time>}. In a job of several processes ({@code WORLD_SIZE}
     * above 1 in {@code env}, as {@code fsdp4j launch} and torchrun set it) each process would read its own clock:
     * there the run directory is left to {@code checkpoint.dir} (or {@code run.dir}).
     */
    public static List<String> settings(Clock clock, Map<String, String> env, Path runDir) {
        List<String> settings = new ArrayList<>(List.of("data.seq_len=64", "train.batch_size=8",
                "train.steps=" + DEMO_STEPS, "optim.lr=3e-3"));
        if (runDir != null || env.getOrDefault("WORLD_SIZE", "1").equals("1")) {
            String run = runDir != null ? runDir.toString() : "runs/demo-"
                    + DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss").withZone(ZoneOffset.UTC).format(clock.instant());
            settings.addAll(List.of("checkpoint.dir=" + run + "/checkpoints", "checkpoint.every=" + DEMO_STEPS / 2,
                    "log.metrics=" + run + "/metrics.jsonl"));
        }
        return settings;
    }

    /**
     * The demo of {@code config}: in the process that reports for the job ({@code reports}, which hosts rank 0), checks
     * that the export's place is free before any work and says what the demo does. The held-out examples are evaluated
     * one to a sequence of 64 bytes, which holds each whole, whatever data.seq_len and data.pack.
     */
    static Demo of(TrainConfig config, int vocabSize, boolean reports, PrintStream out) {
        Dataset heldOut = Datasets.demo(vocabSize, 64, false, Split.EVAL);
        Path ck = config.checkpoint().dir();
        Path runDir = ck == null ? null : ck.toAbsolutePath().normalize().getParent();
        if (reports) {
            if (runDir != null && isNonEmptyDirectory(runDir.resolve("export"))) {
                throw new UserError("the demo's export directory " + runDir.resolve("export") + " exists already; remove"
                        + " it, or give a new run directory with --set checkpoint.dir=DIR/checkpoints");
            }
            out.printf(Locale.ROOT, "fsdp4j: demo: fine-tuning on the built-in instructions, twelve small string and"
                    + " digit tasks (prompt tokens carry no loss); %d held-out examples evaluated before and after%n",
                    Math.min(EVALUATED, heldOut.answers().size()));
        }
        return new Demo(config, heldOut, out, runDir);
    }

    /** Before the first step the run takes (fresh or resumed), and after the last. */
    @Override
    public boolean dueAt(int step, int firstStep, int lastStep) {
        return step == firstStep - 1 || step == lastStep;
    }

    /**
     * Evaluates the weights on every rank, each its share of the held-out examples forward through the sharded units
     * ({@link ShardedEvaluation}), and prints on rank 0 what they score (and after training, what they answer).
     * Returns the eval_ keys that the last step's metrics line carries; none before training (that evaluation is in
     * the summary and on standard output).
     */
    @Override
    public Map<String, Object> evaluate(FsdpModel model, int step) {
        Result result = evaluate(new ShardedEvaluation(model, EVAL_BATCH));
        if (model.rank().rank() != 0) {
            return null;
        }
        if (step < config.train().steps()) { // the weights the run starts from
            before = result;
            print(step == 0 ? "before training" : "at step " + step, before);
            return Map.of();
        }
        return evaluateAfter(result);
    }

    /** The export of the last checkpoint into the run directory, or null without one (no checkpoint.dir). */
    TrainingJob.Export exportAtEnd() {
        return runDir == null ? null : new TrainingJob.Export(runDir.resolve("export"), DType.F32);
    }

    /** Evaluates the trained parameters and prints what they answer; returns the eval_ keys of the last step. */
    private Map<String, Object> evaluateAfter(Result result) {
        after = result;
        print("after training ", after);
        int shown = 0;
        for (int i = 0; i < heldOut.answers().size() && shown < SHOWN; i += heldOut.answers().size() / SHOWN) {
            var example = heldOut.answers().get(i);
            var p = after.answers().predictions().get(i);
            String prompt = ByteTokenizer.INSTANCE.decode(example.promptIds(), true);
            String instruction = prompt.lines().skip(1).findFirst().orElse(prompt);
            out.printf(Locale.ROOT, "fsdp4j:   %-22s -> %-10s (expected %s)%n", instruction, "\"" + p.prediction() + "\"",
                    example.answers().getFirst());
            shown++;
        }
        return metricsKeys(after);
    }

    /** Names the export written at the end and the run directory, and adds the demo's results to the summary. */
    void finish(Map<String, Object> summary) {
        Path export = null;
        if (runDir != null) {
            Path latest = Checkpoints.latest(config.checkpoint().dir());
            export = exportAtEnd().dir();
            out.printf(Locale.ROOT, "fsdp4j: checkpoint %s; Hugging Face export %s%n", latest, export);
            out.printf(Locale.ROOT, "fsdp4j: run directory %s (%s)%n", runDir, config.run().dir() != null
                    ? RunDirectory.contents(config) : "metrics.jsonl, plots/, checkpoints/, export/");
        }
        summary.put("run_dir", runDir == null ? null : runDir.toString());
        summary.put("export", export == null ? null : export.toString());
        summary.put("eval_before", before == null ? null : before.toMap());
        summary.put("eval_after", after == null ? null : after.toMap());
    }

    private Result evaluate(ShardedEvaluation evaluation) {
        return new Result(evaluation.loss(heldOut.sequences()),
                evaluation.answers(ByteTokenizer.INSTANCE, heldOut.answers(), MAX_ANSWER_BYTES), heldOut.answers());
    }

    private void print(String when, Result r) {
        out.printf(Locale.ROOT, "fsdp4j: held-out %s: loss %.3f, perplexity %.2f, exact answers %.1f%%, SQuAD F1"
                        + " %.1f%% (%d examples)%n", when, r.loss().loss(), r.loss().perplexity(), r.exactMatch(),
                r.answers().f1(), r.answers().questions());
    }

    private static Map<String, Object> metricsKeys(Result r) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("eval_loss", r.loss().loss());
        line.put("eval_perplexity", r.loss().perplexity());
        line.put("eval_tokens", r.loss().tokens());
        line.put("eval_exact_match", r.exactMatch());
        line.put("eval_squad_f1", r.answers().f1());
        return line;
    }

    private static boolean isNonEmptyDirectory(Path dir) {
        if (!Files.isDirectory(dir)) {
            return Files.exists(dir);
        }
        try (Stream<Path> entries = Files.list(dir)) {
            return entries.findAny().isPresent();
        } catch (IOException e) {
            return true;
        }
    }
}
