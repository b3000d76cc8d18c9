package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.data.EvalAnswer;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.data.Split;
import io.fsdp4j.data.TextTokenizer;
import io.fsdp4j.data.TokenFiles;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.eval.Evaluation;
import io.fsdp4j.eval.SquadFile;
import io.fsdp4j.eval.SquadQuestion;
import io.fsdp4j.hf.ModelLocation;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.report.MetricsFile;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j eval --model DIR | --checkpoint DIR --data FILE [--task loss|squad] ...}. */
@Command(
        name = "eval",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Evaluate a model: loss and perplexity on pre-tokenized sequences, or exact match and F1 of greedy answers "
                    + "to SQuAD v1.1 questions.",
            "--task loss prints {\"loss\":x,\"perplexity\":y,\"tokens\":n,\"sequences\":k} (the token-weighted "
                    + "mean loss and exp of it).",
            "With --data DIR, token files written by 'fsdp4j prepare': --task loss evaluates the documents of --split"
                    + " (default: the held-out ones), each whole; --task answers generates greedy answers to their"
                    + " prompts (Alpaca and SQuAD data) and prints {\"exact_match\":x,\"f1\":y,\"examples\":n}.",
            "--task squad asks each question as \"Context: {context}\\nQuestion: {question}\\nAnswer:\", generates up "
                    + "to --max-new-tokens tokens, stopping at EOS or a newline, and prints "
                    + "{\"exact_match\":x,\"f1\":y,\"questions\":n} in percent, as the official script does.",
        })
