package io.fsdp4j.cli;

import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code fsdp4j tokenize --tokenizer PATH [--input FILE]}: not built yet. */
@Command(
        name = "tokenize",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = "Print one JSON array of token ids per input line (not yet available).")
final class TokenizeCommand implements Callable<Integer> {
    @Option(names = "--tokenizer", required = true, paramLabel = "PATH",
            description = "a tokenizer.json, or a model directory that has one")
    private Path tokenizer;

    @Option(names = "--input", paramLabel = "FILE", description = "text to tokenize, one item a line; default: standard input")
    private Path input;

    @Option(names = "--add-special-tokens", description = "add the tokenizer's BOS/EOS tokens (default: none)")
    private boolean addSpecialTokens;

    @Override
    public Integer call() {
        throw PlannedCommands.notAvailable("tokenize");
    }
}
