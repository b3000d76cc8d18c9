package io.fsdp4j.data;

import static io.fsdp4j.data.DataFiles.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Alpaca and SQuAD files given directly as data.train / data.eval: told from their content, tokenized as
 * {@code fsdp4j prepare} would (its default prompt, the model's tokenizer or the byte tokenizer), so that they give
 * exactly the sequences and answers of prepare followed by the directory it writes.
 */
class DirectDataTest {
    private static final String ALPACA_LIST = """
            [
              {"instruction": "Give the capital.", "input": "France", "output": "Paris"},
              {"instruction": "Add", "input": "2+2", "output": "4"},
              {"instruction": "Say hi", "output": "hi"},
              {"instruction": "Count to three", "input": "", "output": "one two three"}
            ]
            """;
    private static final String ALPACA_LINES = """
            {"instruction": "Give the capital.", "input": "France", "output": "Paris"}
            {"instruction": "Add", "input": "2+2", "output": "4"}

            {"instruction": "Say hi", "output": "hi"}
            """;

    @TempDir
    Path dir;

    /** Prepared with prepare's defaults (nothing held out here), loaded from the directory: all documents. */
    private Dataset prepared(Path input, DatasetFormat format, String tokenizer, int vocab, int seqLen, boolean pack) {
        Path out = dir.resolve("out-" + input.getFileName() + "-" + Math.abs(tokenizer.hashCode()));
        Prepare.run(new Prepare.Options(input, format, tokenizer, out, 0, 0.0, 1234, Prepare.DEFAULT_PROMPT, true));
        return Datasets.load(out, vocab, seqLen, pack, Split.TRAIN);
    }

    private static void assertSame(Dataset direct, Dataset prepared) {
        assertThat(direct.sequences()).isNotEmpty();
        assertThat(direct.sequences()).usingRecursiveFieldByFieldElementComparator()
                .isEqualTo(prepared.sequences());
        assertThat(direct.answers()).usingRecursiveFieldByFieldElementComparator().isEqualTo(prepared.answers());
        assertThat(direct.documents()).isEqualTo(prepared.documents());
        assertThat(direct.truncated()).isEqualTo(prepared.truncated());
        assertThat(direct.skipped()).isEqualTo(prepared.skipped());
    }

    @Test
    void alpacaGivenDirectlyIsWhatPrepareWritesWithTheByteTokenizer() {
        Path list = write(dir, "alpaca.json", ALPACA_LIST), lines = write(dir, "alpaca.jsonl", ALPACA_LINES);
        for (Path file : new Path[] {list, lines}) {
            assertThat(DatasetFormat.detect(file)).isEqualTo(DatasetFormat.ALPACA);
            for (boolean pack : new boolean[] {false, true}) {
                for (int seqLen : new int[] {160, 200, 256}) { // the Stanford preamble alone is ~150 bytes
                    Dataset prepared = prepared(file, DatasetFormat.ALPACA, TextTokenizer.BYTES, 256, seqLen, pack);
                    for (Split split : Split.values()) {
                        assertSame(Datasets.load(file, null, 256, seqLen, pack, split), prepared);
                    }
                }
            }
        }
        Dataset d = Datasets.load(write(dir, "a.json", ALPACA_LIST), 256, 256, false, Split.TRAIN);
        EvalAnswer first = d.answers().getFirst();
        assertThat(ByteTokenizer.INSTANCE.decode(first.promptIds(), false))
                .isEqualTo(AlpacaFormat.prompt("Give the capital.", "France"));
        assertThat(first.answers()).containsExactly("Paris");
    }

    @Test
    void squadGivenDirectlyIsWhatPrepareWrites() {
        Path file = write(dir, "squad.json", PrepareTest.SQUAD);
        assertThat(DatasetFormat.detect(file)).isEqualTo(DatasetFormat.SQUAD);
        for (boolean pack : new boolean[] {false, true}) {
            for (int seqLen : new int[] {72, 128}) {
                assertSame(Datasets.load(file, null, 256, seqLen, pack, Split.EVAL),
                        prepared(file, DatasetFormat.SQUAD, TextTokenizer.BYTES, 256, seqLen, pack));
            }
        }
        Dataset d = Datasets.load(file, 256, 128, false, Split.TRAIN);
        assertThat(d.answers().getFirst().id()).isEqualTo("q1");
        assertThat(d.answers().getFirst().answers()).containsExactly("France", "in France");
    }

    @Test
    void aModelDirectoryTokenizesWithItsOwnTokenizer() {
        Path model = DataFiles.qwen3(dir);
        int vocab = 152_000;
        Path alpaca = write(dir, "alpaca.jsonl", ALPACA_LINES);
        Path squad = write(dir, "squad.json", PrepareTest.SQUAD);
        assertSame(Datasets.load(alpaca, model, vocab, 128, false, Split.TRAIN),
                prepared(alpaca, DatasetFormat.ALPACA, model.toString(), vocab, 128, false));
        assertSame(Datasets.load(squad, model, vocab, 64, true, Split.TRAIN),
                prepared(squad, DatasetFormat.SQUAD, model.toString(), vocab, 64, true));
        // The byte tokenizer would give other ids: the model's tokenizer was used.
        assertThat(Datasets.load(alpaca, model, vocab, 128, false, Split.TRAIN).sequences().getFirst().ids())
                .isNotEqualTo(Datasets.load(alpaca, null, 256, 256, false, Split.TRAIN).sequences().getFirst().ids());
    }

    @Test
    void preTokenizedJsonlIsToldFromItsContentWhateverItsName() {
        Path file = write(dir, "tokens.json", "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [4, 5]}\n");
        assertThat(DatasetFormat.detect(file)).isEqualTo(DatasetFormat.TOKENS);
        assertThat(Datasets.load(file, 10, 3, false, Split.TRAIN).sequences()).hasSize(2);
    }

    @Test
    void unrecognisedContentOrAMissingTokenizerIsAOneLineError() throws Exception {
        assertThatThrownBy(() -> Datasets.load(write(dir, "empty.jsonl", "\n  \n"), 256, 16, false, Split.TRAIN))
                .isInstanceOf(UserError.class).hasMessageContaining("holds no sequences (it is empty)");
        for (String content : new String[] {"hello", "{\"body\": \"x\"}", "42", "{\"data\" oops"}) {
            Path file = write(dir, "x.json", content);
            assertThatThrownBy(() -> Datasets.load(file, 256, 16, false, Split.TRAIN)).isInstanceOf(UserError.class)
                    .hasMessageNotContaining("\n")
                    .hasMessageContaining("unknown format; give JSONL").hasMessageContaining("{\"messages\": [...]}")
                    .hasMessageContaining("SQuAD v1.1 JSON").hasMessageContaining("pre-tokenized {\"input_ids\"");
        }
        Path alpaca = write(dir, "alpaca.json", ALPACA_LIST);
        assertThatThrownBy(() -> Datasets.load(alpaca, 1000, 64, false, Split.TRAIN)).isInstanceOf(UserError.class)
                .hasMessageContaining("set model.path to a model directory with a tokenizer.json");
        Path bare = Files.createDirectories(dir.resolve("bare-model"));
        assertThatThrownBy(() -> Datasets.load(alpaca, bare, 1000, 64, false, Split.TRAIN))
                .isInstanceOf(UserError.class).hasMessageContaining("has no tokenizer.json");
        assertThatThrownBy(() -> Datasets.load(alpaca, DataFiles.qwen3(dir), 1000, 64, false, Split.TRAIN))
                .isInstanceOf(UserError.class).hasMessageContaining("the model's vocabulary has 1000");
        assertThatThrownBy(() -> Datasets.load(dir.resolve("none.json"), 256, 16, false, Split.TRAIN))
                .isInstanceOf(UserError.class).hasMessageContaining("does not exist");
        Path badRecord = write(dir, "bad.jsonl", "{\"instruction\": \"x\"}\n");
        assertThatThrownBy(() -> Datasets.load(badRecord, 256, 16, false, Split.TRAIN)).isInstanceOf(UserError.class)
                .hasMessageContaining("line 1: missing \"output\"");
    }
}
