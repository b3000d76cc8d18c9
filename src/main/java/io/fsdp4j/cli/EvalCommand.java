package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Dataset;
import io.fsdp4j.data.DatasetFormat;
import io.fsdp4j.data.Datasets;
import io.fsdp4j.data.ReadOptions;
import io.fsdp4j.data.EvalAnswer;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.data.Split;
import io.fsdp4j.data.TextTokenizer;
import io.fsdp4j.data.TokenFiles;
import io.fsdp4j.train.EvalJob;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.eval.Evaluation;
import io.fsdp4j.eval.ShardedEvaluation;
import io.fsdp4j.eval.SquadFile;
import io.fsdp4j.eval.SquadQuestion;
import io.fsdp4j.report.MetricsFile;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j eval --model DIR | --checkpoint DIR [--adapter DIR] --data FILE [--task loss|squad|answers] ...}. */
@Command(
        name = "eval",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Evaluate a model: loss and perplexity on sequences, or exact match and F1 of greedy answers to held-out "
                    + "prompts or SQuAD v1.1 questions.",
            "It runs on ranks as train does (--set dist.* and fsdp.*: CPU threads or GPUs, each rank holding its "
                    + "shards of the model and evaluating its share of the data).",
            "--data: any data train reads: pre-tokenized JSONL ({\"input_ids\":[...], \"labels\":[...]}), token files "
                    + "from 'fsdp4j prepare' (their --split), Alpaca, SQuAD, conversations or text, tokenized with the "
                    + "model's tokenizer (or --tokenizer), each document whole.",
            "--task loss prints {\"loss\":x,\"perplexity\":y,\"tokens\":n,\"sequences\":k} (the token-weighted "
                    + "mean loss and exp of it).",
            "--task answers generates greedy answers to the prompts of examples with answers (Alpaca, SQuAD, "
                    + "conversations, or token files of them) and prints {\"exact_match\":x,\"f1\":y,\"examples\":n}.",
            "--task squad asks each question of a SQuAD JSON file as \"Context: {context}\\nQuestion: {question}\\n"
                    + "Answer:\", generates up to --max-new-tokens tokens, stopping at EOS or a newline, and prints "
                    + "{\"exact_match\":x,\"f1\":y,\"questions\":n} in percent, as the official script does.",
        })
