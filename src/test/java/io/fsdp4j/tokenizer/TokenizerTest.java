package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Loading a tokenizer from a file or a model directory, its special tokens, and bad input as one-line UserErrors. */
class TokenizerTest {
    @TempDir
    Path tmp;

    @Test
    void knownIds() {
        assertThat(TestTokenizers.tokenizer("qwen3").encode("Hello, world!", false)).containsExactly(9707, 11, 1879, 0);
        assertThat(TestTokenizers.tokenizer("llama3").encode("Hello, world!", false)).containsExactly(9906, 11, 1917, 0);
        // The "llama2" package's SentencePiece BPE (Mistral 7B's vocabulary) puts <s> first.
        assertThat(TestTokenizers.tokenizer("llama2").encode("Hello, world!", true))
                .containsExactly(1, 22557, 28725, 1526, 28808);
    }

    @Test
    void specialTokensComeFromTheConfig() {
        Tokenizer qwen = TestTokenizers.tokenizer("qwen3");
        assertThat(qwen.vocabSize()).isEqualTo(151_669); // 151,643 BPE tokens + 26 added
        assertThat(qwen.bosToken()).isEmpty();
        assertThat(qwen.bosId()).isEmpty();
        assertThat(qwen.eosToken()).hasValue("<|im_end|>");
        assertThat(qwen.eosId()).hasValue(151_645);
        assertThat(qwen.padToken()).hasValue("<|endoftext|>");
        assertThat(qwen.padId()).hasValue(151_643);
        assertThat(qwen.chatTemplate()).hasValueSatisfying(t -> assertThat(t).contains("<|im_start|>"));

        Tokenizer llama3 = TestTokenizers.tokenizer("llama3");
        assertThat(llama3.vocabSize()).isEqualTo(128_256);
        assertThat(llama3.bosId()).hasValue(128_000);
        assertThat(llama3.eosId()).hasValue(128_001);
        assertThat(llama3.padId()).isEmpty();

        Tokenizer llama2 = TestTokenizers.tokenizer("llama2");
        assertThat(llama2.vocabSize()).isEqualTo(32_000);
        assertThat(llama2.bosId()).hasValue(1);
        assertThat(llama2.eosId()).hasValue(2);
        assertThat(llama2.unkToken()).hasValue("<unk>");
    }

    @Test
    void specialTokenTextIsOneTokenAndCanBeSkippedWhenDecoding() {
        Tokenizer qwen = TestTokenizers.tokenizer("qwen3");
        int[] ids = qwen.encode("<|im_start|>user\nhi<|im_end|>", false);
        assertThat(ids[0]).isEqualTo(151_644);
        assertThat(ids[ids.length - 1]).isEqualTo(151_645);
        assertThat(qwen.decode(ids, false)).isEqualTo("<|im_start|>user\nhi<|im_end|>");
        assertThat(qwen.decode(ids, true)).isEqualTo("user\nhi");
    }

    @Test
    void aBareTokenizerJsonLoadsWithoutConfig() throws IOException {
        Path file = Files.copy(TestTokenizers.modelDir("qwen3").resolve("tokenizer.json"), tmp.resolve("tokenizer.json"));
        try (Tokenizer tok = Tokenizer.load(file)) {
            assertThat(tok.encode("Hello, world!", false)).containsExactly(9707, 11, 1879, 0);
            assertThat(tok.vocabSize()).isEqualTo(151_669);
            assertThat(tok.eosId()).isEmpty();
            assertThat(tok.chatTemplate()).isEmpty();
        }
    }

    @Test
    void longTextIsNotTruncated() {
        String text = "word ".repeat(5000).strip(); // "word" and 4999 " word"
        assertThat(TestTokenizers.tokenizer("qwen3").encode(text, false)).hasSize(5000);
    }

    @Test
    void configTokensMayBeObjectsAndTemplatesNamedOrInAFile() throws IOException {
        Path dir = Files.createDirectory(tmp.resolve("model"));
        Files.copy(TestTokenizers.modelDir("llama3").resolve("tokenizer.json"), dir.resolve("tokenizer.json"));
        Files.writeString(dir.resolve("tokenizer_config.json"), """
                {"bos_token": {"content": "<|begin_of_text|>", "lstrip": false, "__type": "AddedToken"},
                 "eos_token": "<|eot_id|>", "pad_token": {"content": "<|reserved_special_token_2|>"},
                 "chat_template": [{"name": "tool_use", "template": "tools"},
                                   {"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"}]}
                """);
        try (Tokenizer tok = Tokenizer.load(dir)) {
            assertThat(tok.bosId()).hasValue(128_000);
            assertThat(tok.eosId()).hasValue(128_009);
            assertThat(tok.padId()).hasValue(128_004);
            assertThat(tok.applyChatTemplate(java.util.List.of(Message.user("x")), false)).isEqualTo("<|begin_of_text|>x");
        }
        Files.writeString(dir.resolve("tokenizer_config.json"), "{\"eos_token\": \"<|eot_id|>\"}");
        Files.writeString(dir.resolve("chat_template.jinja"), "[{{ messages[0].role }}]\n");
        try (Tokenizer tok = Tokenizer.load(dir)) {
            assertThat(tok.applyChatTemplate(java.util.List.of(Message.user("x")), false)).isEqualTo("[user]");
        }
    }

    @Test
    void decodeRejectsIdsOutsideTheVocabulary() {
        Tokenizer qwen = TestTokenizers.tokenizer("qwen3");
        assertThatThrownBy(() -> qwen.decode(new int[] {1, 151_669}, false))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("151669");
    }

    @Test
    void badInputIsAOneLineUserError() throws IOException {
        assertUserError(tmp.resolve("nope.json"), "does not exist");
        assertUserError(tmp, "has no tokenizer.json");
        assertUserError(Files.writeString(tmp.resolve("truncated.json"), "{\"model\": {\"vocab\": {\"a\": 0,"),
                "not valid JSON");
        assertUserError(Files.writeString(tmp.resolve("list.json"), "[1, 2]"), "not a Hugging Face tokenizer.json");
        assertUserError(Files.writeString(tmp.resolve("config.json"), "{\"hidden_size\": 64}"),
                "not a Hugging Face tokenizer.json", "no \"model\"");
        assertUserError(Files.writeString(tmp.resolve("odd.json"), "{\"model\": {\"type\": \"Nonsense\"}}"),
                "not a tokenizer the Hugging Face tokenizers library can load");
        Path dir = Files.createDirectory(tmp.resolve("badconfig"));
        Files.copy(TestTokenizers.modelDir("llama2").resolve("tokenizer.json"), dir.resolve("tokenizer.json"));
        Files.writeString(dir.resolve("tokenizer_config.json"), "{\"eos_token\": ");
        assertUserError(dir, "tokenizer_config.json", "not valid JSON");
    }

    private static void assertUserError(Path path, String... fragments) {
        assertThatThrownBy(() -> Tokenizer.load(path).close())
                .isInstanceOf(UserError.class)
                .satisfies(e -> {
                    assertThat(e.getMessage()).doesNotContain("\n");
                    for (String f : fragments) {
                        assertThat(e.getMessage()).contains(f);
                    }
                });
    }
}
