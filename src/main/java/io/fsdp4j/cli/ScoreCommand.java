package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.train.Scoring;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j score --model DIR | --checkpoint DIR [--adapter DIR] --data FILE}. */
@Command(
        name = "score",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Loss of a model on sequences.",
            "Prints one JSON line per sequence, {\"index\":i,\"loss\":x,\"tokens\":n}, then "
                    + "{\"mean_loss\":x,\"tokens\":n} (the token-weighted mean).",
            "--data: pre-tokenized JSONL, or any data train reads (token files, Alpaca, SQuAD, conversations, text)"
                    + " through the model's tokenizer, each document a sequence. It runs on ranks as train does"
                    + " (--set dist.* and fsdp.*), each rank holding its shards of the model and scoring its share.",
        })
final class ScoreCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Mixin
    private EvaluatedModelOptions target;

    @Option(names = "--data", required = true, paramLabel = "FILE",
            description = "pre-tokenized JSONL, one {\"input_ids\":[...], \"labels\":[...]} a line; "
                    + "labels optional, -100 carries no loss")
    private Path data;

    @Option(names = "--logits-out", paramLabel = "FILE",
            description = "also write the fp32 logits of every position as the safetensors tensor 'logits' (B, T, V);"
                    + " the sequences must be of one length")
    private Path logitsOut;

    @Option(names = "--tokenizer", paramLabel = "PATH",
            description = "the tokenizer of data in text formats: a tokenizer.json, a model directory, or 'bytes' (default:"
                    + " the model's directory, or the checkpoint's original model directory)")
    private String tokenizer;

    @Option(names = "--batch-size", paramLabel = "N", defaultValue = "1",
            description = "sequences (of one length) per forward on each rank (default: ${DEFAULT-VALUE}: each"
                    + " sequence alone, the same numbers whatever the ranks)")
    private int batchSize;

    @Override
    public Integer call() {
        target.requireOneModel("score");
        if (batchSize < 1) {
            throw new UserError("--batch-size must be at least 1, got " + batchSize);
        }
        TrainConfig job = target.config();
        EvalModel source = target.open();
        return Scoring.run(source, data, logitsOut, tokenizer, job, batchSize, main.out());
    }
}