final class EvalCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Mixin
    private EvaluatedModelOptions target;

    @Option(names = "--data", required = true, paramLabel = "FILE",
            description = "loss: pre-tokenized JSONL, one {\"input_ids\":[...], \"labels\":[...]} a line (labels "
                    + "optional, -100 carries no loss), token files from 'fsdp4j prepare', or Alpaca, SQuAD, "
                    + "conversation or text data; squad: a SQuAD v1.1 JSON file; answers: Alpaca, SQuAD or "
                    + "conversation data, or token files of them")
    private Path data;

    @Option(names = "--tokenizer", paramLabel = "PATH",
            description = "the tokenizer of text data and answers: a tokenizer.json, a model directory, or 'bytes' for a"
                    + " model trained on the byte tokenizer (default: the model's directory, or the checkpoint's"
                    + " original model directory)")
    private String tokenizer;

    @Option(names = "--task", paramLabel = "TASK", defaultValue = "loss",
            description = "loss, squad or answers (default: ${DEFAULT-VALUE})")
    private String task;

    @Option(names = "--split", paramLabel = "SPLIT", defaultValue = "eval",
            description = "token files: eval (the held-out documents), train or all (default: ${DEFAULT-VALUE})")
    private String split;

    @Option(names = "--max-new-tokens", paramLabel = "N", defaultValue = "32",
            description = "squad and answers: the most tokens generated per answer (default: ${DEFAULT-VALUE})")
    private int maxNewTokens;

    @Option(names = "--limit", paramLabel = "K", description = "evaluate only the first K sequences or questions")
    private Integer limit;

    @Option(names = "--verbose",
            description = "also print a line per sequence ({\"index\":i,\"loss\":x,\"tokens\":n}) or per question "
                    + "({\"id\":...,\"prediction\":...,\"em\":x,\"f1\":y}, in percent; answers: with the "
                    + "\"prompt\" and the \"expected\" answers) before the summary")
    private boolean verbose;

    @Option(names = "--batch-size", paramLabel = "N",
            description = "sequences (of one length) or questions per forward on each rank (default: 1 for loss, each"
                    + " sequence alone, the same numbers whatever the ranks; 16 for answers and squad, which give"
                    + " the same answers batched; on a GPU, 64 to 256 questions a forward answer SQuAD's dev set"
                    + " several times sooner, memory allowing)")
    private Integer batchSize;

    @Override
    public Integer call() {
        target.requireOneModel("evaluate");
        if (!List.of("loss", "squad", "answers").contains(task)) {
            throw new UserError("--task must be loss, squad or answers, got '" + task + "'");
        }
        if (limit != null && limit < 1) {
            throw new UserError("--limit must be at least 1, got " + limit);
        }
        if (maxNewTokens < 1) {
            throw new UserError("--max-new-tokens must be at least 1, got " + maxNewTokens);
        }
        if (batchSize == null) {
            batchSize = task.equals("loss") ? 1 : 16;
        }
        if (batchSize < 1) {
            throw new UserError("--batch-size must be at least 1, got " + batchSize);
        }
        job = target.config();
        EvalModel source = target.open();
        if (TokenFiles.isTokenFiles(data)) {
            return tokenFiles(source, TokenFiles.open(data), main.out());
        }
        return switch (task) {
            case "loss" -> loss(source, ReadOptions.DEFAULT.formatOf(data) == DatasetFormat.TOKENS
                    ? Evaluation.readTokens(data, source.config()) : documents(source).sequences(), main.out());
            case "answers" -> {
                List<EvalAnswer> examples = documents(source).answers();
                if (examples.isEmpty()) {
                    throw new UserError(data + " holds no examples with answers (Alpaca, SQuAD and conversation data"
                            + " have them)");
                }
                yield answers(source, examples, textTokenizer(source), main.out());
            }
            default -> squad(source, main.out());
        };
    }

    /** The ranks and sharding of --set. */
    private TrainConfig job;

    /**
     * --data in any format train reads, through the model's tokenizer (or --tokenizer): each document whole, cut to
     * the model's max_position_embeddings.
     */
    private Dataset documents(EvalModel source) {
        return Datasets.documents(data, source.textTokenizerDir(tokenizer), source.config().vocabSize(), source.config().maxPositions(),
                Split.ALL, ReadOptions.DEFAULT);
    }

    /** The tokenizer answers are decoded with: --tokenizer, the model's, or bytes for a model without one. */
    private TextTokenizer textTokenizer(EvalModel source) {
        return TextTokenizer.load(tokenizer != null ? tokenizer
                : source.tokenizerDir() != null ? source.tokenizerDir().toString() : "bytes");
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
        List<EvalAnswer> examples = files.answers(which);
        if (examples.isEmpty()) {
            throw new UserError("token files " + files.dir() + " hold no examples with answers in the " + split
                    + " split (only Alpaca and SQuAD data have them)");
        }
        return answers(source, examples, TextTokenizer.load(files.meta().tokenizer()), out);
    }

    /** Greedy answers to the examples' prompts on the ranks; {@code tok} (closed here) decodes them. */
    private int answers(EvalModel source, List<EvalAnswer> all, TextTokenizer tok, PrintStream out) {
        List<EvalAnswer> examples = limited(all);
        try (tok) {
            Evaluation.SquadResult r = EvalJob.run(job, source, batchSize,
                    e -> withProgress(e).answers(tok, examples, maxNewTokens));
            if (r == null) { // a process without rank 0: it reports nothing
                return 0;
            }
            for (int i = 0; i < examples.size(); i++) {
                printPrediction(r.predictions().get(i), tok.decode(examples.get(i).promptIds(), true),
                        examples.get(i).answers(), out);
            }
            return printScores(r, "examples", out);
        }
    }

    private int loss(EvalModel source, List<Sequence> all, PrintStream out) {
        List<Sequence> sequences = limited(all);
        List<Evaluation.SequenceLoss> each = EvalJob.run(job, source, batchSize, e -> e.sequenceLosses(sequences));
        if (each == null) {
            return 0;
        }
        double sum = 0;
        long tokens = 0;
        for (int i = 0; i < each.size(); i++) {
            Evaluation.SequenceLoss l = each.get(i);
            sum += l.sum();
            tokens += l.tokens();
            if (verbose) {
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("index", i);
                line.put("loss", l.tokens() == 0 ? null : l.mean());
                line.put("tokens", l.tokens());
                out.println(MetricsFile.json(line));
            }
        }
        Evaluation.LossResult r = Evaluation.total(sum, tokens, sequences.size());
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("loss", r.loss());
        summary.put("perplexity", r.perplexity());
        summary.put("tokens", r.tokens());
        summary.put("sequences", r.sequences());
        out.println(MetricsFile.json(summary));
        return 0;
    }

    /** Generation's progress on standard error, from rank 0, every 10 s ("fsdp4j: eval: answered ..."). */
    private static ShardedEvaluation withProgress(ShardedEvaluation e) {
        return e.rank() == 0 ? e.reportProgressTo(line -> System.err.println("fsdp4j: eval: " + line), 10) : e;
    }

    private int squad(EvalModel source, PrintStream out) {
        List<SquadQuestion> questions = limited(SquadFile.read(data));
        String spec = tokenizer != null ? tokenizer : source.defaultTokenizer().toString();
        try (TextTokenizer tok = TextTokenizer.load(spec)) {
            Evaluation.SquadResult r = EvalJob.run(job, source, batchSize,
                    e -> withProgress(e).squad(tok, questions, maxNewTokens, p -> {}));
            if (r == null) {
                return 0;
            }
            r.predictions().forEach(p -> printPrediction(p, null, null, out));
            return printScores(r, "questions", out);
        }
    }

    /**
     * With --verbose, one question's or example's line ({"id", "prediction", "em", "f1"}, in percent; an example's
     * with its "prompt" and "expected" answers, when given, after the id).
     */
    private void printPrediction(Evaluation.SquadPrediction p, String prompt, List<String> expected, PrintStream out) {
        if (verbose) {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("id", p.id());
            if (prompt != null) {
                line.put("prompt", prompt);
                line.put("expected", expected);
            }
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
