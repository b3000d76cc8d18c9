package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.data.AlpacaFormat;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A SentencePiece-style BPE with byte fallback (as Mistral's and Llama 2's), built by hand so every id can be
 * checked by reasoning: a Metaspace pre-tokenizer (spaces become "▁", one "▁" before the text), 256 byte tokens
 * {@code <0x00>..<0xFF>} at ids 3..258 (byte b is id 3 + b), and these pieces and merges, applied lowest rank
 * first:
 * <pre>
 *   259 ▁   260 h   261 e   262 l   263 o   264 w   265 r   266 d   267 é
 *   rank 0 "▁ h" 268 ▁h     rank 1 "e l" 269 el     rank 2 "l o" 270 lo      rank 3 "▁h el" 271 ▁hel
 *   rank 4 "▁hel lo" 272 ▁hello   rank 5 "▁ w" 273 ▁w   rank 6 "o r" 274 or   rank 7 "▁w or" 275 ▁wor
 *   rank 8 "l d" 276 ld     rank 9 "▁wor ld" 277 ▁world
 * </pre>
 * A character outside the vocabulary falls back to the ids of its UTF-8 bytes. (The Llama 2 tokenizer, the same
 * kind at full size, is checked against transformers.js in {@link TokenizerOracleTest}.)
 */
class ByteFallbackTest {
    static final String[] PIECES = {"▁", "h", "e", "l", "o", "w", "r", "d", "é"};
    static final String[][] MERGES = {
        {"▁", "h"}, {"e", "l"}, {"l", "o"}, {"▁h", "el"}, {"▁hel", "lo"},
        {"▁", "w"}, {"o", "r"}, {"▁w", "or"}, {"l", "d"}, {"▁wor", "ld"},
    };

    static Tokenizer tok;

    @BeforeAll
    static void build(@TempDir Path dir) throws IOException {
        StringBuilder vocab = new StringBuilder("\"<unk>\": 0, \"<s>\": 1, \"</s>\": 2");
        for (int b = 0; b < 256; b++) {
            vocab.append(String.format(", \"<0x%02X>\": %d", b, 3 + b));
        }
        int id = 259;
        List<String> pieces = new ArrayList<>(List.of(PIECES));
        for (String[] m : MERGES) {
            pieces.add(m[0] + m[1]);
        }
        for (String piece : pieces) {
            vocab.append(", \"").append(piece).append("\": ").append(id++);
        }
        List<String> merges = new ArrayList<>();
        for (String[] m : MERGES) {
            merges.add("[\"" + m[0] + "\", \"" + m[1] + "\"]");
        }
        String special = "\"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true";
        String json = """
                {
                  "version": "1.0",
                  "truncation": null,
                  "padding": null,
                  "added_tokens": [
                    {"id": 0, "content": "<unk>", %1$s},
                    {"id": 1, "content": "<s>", %1$s},
                    {"id": 2, "content": "</s>", %1$s}
                  ],
                  "normalizer": null,
                  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
                  "post_processor": {
                    "type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                             {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}
                  },
                  "decoder": {"type": "Sequence", "decoders": [
                    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                    {"type": "ByteFallback"}, {"type": "Fuse"},
                    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
                  "model": {
                    "type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
                    "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
                    "vocab": {%2$s},
                    "merges": [%3$s]
                  }
                }
                """.formatted(special, vocab, String.join(", ", merges));
        Files.writeString(dir.resolve("tokenizer.json"), json);
        Files.writeString(dir.resolve("tokenizer_config.json"),
                "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": \"</s>\", \"special\": true}, \"unk_token\": \"<unk>\","
                        + " \"pad_token\": null, \"add_bos_token\": true}");
        tok = Tokenizer.load(dir);
    }

    @AfterAll
    static void close() {
        tok.close();
    }

    /** A UTF-8 byte's id. */
    static int b(int value) {
        return 3 + value;
    }

    @Test
    void wordsMergeByRank() {
        // "▁hello▁world": ▁h (0), el (1), lo (2), ▁hel (3), ▁hello (4), ▁w (5), or (6), ▁wor (7), ld (8), ▁world (9)
        assertThat(tok.encode("hello world", false)).containsExactly(272, 277);
        // The post-processor puts <s> first.
        assertThat(tok.encode("hello world", true)).containsExactly(1, 272, 277);
        // Two spaces: the first "▁" stays alone, the second joins "world".
        assertThat(tok.encode("hello  world", false)).containsExactly(272, 259, 277);
        // "▁hel": ranks 0, 1, 3; no "lo" to finish "▁hello".
        assertThat(tok.encode("hel", false)).containsExactly(271);
    }

    @Test
    void charactersOutsideTheVocabularyFallBackToTheirBytes() {
        // "i" is not a piece: its byte 0x69.
        assertThat(tok.encode("hi", false)).containsExactly(268, b(0x69));
        // "é" is a piece (267); "ñ" is not: C3 B1.
        assertThat(tok.encode("héllo", false)).containsExactly(268, 267, 262, 270);
        assertThat(tok.encode("ñ", false)).containsExactly(259, b(0xC3), b(0xB1));
        // An emoji: F0 9F 99 82.
        assertThat(tok.encode("🙂", false)).containsExactly(259, b(0xF0), b(0x9F), b(0x99), b(0x82));
        // "e" + combining acute (no normalizer here): "e" then CC 81.
        assertThat(tok.encode("e\u0301", false)).containsExactly(259, 261, b(0xCC), b(0x81));
    }

    @Test
    void decodingJoinsBytesBackIntoCharacters() {
        assertThat(tok.decode(new int[] {272, 277}, false)).isEqualTo("hello world");
        assertThat(tok.decode(new int[] {259, b(0xC3), b(0xB1)}, false)).isEqualTo("ñ");
        assertThat(tok.decode(new int[] {1, 268, b(0x69), 2}, true)).isEqualTo("hi");
        assertThat(tok.decode(new int[] {1, 268, b(0x69), 2}, false)).isEqualTo("<s> hi</s>");
        // A lone lead byte is no character: U+FFFD.
        assertThat(tok.decode(new int[] {b(0xC3)}, false)).isEqualTo("\uFFFD");
    }

    @Test
    void specialTokensAndVocabularySize() {
        assertThat(tok.vocabSize()).isEqualTo(278);
        assertThat(tok.bosId()).hasValue(1);
        assertThat(tok.eosId()).hasValue(2);
        assertThat(tok.padId()).isEmpty();
        assertThat(tok.eosToken()).hasValue("</s>");
        assertThat(tok.unkToken()).hasValue("<unk>");
    }

    @Test
    void alpacaLabelsCoverTheResponseAndEos() {
        var s = AlpacaFormat.tokenize(tok, "hello", " world");
        assertThat(s.ids()).containsExactly(1, 272, 277, 2);
        assertThat(s.labels()).containsExactly(-100, -100, 277, 2);
        // A token across the boundary ("▁hel" + "lo" is "▁hello") is trained on: masking stops where the
        // prompt's own ids part from the whole text's.
        var across = AlpacaFormat.tokenize(tok, "hel", "lo");
        assertThat(across.ids()).containsExactly(1, 272, 2);
        assertThat(across.labels()).containsExactly(-100, 272, 2);
    }
}
