package io.fsdp4j.cli;

import io.fsdp4j.data.DatasetFormat;
import io.fsdp4j.data.InstructionPrompt;
import io.fsdp4j.data.Prepare;
import io.fsdp4j.data.TokenFilesMeta;
import io.fsdp4j.train.MetricsFile;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j prepare --input FILE --format F --tokenizer PATH --out DIR}. */
@Command(
        name = "prepare",
        header = "Tokenize a dataset once into token files for data.train / data.eval.",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Tokenize a dataset once into token files for data.train / data.eval: DIR/tokens.bin and DIR/labels.bin"
                    + " (int32 little-endian; label -100: no loss), DIR/documents.bin (int64 document offsets),"
                    + " DIR/meta.json, and for Alpaca and SQuAD DIR/answers.jsonl (for exact match and F1).",
            "Formats: alpaca (a JSON list or JSONL of instruction, input, output: the prompt carries no loss, the"
                    + " response and EOS do); squad (SQuAD v1.1 JSON: 'Context: ...\\nQuestion: ...\\nAnswer:', then"
                    + " the first answer); text (documents separated by blank lines, all tokens trained, EOS after"
                    + " each); tokens (JSONL of input_ids and optional labels, as is).",
            "Prints one JSON line: the counts written.",
        })
final class PrepareCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--input", required = true, paramLabel = "FILE", description = "the dataset file")
    private Path input;

    @Option(names = "--format", required = true, paramLabel = "FORMAT", description = "alpaca, squad, text or tokens")
    private String format;

    @Option(names = "--tokenizer", required = true, paramLabel = "PATH",
            description = "a tokenizer.json, a model directory that has one, or 'bytes' (UTF-8 bytes, EOS = 0: the"
                    + " tiny preset's vocabulary)")
    private String tokenizer;

    @Option(names = "--out", required = true, paramLabel = "DIR", description = "the directory to write")
    private Path out;

    @Option(names = "--seq-len", paramLabel = "N", defaultValue = "0",
            description = "leave out examples that carry no loss within their first N tokens (default: keep all)")
    private int seqLen;

    @Option(names = "--eval-fraction", paramLabel = "F", defaultValue = "0.05",
            description = "fraction of documents held out for evaluation, 0..1 (SQuAD: whole paragraphs);"
                    + " default ${DEFAULT-VALUE}")
    private double evalFraction;

    @Option(names = "--seed", paramLabel = "S", defaultValue = "1234",
            description = "seed of the held-out draw; default ${DEFAULT-VALUE}")
    private long seed;

    @Option(names = "--prompt", paramLabel = "STYLE",
            description = "Alpaca prompt: alpaca (the Stanford template) or compact ('### Instruction:\\n...\\n"
                    + "### Response:\\n'); default alpaca, as for Alpaca data given directly as data.train")
    private String prompt;

    @Option(names = "--overwrite", description = "replace the token files already in DIR")
    private boolean overwrite;

    @Override
    public Integer call() {
        var options = new Prepare.Options(input, DatasetFormat.parse(format), tokenizer, out, seqLen, evalFraction,
                seed, prompt == null ? Prepare.DEFAULT_PROMPT : InstructionPrompt.parse(prompt), overwrite);
        TokenFilesMeta meta = Prepare.run(options);
        main.out().println(MetricsFile.json(Prepare.summary(out, meta)));
        return 0;
    }
}
