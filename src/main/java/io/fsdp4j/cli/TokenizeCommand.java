package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.data.DatasetFormat;
import io.fsdp4j.data.DatasetReader;
import io.fsdp4j.data.Datasets;
import io.fsdp4j.data.ReadOptions;
import io.fsdp4j.data.TextTokenizer;
import io.fsdp4j.data.Utf8Lines;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/**
 * {@code fsdp4j tokenize --tokenizer PATH [--input FILE] [--add-special-tokens]}, and with {@code --format} a dataset
 * as training sees it: {@code {"input_ids": [...], "labels": [...]}} per example.
 */
@Command(
        name = "tokenize",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Print one JSON array of token ids per input line, e.g. [9707,11,1879,0].",
            "Lines are UTF-8 and end at \\n (a \\r before it is dropped; any other \\r is text).",
            "The ids are those of the Hugging Face tokenizer (transformers' encode), or with --tokenizer bytes the"
                    + " line's UTF-8 bytes (the tiny preset's and the demo's vocabulary).",
            "With --format: a dataset file (.jsonl, .jsonl.gz, .jsonl.zst, .parquet, or a directory of them) as training sees it"
                    + " before packing, one {\"input_ids\":[...],\"labels\":[...]} per example (labels: -100 where"
                    + " no loss is taken). Conversations are rendered with the tokenizer's chat template (or"
                    + " --chat-template) and carry loss on the assistant's turns (or --train-on all).",
        })
final class TokenizeCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--tokenizer", required = true, paramLabel = "PATH",
            description = "a tokenizer.json, a model directory that has one, or 'bytes' (UTF-8 bytes, EOS = 0)")
    private String tokenizer;

    @Option(names = "--input", paramLabel = "FILE", description = "text to tokenize, one item a line; default: standard input")
    private Path input;

    @Option(names = "--add-special-tokens", description = "add the tokenizer's BOS/EOS tokens (default: none)")
    private boolean addSpecialTokens;

    @Option(names = "--format", paramLabel = "F",
            description = "read --input as a dataset: auto, messages, sharegpt, prompt_completion, text, alpaca, squad"
                    + " or tokens")
    private String format;

    @Option(names = "--chat-template", paramLabel = "FILE",
            description = "a Jinja chat template overriding the tokenizer's (with --format)")
    private Path chatTemplate;

    @Option(names = "--chat-template-timeout", paramLabel = "SECONDS",
            description = "the longest the chat template may take to render one conversation (default: 30)")
    private Double templateTimeout;

    @Option(names = "--train-on", paramLabel = "WHICH", defaultValue = "assistant",
            description = "the tokens of a conversation that carry loss: assistant (default) or all (with --format)")
    private String trainOn;

    @Override
    public Integer call() {
        if (format != null) {
            return dataset();
        }
        if (chatTemplate != null || templateTimeout != null) {
            throw new UserError((chatTemplate != null ? "--chat-template" : "--chat-template-timeout")
                    + " is for datasets: give --format too (such as --format messages)");
        }
        try (TextTokenizer tok = TextTokenizer.load(tokenizer); InputStream in = open()) {
            PrintStream out = main.out();
            Utf8Lines.forEach(in, (lineNo, text) -> out.println(jsonArray(tok.encode(text, addSpecialTokens))),
                    lineNo -> new UserError(source() + " is not valid UTF-8 (line " + lineNo + ")"));
        } catch (IOException e) {
            throw new UserError("cannot read " + source() + ": " + e.getMessage());
        }
        return 0;
    }

    /** {@code --format}: each example of the dataset, as training sees it before packing. */
    private int dataset() {
        if (input == null) {
            throw new UserError("--format reads a dataset file: give it with --input FILE");
        }
        if (!trainOn.equals("assistant") && !trainOn.equals("all")) {
            throw new UserError("--train-on must be assistant or all, got '" + trainOn + "'");
        }
        DatasetFormat named = DatasetFormat.parseOrAuto(format);
        var options = new ReadOptions(named, chatTemplate, trainOn.equals("all"), false, chatTemplateTimeout(templateTimeout));
        DatasetFormat read = options.formatOf(input);
        PrintStream out = main.out();
        try (TextTokenizer tok = TextTokenizer.load(tokenizer)) {
            DatasetReader.read(input, read, tok, Datasets.DIRECT_PROMPT, options, d -> {
                out.println("{\"input_ids\":" + jsonArray(d.tokens().ids()) + ",\"labels\":"
                        + jsonArray(d.tokens().labels()) + "}");
            });
        }
        return 0;
    }

    private InputStream open() throws IOException {
        if (input == null) {
            return new BufferedInputStream(System.in) {
                @Override
                public void close() {} // standard input stays open for the rest of the process
            };
        }
        try {
            return new BufferedInputStream(Files.newInputStream(input), 1 << 16);
        } catch (NoSuchFileException e) {
            throw new UserError("input file " + input + " does not exist");
        }
    }

    private String source() {
        return input == null ? "standard input" : input.toString();
    }

    private static String jsonArray(int[] ids) {
        StringBuilder json = new StringBuilder(ids.length * 7 + 2).append('[');
        for (int i = 0; i < ids.length; i++) {
            if (i > 0) {
                json.append(',');
            }
            json.append(ids[i]);
        }
        return json.append(']').toString();
    }

    /** {@code --chat-template-timeout}: seconds &gt; 0, or the renderer's default when not given. */
    static double chatTemplateTimeout(Double seconds) {
        if (seconds == null) {
            return io.fsdp4j.tokenizer.ChatTemplate.DEFAULT_TIME_LIMIT_SECONDS;
        }
        if (!(seconds > 0) || seconds.isInfinite()) {
            throw new UserError("--chat-template-timeout must be a number of seconds > 0, got " + seconds);
        }
        return seconds;
    }
}
