package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * Every line of a varied corpus (code, many scripts, emoji sequences, whitespace runs, special-token look-alikes)
 * encodes to exactly the ids of transformers.js, for a byte-level BPE with NFC (Qwen3), one that groups digits in
 * threes (Llama 3) and a SentencePiece-style BPE with byte fallback (Llama 2). Expected ids: tools/tokenizer-oracle.
 */
class TokenizerOracleTest {
    static final List<String> NAMES = TestTokenizers.NAMES;

    @ParameterizedTest
    @FieldSource("NAMES")
    void linesMatchTheOracle(String name) {
        compare(name, "lines", TestTokenizers.corpusLines(), false);
    }

    @ParameterizedTest
    @FieldSource("NAMES")
    void multiLineBlocksMatchTheOracle(String name) {
        compare(name, "blocks", TestTokenizers.corpusBlocks(), false);
    }

    @ParameterizedTest
    @FieldSource("NAMES")
    void specialTokensAreAddedAsTheOracleAddsThem(String name) {
        List<String> lines = TestTokenizers.corpusLines();
        List<JsonNode> expected = TestTokenizers.jsonLines(name + "/special.jsonl");
        compare(name, "special", lines.subList(0, expected.size()), true);
    }

    @ParameterizedTest
    @FieldSource("NAMES")
    void decodingMatchesTheOracle(String name) {
        Tokenizer tok = TestTokenizers.tokenizer(name);
        List<JsonNode> ids = TestTokenizers.jsonLines(name + "/lines.jsonl");
        List<JsonNode> texts = TestTokenizers.jsonLines(name + "/decoded.jsonl");
        List<String> mismatches = new ArrayList<>();
        for (int i = 0; i < ids.size(); i++) {
            String got = tok.decode(TestTokenizers.ids(ids.get(i)), false);
            if (!got.equals(texts.get(i).asText())) {
                mismatches.add("line " + (i + 1) + ": expected " + texts.get(i) + " got \"" + got + "\"");
            }
        }
        assertThat(mismatches).as(name + " decode mismatches").isEmpty();
    }

    private static void compare(String name, String kind, List<String> texts, boolean special) {
        Tokenizer tok = TestTokenizers.tokenizer(name);
        List<JsonNode> expected = TestTokenizers.jsonLines(name + "/" + kind + ".jsonl");
        assertThat(expected).as("expected rows in %s/%s.jsonl (rerun tools/tokenizer-oracle after editing the corpus)",
                name, kind).hasSize(texts.size());
        List<String> mismatches = new ArrayList<>();
        for (int i = 0; i < texts.size(); i++) {
            int[] want = TestTokenizers.ids(expected.get(i));
            int[] got = tok.encode(texts.get(i), special);
            if (!Arrays.equals(want, got)) {
                mismatches.add(kind + " " + (i + 1) + " " + TestTokenizers.JSON.valueToTree(texts.get(i))
                        + ": expected " + Arrays.toString(want) + " got " + Arrays.toString(got));
            }
        }
        assertThat(mismatches).as("%s: %d of %d %s differ from transformers.js", name, mismatches.size(),
                texts.size(), kind).isEmpty();
    }
}
