package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.data.DatasetFormat;
import io.fsdp4j.data.InstructionPrompt;
import io.fsdp4j.data.Prepare;
import io.fsdp4j.data.ReadOptions;
import io.fsdp4j.data.TokenFilesMeta;
import io.fsdp4j.report.MetricsFile;
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
            "Formats: messages ({\"messages\": [{\"role\", \"content\"}, ...]} rendered with the chat template; loss on"
                    + " the assistant's turns, or all with --train-on all); sharegpt ({\"conversations\": [{\"from\","
                    + " \"value\"}]}); prompt_completion (loss on the completion and EOS); text ({\"text\"} JSONL, or"
                    + " plain text whose documents are separated by blank lines; all tokens trained, EOS after each);"
                    + " alpaca (a JSON list or JSONL of instruction, input, output: the prompt carries no loss, the"
                    + " response and EOS do); squad (SQuAD v1.1 JSON: 'Context: ...\\nQuestion: ...\\nAnswer:', then"
                    + " the first answer); tokens (JSONL of input_ids and optional labels, as is).",
            "The input streams through (larger than memory too), tokenized on all cores; progress every few seconds"
                    + " on standard error. Prints one JSON line: the counts written.",
        })
final class PrepareCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--input", required = true, paramLabel = "FILE",
            description = "the dataset file (.jsonl, .json, .jsonl.gz, .jsonl.zst, .parquet, .txt) or a directory of them")
    private Path input;

    @Option(names = "--format", paramLabel = "FORMAT", defaultValue = "auto",
            description = "auto (told from the content; the default), messages, sharegpt, prompt_completion, text,"
                    + " alpaca, squad or tokens")
    private String format;

    @Option(names = "--chat-template", paramLabel = "FILE",
            description = "a Jinja chat template overriding the tokenizer's (messages, sharegpt)")
    private Path chatTemplate;

    @Option(names = "--chat-template-timeout", paramLabel = "SECONDS",
            description = "the longest the chat template may take to render one conversation (default: 30)")
    private Double templateTimeout;

    @Option(names = "--train-on", paramLabel = "WHICH", defaultValue = "assistant",
            description = "the tokens of a conversation that carry loss: assistant (default) or all")
    private String trainOn;

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
        if (!trainOn.equals("assistant") && !trainOn.equals("all")) {
            throw new UserError("--train-on must be assistant or all, got '" + trainOn + "'");
        }
        var chat = new ReadOptions(DatasetFormat.parseOrAuto(format), chatTemplate, trainOn.equals("all"), false,
                TokenizeCommand.chatTemplateTimeout(templateTimeout));
        var options = new Prepare.Options(input, chat.formatOf(input), tokenizer, out, seqLen, evalFraction,
                seed, prompt == null ? Prepare.DEFAULT_PROMPT : InstructionPrompt.parse(prompt), overwrite, chat);
        TokenFilesMeta meta = Prepare.run(options, main.err());
        main.out().println(MetricsFile.json(Prepare.summary(out, meta)));
        return 0;
    }
}
