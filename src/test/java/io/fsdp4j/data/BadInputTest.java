package io.fsdp4j.data;

import static io.fsdp4j.data.DataFiles.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every bad input is a one-line {@link UserError} that names the file and the line (or record) at fault. */
class BadInputTest {
    @TempDir
    Path dir;

    private String error(String name, String content, DatasetFormat format) {
        return error(write(dir, name, content), format);
    }

    private String error(Path input, DatasetFormat format) {
        Throwable t = org.assertj.core.api.Assertions.catchThrowable(
                () -> Prepare.run(DataFiles.options(input, format, TextTokenizer.BYTES, dir.resolve("out"))));
        assertThat(t).isInstanceOf(UserError.class);
        assertThat(t.getMessage()).doesNotContain("\n").contains(input.toString());
        return t.getMessage();
    }

    @Test
    void malformedJsonlNamesTheLine() {
        String m = error("a.jsonl", """
                {"instruction": "a", "output": "b"}

                {"instruction": "a", "output": }
                """, DatasetFormat.ALPACA);
        assertThat(m).startsWith(dir.resolve("a.jsonl") + " line 3: not valid JSON");
    }

    @Test
    void malformedJsonListNamesTheLine() {
        String m = error("a.json", """
                [
                 {"instruction": "a", "output": "b"},
                 {"instruction": "a" "output": "b"}
                ]""", DatasetFormat.ALPACA);
        assertThat(m).startsWith(dir.resolve("a.json") + " line 3: not valid JSON");
        assertThat(error("b.json", "[\n {\"instruction\": \"a\", \"output\": \"b\"},\n", DatasetFormat.ALPACA))
                .startsWith(dir.resolve("b.json") + " line ").contains("not valid JSON");
    }

    @Test
    void aRecordMissingAFieldNamesTheLineAndTheField() {
        assertThat(error("a.jsonl", "{\"instruction\": \"a\", \"output\": \"b\"}\n{\"instruction\": \"a\"}\n",
                DatasetFormat.ALPACA)).isEqualTo(dir.resolve("a.jsonl") + " line 2: missing \"output\"");
        assertThat(error("b.json", "[{\"instruction\": \"a\", \"output\": \"b\"},\n\n {\"output\": \"b\"}]",
                DatasetFormat.ALPACA)).isEqualTo(dir.resolve("b.json") + " line 3 (record 2): missing \"instruction\"");
        assertThat(error("c.jsonl", "{\"instruction\": 5, \"output\": \"b\"}\n", DatasetFormat.ALPACA))
                .isEqualTo(dir.resolve("c.jsonl") + " line 1: \"instruction\" must be a string, found 5");
        assertThat(error("d.json", "[1, 2]\n", DatasetFormat.ALPACA)).isEqualTo(dir.resolve("d.json")
                + " line 1 (record 1): expected an object with \"instruction\", \"input\" (optional) and \"output\"");
        assertThat(error("e.jsonl", "instruction: a\n", DatasetFormat.ALPACA)).startsWith(dir.resolve("e.jsonl")
                + " line 1: not valid JSON").endsWith("(Alpaca data is a JSON list or JSONL)");
    }

    @Test
    void squadErrorsNameTheLineAndTheQuestion() {
        String squad = """
                {"data": [{"paragraphs": [{"context": "c", "qas": [{"id": "x", "question": "q",
                                                                    "answers": [{"text": "a"}]}]}]},
                  {"paragraphs": [{"context": "c", "qas": [{"id": "y", "answers": [{"text": "a"}]}]}]}]}
                """;
        assertThat(error("s.json", squad, DatasetFormat.SQUAD))
                .isEqualTo(dir.resolve("s.json") + " line 3 (data[1].paragraphs[0].qas[0]): missing \"question\"");
        assertThat(error("t.json", squad.replace("\"answers\": [{\"text\": \"a\"}]}]}]},", "\"answers\": []}]}]},"),
                DatasetFormat.SQUAD)).contains("line 1 (data[0].paragraphs[0].qas[0]): missing \"answers\"");
        assertThat(error("u.json", "{\"version\": \"1.1\"}", DatasetFormat.SQUAD)).contains("no \"data\" list");
        assertThat(error("v.json", "{\"data\": [\n{\"paragraphs\": [}]}", DatasetFormat.SQUAD))
                .startsWith(dir.resolve("v.json") + " line 2: not valid JSON");
    }

