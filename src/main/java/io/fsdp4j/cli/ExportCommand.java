package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.HfExport;
import io.fsdp4j.tensor.DType;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j export --checkpoint DIR --out DIR [--dtype bf16|fp32] [--max-shard-size 5GB]}. */
@Command(
        name = "export",
        header = "Write a checkpoint as a Hugging Face model directory (safetensors and config.json).",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Write a checkpoint as a Hugging Face model directory that transformers loads: safetensors shards "
                    + "listed in model.safetensors.index.json (one model.safetensors when the weights fit one shard), "
                    + "config.json naming the dtype written, and the original model's tokenizer files, generation "
                    + "config and chat template. Streamed in bounded memory; written under a temporary name and "
                    + "renamed when complete.",
        })
final class ExportCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--checkpoint", required = true, paramLabel = "DIR",
            description = "a checkpoint (step-NNNNNNNN), or a checkpoint.dir whose newest checkpoint is taken")
    private Path checkpoint;

    @Option(names = "--out", required = true, paramLabel = "DIR", description = "the new model directory (must not exist, or be empty)")
    private Path out;

    @Option(names = "--dtype", paramLabel = "DTYPE",
            description = "weights' type: bf16, fp32 or fp16 (default: the source model's, as its config.json says;"
                    + " fp32 for a preset)")
    private String dtype;

    @Option(names = "--max-shard-size", paramLabel = "SIZE", defaultValue = "5GB",
            description = "the most bytes of weights in one file, as transformers spells it: 5GB, 500MB, 2GiB or"
                    + " bytes (default: ${DEFAULT-VALUE})")
    private String maxShardSize;

    @Option(names = "--merge",
            description = "a LoRA checkpoint: write the base model with the adapters merged (PEFT's merge_and_unload)"
                    + " instead of the PEFT adapter (adapter_config.json, adapter_model.safetensors)")
    private boolean merge;

    @Override
    public Integer call() {
        DType type = dtype == null ? null : switch (dtype) {
            case "fp32" -> DType.F32;
            case "bf16" -> DType.BF16;
            case "fp16" -> DType.F16;
            default -> throw new UserError("--dtype must be one of bf16, fp32, fp16, got '" + dtype + "'");
        };
        Path source = Checkpoints.resolve(checkpoint);
        var options = new HfExport.Options(type, HfExport.parseSize(maxShardSize),
                line -> main.err().println("fsdp4j: export: " + line)).withMerge(merge);
        Path written = HfExport.export(source, out, options);
        main.out().println("fsdp4j: exported " + source + " to " + written);
        return 0;
    }
}
