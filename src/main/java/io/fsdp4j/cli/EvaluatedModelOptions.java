package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.hf.ModelLocation;
import io.fsdp4j.train.EvalJob;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine.Option;

/**
 * What {@code eval} and {@code score} run (a picocli mixin): a model directory or Hub id ({@code --model}) or an fsdp4j
 * checkpoint ({@code --checkpoint}), a PEFT adapter on it ({@code --adapter}), and the ranks it runs on
 * ({@code --set dist.* fsdp.*}).
 */
final class EvaluatedModelOptions {
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
                    + " adapted model is run, its adapters applied unmerged")
    private Path adapter;

    @Option(names = "--set", paramLabel = "KEY=VALUE",
            description = "the ranks and how the model is sharded over them, as for train: dist.* and fsdp.* keys, "
                    + "e.g. --set dist.ranks=4 --set fsdp.cpu_offload=true (on GPUs: one rank per GPU and "
                    + "fsdp.param_dtype=bf16 unless set); repeatable")
    private List<String> sets = new ArrayList<>();

    /** Exactly one of --model and --checkpoint, else a user error that says to give the model to {@code verb}. */
    void requireOneModel(String verb) {
        if ((model == null) == (checkpoint == null)) {
            throw new UserError(model == null ? "give the model to " + verb + ": --model DIR or --checkpoint DIR"
                    : "give either --model or --checkpoint, not both");
        }
    }

    /** The model, with --adapter's adapters where given. */
    EvalModel open() {
        EvalModel source = model != null ? EvalModel.fromHf(ModelLocation.resolve(model, "--model"))
                : EvalModel.fromCheckpoint(checkpoint);
        return adapter != null ? source.withAdapter(adapter) : source;
    }

    /** The job's settings: the ranks and sharding of --set. */
    TrainConfig config() {
        return EvalJob.config(sets);
    }
}
