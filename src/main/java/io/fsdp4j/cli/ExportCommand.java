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

/** {@code fsdp4j export --checkpoint DIR --out DIR [--dtype bf16|fp32]}. */
@Command(
        name = "export",
        header = "Write a checkpoint as a Hugging Face model directory (safetensors and config.json).",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Write a checkpoint as a Hugging Face model directory (model.safetensors, config.json and the "
                    + "original model's tokenizer files) that transformers loads.",
        })
final class ExportCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--checkpoint", required = true, paramLabel = "DIR",
            description = "a checkpoint (step-NNNNNNNN), or a checkpoint.dir whose newest checkpoint is taken")
    private Path checkpoint;

    @Option(names = "--out", required = true, paramLabel = "DIR", description = "the new model directory (must not exist, or be empty)")
    private Path out;

    @Option(names = "--dtype", paramLabel = "DTYPE", defaultValue = "fp32",
            description = "weights' type: fp32, bf16 or fp16 (default: ${DEFAULT-VALUE})")
    private String dtype;

    @Override
    public Integer call() {
        DType type = switch (dtype) {
            case "fp32" -> DType.F32;
            case "bf16" -> DType.BF16;
            case "fp16" -> DType.F16;
            default -> throw new UserError("--dtype must be one of fp32, bf16, fp16, got '" + dtype + "'");
        };
        Path source = Checkpoints.resolve(checkpoint);
        Path written = HfExport.export(source, out, type);
        main.out().println("fsdp4j: exported " + source + " to " + written);
        return 0;
    }
}