    @Test
    void aDatasetWithoutAUsableExampleIsRefused() {
        assertThat(error("empty.jsonl", "\n\n", DatasetFormat.ALPACA))
                .isEqualTo(dir.resolve("empty.jsonl") + " has no usable example");
        assertThat(error("empty.txt", "\n  \n\n", DatasetFormat.TEXT)).endsWith("has no usable example");
        assertThat(error("empty.json", "[]", DatasetFormat.ALPACA)).endsWith("has no usable example");
        assertThat(error("nosquad.json", "{\"data\": []}", DatasetFormat.SQUAD)).endsWith("has no usable example");
        assertThat(error("noloss.jsonl", "{\"input_ids\": [1, 2], \"labels\": [-100, -100]}\n", DatasetFormat.TOKENS))
                .endsWith("has no usable example (1 examples carry no loss)");
    }

    @Test
    void anIdOutsideTheVocabularyNamesTheLine() {
        assertThat(error("t.jsonl", "{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, 256]}\n", DatasetFormat.TOKENS))
                .isEqualTo(dir.resolve("t.jsonl") + " line 2: token id 256 is outside the vocabulary (0..255)");
    }

    @Test
    void invalidUtf8NamesTheLine() {
        byte[] bytes = "ok\n\nalso ok\n\u00ff bad\n".getBytes(StandardCharsets.ISO_8859_1);
        assertThat(error(write(dir, "t.txt", bytes), DatasetFormat.TEXT))
                .isEqualTo(dir.resolve("t.txt") + " line 4: not valid UTF-8");
        byte[] json = "[\n{\"instruction\": \"a\", \"output\": \"\u00ff\"}]".getBytes(StandardCharsets.ISO_8859_1);
        assertThat(error(write(dir, "a.json", json), DatasetFormat.ALPACA))
                .startsWith(dir.resolve("a.json") + " line 2: not valid UTF-8");
    }

    @Test
    void badOptionsAreRefused() {
        Path input = write(dir, "a.jsonl", "{\"instruction\": \"a\", \"output\": \"b\"}\n");
        Path out = dir.resolve("o");
        Path missing = dir.resolve("missing.json");
        assertThatThrownBy(() -> Prepare.run(DataFiles.options(missing, DatasetFormat.ALPACA, "bytes", out)))
                .isInstanceOf(UserError.class).hasMessageContaining("missing.json does not exist");
        assertThatThrownBy(() -> new Prepare.Options(input, DatasetFormat.ALPACA, "bytes", out, 0, 1.5, 0,
                InstructionPrompt.COMPACT, false))
                .isInstanceOf(UserError.class).hasMessage("--eval-fraction must lie in [0, 1], got 1.5");
        assertThatThrownBy(() -> DatasetFormat.parse("csv")).isInstanceOf(UserError.class)
                .hasMessage("unknown dataset format 'csv'; give one of messages, sharegpt, prompt_completion, alpaca,"
                        + " squad, text, tokens");
        assertThatThrownBy(() -> InstructionPrompt.parse("chat")).isInstanceOf(UserError.class);
        String tokenizer = dir.resolve("no-tokenizer").toString();
        assertThatThrownBy(() -> Prepare.run(DataFiles.options(input, DatasetFormat.ALPACA, tokenizer, out)))
                .isInstanceOf(UserError.class).hasMessageContaining("no-tokenizer");
    }
}
