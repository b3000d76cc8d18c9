package io.fsdp4j.data;

import io.fsdp4j.UserError;
import java.util.Arrays;
import java.util.Locale;
import java.util.Objects;

/**
 * How an instruction (and its optional input) becomes the prompt that its response follows. {@link #ALPACA}: the
 * Stanford Alpaca template ({@link AlpacaFormat}, about 150 bytes of preamble). {@link #COMPACT}: the same
 * section headers without the preamble, for small byte-level models such as the built-in demo's:
 * <pre>
 * ### Instruction:
 * {instruction}
 * ### Input:            (only with an input)
 * {input}
 * ### Response:
 * </pre>
 */
public enum InstructionPrompt {
    ALPACA,
    COMPACT;

    /** The prompt; an {@code input} that is null or empty leaves the input section out. */
    public String prompt(String instruction, String input) {
        Objects.requireNonNull(instruction, "instruction");
        return switch (this) {
            case ALPACA -> AlpacaFormat.prompt(instruction, input);
            case COMPACT -> input == null || input.isEmpty()
                    ? "### Instruction:\n" + instruction + "\n### Response:\n"
                    : "### Instruction:\n" + instruction + "\n### Input:\n" + input + "\n### Response:\n";
        };
    }

    /** The lower-case name used on the command line and in {@code meta.json}. */
    public String key() {
        return name().toLowerCase(Locale.ROOT);
    }

    public static InstructionPrompt parse(String key) {
        return Arrays.stream(values()).filter(p -> p.key().equals(key)).findFirst().orElseThrow(() -> new UserError(
                "unknown prompt format '" + key + "'; give alpaca or compact"));
    }
}
