package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.data.AlpacaFormat;
import io.fsdp4j.data.Sequence;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The Stanford Alpaca prompts, and ids/labels that train on the response and EOS only. */
class AlpacaFormatTest {

    @Test
    void promptWithoutInput() {
        assertThat(AlpacaFormat.prompt("Name a color.", null)).isEqualTo(
                "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n"
                        + "\n"
                        + "### Instruction:\n"
                        + "Name a color.\n"
                        + "\n"
                        + "### Response:\n");
        assertThat(AlpacaFormat.prompt("Name a color.", "")).isEqualTo(AlpacaFormat.prompt("Name a color.", null));
    }

    @Test
    void promptWithInput() {
        assertThat(AlpacaFormat.prompt("Translate to French.", "Good morning")).isEqualTo(
                "Below is an instruction that describes a task, paired with an input that provides further context. "
                        + "Write a response that appropriately completes the request.\n"
                        + "\n"
                        + "### Instruction:\n"
                        + "Translate to French.\n"
                        + "\n"
                        + "### Input:\n"
                        + "Good morning\n"
                        + "\n"
                        + "### Response:\n");
    }

    @Test
    void labelsMaskThePromptAndEndWithEos() {
        Tokenizer qwen = TestTokenizers.tokenizer("qwen3");
        String prompt = AlpacaFormat.prompt("Translate to French.", "Good morning");
        Sequence s = AlpacaFormat.tokenize(qwen, prompt, "Bonjour");
        int[] promptIds = qwen.encode(prompt, true);
        int[] whole = qwen.encode(prompt + "Bonjour", true);

        assertThat(s.ids()).hasSize(whole.length + 1);
        assertThat(Arrays.copyOf(s.ids(), whole.length)).containsExactly(whole);
        assertThat(s.ids()[whole.length]).isEqualTo(151_645); // <|im_end|>, Qwen3's eos_token
        for (int i = 0; i < s.length(); i++) {
            assertThat(s.labels()[i]).as("label %d", i).isEqualTo(i < promptIds.length ? -100 : s.ids()[i]);
        }
        assertThat(qwen.decode(Arrays.copyOfRange(s.ids(), promptIds.length, s.length()), false))
                .isEqualTo("Bonjour<|im_end|>");
    }

    @Test
    void aBosAddingTokenizerStartsWithBos() {
        Tokenizer llama2 = TestTokenizers.tokenizer("llama2");
        Sequence s = AlpacaFormat.tokenize(llama2, AlpacaFormat.prompt("Say hi.", null), "Hi!");
        assertThat(s.ids()[0]).isEqualTo(1);
        assertThat(s.labels()[0]).isEqualTo(-100);
        assertThat(s.ids()[s.length() - 1]).isEqualTo(2);
        assertThat(s.labels()[s.length() - 1]).isEqualTo(2);
        assertThat(Arrays.stream(s.labels()).filter(l -> l != -100).count()).isPositive();
    }
}
