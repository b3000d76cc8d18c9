package io.fsdp4j.cli;

import io.fsdp4j.eval.Scoring;
import io.fsdp4j.hf.ModelLocation;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j score --model DIR --data FILE}. */
@Command(
        name = "score",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Loss of a model on sequences.",
            "Prints one JSON line per sequence, {\"index\":i,\"loss\":x,\"tokens\":n}, then "
                    + "{\"mean_loss\":x,\"tokens\":n} (the token-weighted mean).",
        })
final class ScoreCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--model", required = true, paramLabel = "DIR|ID",
            description = "Hugging Face model directory (config.json + safetensors), or a Hub id org/name[@revision]"
                    + " (from the Hugging Face cache, downloaded into it when absent)")
    private Path model;

    @Option(names = "--data", required = true, paramLabel = "FILE",
            description = "pre-tokenized JSONL, one {\"input_ids\":[...], \"labels\":[...]} a line; "
                    + "labels optional, -100 carries no loss")
    private Path data;

    @Option(names = "--logits-out", paramLabel = "FILE",
            description = "also write the fp32 logits of every position as the safetensors tensor 'logits' (B, T, V);"
                    + " the sequences must be of one length")
    private Path logitsOut;

    @Override
    public Integer call() {
        return Scoring.run(ModelLocation.resolve(model, "--model"), data, logitsOut, main.out());
    }
}
