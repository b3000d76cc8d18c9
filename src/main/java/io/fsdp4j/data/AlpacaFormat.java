package io.fsdp4j.data;

import io.fsdp4j.UserError;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tokenizer.Tokenizer;
import java.util.Arrays;
import java.util.Objects;

/**
 * The Stanford Alpaca prompt format: an instruction, an optional input, then "### Response:\n" after which the
 * response follows. Supervised fine-tuning trains on the response only.
 */
public final class AlpacaFormat {
    private static final String WITH_INPUT = "Below is an instruction that describes a task, paired with an input"
            + " that provides further context. Write a response that appropriately completes the request.\n\n"
            + "### Instruction:\n%s\n\n### Input:\n%s\n\n### Response:\n";
    private static final String WITHOUT_INPUT = "Below is an instruction that describes a task."
            + " Write a response that appropriately completes the request.\n\n"
            + "### Instruction:\n%s\n\n### Response:\n";

    private AlpacaFormat() {}

    /** The prompt; an {@code input} that is null or empty selects the template without an input section. */
    public static String prompt(String instruction, String input) {
        Objects.requireNonNull(instruction, "instruction");
        if (input == null || input.isEmpty()) {
            return WITHOUT_INPUT.formatted(instruction);
        }
        return WITH_INPUT.formatted(instruction, input);
    }

    /**
     * The ids of {@code prompt + response} followed by EOS, and labels that train on the response and the EOS only
     * (the prompt's positions are {@value TokenBatch#IGNORE}), as Stanford Alpaca's training script builds them:
     * the text is tokenized whole, with the tokenizer's special tokens (a BOS where it adds one), and the
     * positions of the prompt's own tokenization are masked. Where the two tokenizations part before the prompt's
     * end (a token spanning the boundary), masking stops where they part.
     */
    public static Sequence tokenize(Tokenizer tokenizer, String prompt, String response) {
        int eos = tokenizer.eosId().orElseThrow(() -> new UserError(
                "the tokenizer has no EOS token (eos_token in tokenizer_config.json) to end responses with"));
        int[] promptIds = tokenizer.encode(prompt, true);
        int[] textIds = tokenizer.encode(prompt + response, true);
        boolean endsWithEos = textIds.length > 0 && textIds[textIds.length - 1] == eos; // add_eos_token tokenizers
        int[] ids = endsWithEos ? textIds : Arrays.copyOf(textIds, textIds.length + 1);
        ids[ids.length - 1] = eos;
        int masked = Arrays.mismatch(promptIds, textIds);
        masked = masked < 0 ? promptIds.length : Math.min(masked, promptIds.length);
        int[] labels = ids.clone();
        Arrays.fill(labels, 0, masked, TokenBatch.IGNORE);
        return new Sequence(ids, labels);
    }
}
