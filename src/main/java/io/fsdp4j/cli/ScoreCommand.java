package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.train.EvalJob;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.train.Scoring;
import io.fsdp4j.hf.ModelLocation;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
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

    @Option(names = "--model", paramLabel = "DIR|ID",
            description = "Hugging Face model directory (config.json + safetensors), or a Hub id org/name[@revision]"
                    + " (from the Hugging Face cache, downloaded into it when absent)")
    private Path model;

    @Option(names = "--checkpoint", paramLabel = "DIR",
            description = "an fsdp4j checkpoint (step-NNNNNNNN), or a checkpoint.dir whose newest checkpoint is taken;"
                    + " a LoRA run's (its adapters) on the base model directory the run started from")
    private Path checkpoint;

    @Option(names = "--adapter", paramLabel = "DIR",
            description = "a PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors, as PEFT and"
                    + " 'fsdp4j export' of a LoRA checkpoint write them) on the model of --model or --checkpoint: the"
                    + " adapted model is scored, its adapters applied unmerged")
    private Path adapter;

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

    @Option(names = "--set", paramLabel = "KEY=VALUE",
            description = "the ranks and how the model is sharded over them, as for train: dist.* and fsdp.* keys, "
                    + "e.g. --set dist.ranks=4 --set fsdp.cpu_offload=true (on GPUs: one rank per GPU and "
                    + "fsdp.param_dtype=bf16 unless set); repeatable")
    private List<String> sets = new ArrayList<>();

    @Override
    public Integer call() {
        if ((model == null) == (checkpoint == null)) {
            throw new UserError(model == null ? "give the model to score: --model DIR or --checkpoint DIR"
                    : "give either --model or --checkpoint, not both");
        }
        if (batchSize < 1) {
            throw new UserError("--batch-size must be at least 1, got " + batchSize);
        }
        TrainConfig job = EvalJob.config(sets);
        EvalModel source = model != null ? EvalModel.fromHf(ModelLocation.resolve(model, "--model"))
                : EvalModel.fromCheckpoint(checkpoint);
        if (adapter != null) {
            source = source.withAdapter(adapter);
        }
        return Scoring.run(source, data, logitsOut, tokenizer, job, batchSize, main.out());
    }
}