final class EvalCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--model", paramLabel = "DIR|ID",
            description = "Hugging Face model directory (config.json + safetensors), or a Hub id org/name[@revision]"
                    + " (from the Hugging Face cache, downloaded into it when absent)")
    private Path model;

    @Option(names = "--checkpoint", paramLabel = "DIR",
            description = "an fsdp4j checkpoint (step-NNNNNNNN), or a checkpoint.dir whose newest checkpoint is taken")
    private Path checkpoint;

    @Option(names = "--data", required = true, paramLabel = "FILE",
            description = "loss: pre-tokenized JSONL, one {\"input_ids\":[...], \"labels\":[...]} a line (labels "
                    + "optional, -100 carries no loss), or token files from 'fsdp4j prepare'; squad: a SQuAD v1.1 JSON "
                    + "file; answers: token files")
    private Path data;

    @Option(names = "--tokenizer", paramLabel = "PATH",
            description = "squad: a tokenizer.json, a model directory, or 'bytes' for a model trained on the byte"
                    + " tokenizer (default: the model's directory, or the checkpoint's original model directory)")
    private String tokenizer;

    @Option(names = "--task", paramLabel = "TASK", defaultValue = "loss",
            description = "loss, squad or answers (default: ${DEFAULT-VALUE})")
    private String task;

    @Option(names = "--split", paramLabel = "SPLIT", defaultValue = "eval",
            description = "token files: eval (the held-out documents), train or all (default: ${DEFAULT-VALUE})")
    private String split;

    @Option(names = "--max-new-tokens", paramLabel = "N", defaultValue = "32",
            description = "squad: the most tokens generated per answer (default: ${DEFAULT-VALUE})")
    private int maxNewTokens;

    @Option(names = "--limit", paramLabel = "K", description = "evaluate only the first K sequences or questions")
    private Integer limit;

    @Option(names = "--verbose",
            description = "also print a line per sequence ({\"index\":i,\"loss\":x,\"tokens\":n}) or per question "
                    + "({\"id\":...,\"prediction\":...,\"em\":x,\"f1\":y}, in percent) before the summary")
    private boolean verbose;

    @Override
    public Integer call() {
        if ((model == null) == (checkpoint == null)) {
            throw new UserError(model == null ? "give the model to evaluate: --model DIR or --checkpoint DIR"
                    : "give either --model or --checkpoint, not both");
        }
        if (!List.of("loss", "squad", "answers").contains(task)) {
            throw new UserError("--task must be loss, squad or answers, got '" + task + "'");
        }
        if (limit != null && limit < 1) {
            throw new UserError("--limit must be at least 1, got " + limit);
        }
        if (maxNewTokens < 1) {
            throw new UserError("--max-new-tokens must be at least 1, got " + maxNewTokens);
        }
        EvalModel source = model != null ? EvalModel.fromHf(ModelLocation.resolve(model, "--model"))
                : EvalModel.fromCheckpoint(checkpoint);
        if (TokenFiles.isTokenFiles(data)) {
            return tokenFiles(source, TokenFiles.open(data), main.out());
        }
        if (task.equals("answers")) {
            throw new UserError("--task answers needs token files written by 'fsdp4j prepare' as --data; " + data
                    + " is not a directory of them");
        }
        return task.equals("loss") ? loss(source, Evaluation.readTokens(data, source.config()), main.out())
                : squad(source, main.out());
    }

    /** Token files: the documents of the split whole (loss), or greedy answers to their prompts. */
    private int tokenFiles(EvalModel source, TokenFiles files, PrintStream out) {
        Split which = switch (split) {
            case "eval" -> Split.EVAL;
            case "train" -> Split.TRAIN;
            case "all" -> Split.ALL;
            default -> throw new UserError("--split must be eval, train or all, got '" + split + "'");
        };
        if (files.meta().vocabSize() > source.config().vocabSize()) {
            throw new UserError("token files " + files.dir() + " were prepared with the tokenizer "
                    + files.meta().tokenizer() + " of " + files.meta().vocabSize() + " tokens; the model's vocabulary"
                    + " has " + source.config().vocabSize());
        }
        return switch (task) {
            case "loss" -> {
                int[] documents = files.documents(which);
                if (documents.length == 0) {
                    throw new UserError("token files " + files.dir() + " hold no documents in the " + split
                            + " split; choose another with --split");
                }
                int maxPositions = source.config().maxPositions();
                List<Sequence> sequences = new ArrayList<>();
                for (int d : documents) {
                    Sequence doc = files.document(d);
                    sequences.add(doc.length() > maxPositions ? doc.fitTo(maxPositions) : doc);
                }
                yield loss(source, sequences, out);
            }
            case "answers" -> answers(source, files, which, out);
            default -> throw new UserError("--task squad reads a SQuAD JSON file; for token files use --task"
                    + " answers (or loss)");
        };
    }

    private int answers(EvalModel source, TokenFiles files, Split which, PrintStream out) {
        List<EvalAnswer> examples = limited(files.answers(which));
        if (examples.isEmpty()) {
            throw new UserError("token files " + files.dir() + " hold no examples with answers in the " + split
                    + " split (only Alpaca and SQuAD data have them)");
        }
        try (TextTokenizer tok = TextTokenizer.load(files.meta().tokenizer())) {
            SingleDeviceModel m = source.load();
            Evaluation.SquadResult r = Evaluation.answers(m, tok, examples, maxNewTokens);
            r.predictions().forEach(p -> printPrediction(p, out));
            return printScores(r, "examples", out);
        }
    }

    private int loss(EvalModel source, List<Sequence> all, PrintStream out) {
        List<Sequence> sequences = limited(all);
        SingleDeviceModel m = source.load();
        Evaluation.LossResult r = Evaluation.loss(m, CpuBackend.INSTANCE, sequences, (l, i) -> {
            if (verbose) {
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("index", i);
                line.put("loss", l.tokens() == 0 ? null : l.mean());
                line.put("tokens", l.tokens());
                out.println(MetricsFile.json(line));
            }
        });
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("loss", r.loss());
        summary.put("perplexity", r.perplexity());
        summary.put("tokens", r.tokens());
        summary.put("sequences", r.sequences());
        out.println(MetricsFile.json(summary));
        return 0;
    }

    private int squad(EvalModel source, PrintStream out) {
        List<SquadQuestion> questions = limited(SquadFile.read(data));
        String spec = tokenizer != null ? tokenizer : source.defaultTokenizer().toString();
        try (TextTokenizer tok = TextTokenizer.load(spec)) {
            SingleDeviceModel m = source.load();
            Evaluation.SquadResult r = Evaluation.squad(m, tok, questions, maxNewTokens, p -> printPrediction(p, out));
            return printScores(r, "questions", out);
        }
    }

    /** With --verbose, one question's or example's line ({"id", "prediction", "em", "f1"}, in percent). */
    private void printPrediction(Evaluation.SquadPrediction p, PrintStream out) {
        if (verbose) {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("id", p.id());
            line.put("prediction", p.prediction());
            line.put("em", p.exactMatch());
            line.put("f1", p.f1());
            out.println(MetricsFile.json(line));
        }
    }

    /** The closing line: exact match and F1 in percent, and how many were answered (under {@code countKey}). */
    private static int printScores(Evaluation.SquadResult r, String countKey, PrintStream out) {
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("exact_match", r.exactMatch());
        summary.put("f1", r.f1());
        summary.put(countKey, r.questions());
        out.println(MetricsFile.json(summary));
        return 0;
    }

    private <T> List<T> limited(List<T> all) {
        return limit == null || limit >= all.size() ? all : all.subList(0, limit);
    }
}
