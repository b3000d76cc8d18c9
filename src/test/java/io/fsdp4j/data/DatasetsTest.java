package io.fsdp4j.data;

import static io.fsdp4j.data.DataFiles.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.cli.Main;
import io.fsdp4j.model.TokenBatch;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The one entry to training data: token files, pre-tokenized JSONL, text as bytes, and the demo's instructions. */
class DatasetsTest {
    @TempDir
    Path dir;

    private Path prepared(double evalFraction) {
        StringBuilder jsonl = new StringBuilder();
        for (int i = 0; i < 40; i++) {
            jsonl.append("{\"instruction\": \"Echo: ").append(i).append("\", \"output\": \"").append(i).append("\"}\n");
        }
        Path out = dir.resolve("prepared-" + evalFraction);
        Prepare.run(new Prepare.Options(write(dir, "a.jsonl", jsonl.toString()), DatasetFormat.ALPACA, "bytes", out, 0,
                evalFraction, 3, InstructionPrompt.COMPACT, true));
        return out;
    }

    @Test
    void tokenFilesGiveTheirSplits() {
        Path out = prepared(0.25);
        Dataset train = Datasets.load(out, 256, 48, false, Split.TRAIN);
        Dataset eval = Datasets.load(out, 256, 48, false, Split.EVAL);
        assertThat(train.sequences()).hasSize(30).allSatisfy(s -> assertThat(s.length()).isEqualTo(48));
        assertThat(eval.sequences()).hasSize(10);
        assertThat(eval.answers()).hasSize(10);
        assertThat(train.truncated()).isZero();
        TokenFiles files = TokenFiles.open(out);
        long longer = Arrays.stream(files.documents(Split.TRAIN)).filter(d -> files.length(d) > 41).count();
        assertThat(longer).isBetween(1L, 29L); // two-digit echoes
        assertThat(Datasets.load(out, 256, 41, false, Split.TRAIN).truncated()).isEqualTo(longer);
        Set<String> trainIds = new HashSet<>(), evalIds = new HashSet<>();
        train.answers().forEach(a -> trainIds.add(a.id()));
        eval.answers().forEach(a -> evalIds.add(a.id()));
        assertThat(trainIds).hasSize(30).doesNotContainAnyElementsOf(evalIds);
        EvalAnswer a = eval.answers().getFirst();
        assertThat(ByteTokenizer.INSTANCE.decode(a.promptIds(), false))
                .isEqualTo("### Instruction:\nEcho: " + a.answers().getFirst() + "\n### Response:\n");

        // Packed whole: two documents of more than 32 bytes never share a window of 64.
        Dataset packed = Datasets.load(out, 256, 64, true, Split.TRAIN);
        assertThat(Arrays.stream(files.documents(Split.TRAIN)).allMatch(d -> files.length(d) > 32)).isTrue();
        assertThat(packed.sequences()).hasSize(30);
        assertThat(packed.sequences().getFirst().documentStarts()).isNotNull();
        assertThat(Datasets.load(out, 256, 64, false, Split.ALL).sequences()).hasSize(40);
    }

    @Test
    void withoutPackingDocumentsWithoutALossWithinTheSequenceAreLeftOut() {
        Path file = write(dir, "t.jsonl", """
                {"input_ids": [1, 2, 3, 4], "labels": [-100, -100, -100, 4]}
                {"input_ids": [1, 2, 3], "labels": [-100, 2, 3]}
                """);
        Dataset d = Datasets.load(file, 10, 3, false, Split.TRAIN);
        assertThat(d.sequences()).hasSize(1);
        assertThat(d.sequences().getFirst().labels()).containsExactly(-100, 2, 3);
        assertThat(d.skipped()).isEqualTo(1);
        assertThat(d.documents()).isEqualTo(2);
        Dataset packed = Datasets.load(file, 10, 3, true, Split.TRAIN);
        assertThat(packed.sequences()).hasSize(2); // whole documents, the first cut to 3
        assertThat(packed.truncated()).isEqualTo(1);
        Dataset dropped = Datasets.load(file, null, 10, 3, true, Split.TRAIN, new ReadOptions(null, null, false, true));
        assertThat(dropped.sequences()).hasSize(1);
        assertThat(dropped.skipped()).isEqualTo(1);
        assertThat(dropped.truncated()).isZero();
        assertThatThrownBy(() -> Datasets.load(prepared(0), 256, 32, false, Split.TRAIN)).isInstanceOf(UserError.class)
                .hasMessageEndingWith(": no document carries a loss within its first 32 tokens (the prompts are longer);"
                        + " raise data.seq_len or set data.pack=true");
    }

    @Test
    void splitsThatAreEmptyOrAVocabularyThatIsTooSmallAreRefused() {
        assertThatThrownBy(() -> Datasets.load(prepared(0), 256, 32, false, Split.EVAL)).isInstanceOf(UserError.class)
                .hasMessageContaining("hold no held-out documents").hasMessageContaining("--eval-fraction 1");
        assertThatThrownBy(() -> Datasets.load(prepared(1), 256, 32, false, Split.TRAIN)).isInstanceOf(UserError.class)
                .hasMessageContaining("hold no training documents");
        assertThatThrownBy(() -> Datasets.load(prepared(0), 128, 32, false, Split.TRAIN)).isInstanceOf(UserError.class)
                .hasMessageContaining("prepared with the tokenizer bytes of 256 tokens; the model's vocabulary has")
                .hasMessageEndingWith(" 128");
        Path neither = dir.resolve("neither");
        assertThat(neither.toFile().mkdir()).isTrue();
        assertThatThrownBy(() -> Datasets.load(neither, 256, 32, false, Split.TRAIN)).isInstanceOf(UserError.class)
                .hasMessageContaining("has no meta.json");
    }

    @Test
    void preTokenizedJsonlIsWholeInEverySplitAndCanBePacked() {
        Path file = write(dir, "t.jsonl", """
                {"input_ids": [1, 2, 3]}
                {"input_ids": [4, 5], "labels": [-100, 5]}
                """);
        Dataset d = Datasets.load(file, 10, 4, false, Split.EVAL);
        assertThat(d.sequences()).hasSize(2);
        assertThat(d.sequences().get(1).ids()).containsExactly(4, 5, 0, 0);
        assertThat(d.sequences().get(1).labels()).containsExactly(-100, 5, -100, -100);
        Dataset packed = Datasets.load(file, 10, 4, true, Split.TRAIN);
        assertThat(packed.sequences()).hasSize(2); // 3 + 2 > 4: never cut
        assertThat(packed.sequences().get(0).ids()).containsExactly(1, 2, 3, 0);
        assertThat(packed.sequences().get(0).documentStarts()).containsExactly(0, 0, 0, 3);
        assertThat(packed.sequences().get(1).ids()).containsExactly(4, 5, 0, 0);
        assertThat(packed.packingEfficiency()).isEqualTo(4.0 / 8);
    }

    @Test
    void textIsReadAsBytesForByteModelsOnly() {
        Path file = write(dir, "t.txt", "abcdefghij");
        assertThat(Datasets.load(file, 256, 4, false, Split.TRAIN).sequences()).hasSize(2);
        assertThatThrownBy(() -> Datasets.load(file, 1000, 4, false, Split.TRAIN)).isInstanceOf(UserError.class)
                .hasMessageContaining("needs a model with a 256-token vocabulary");
        assertThatThrownBy(() -> Datasets.load(file, 256, 40, false, Split.TRAIN)).isInstanceOf(UserError.class)
                .hasMessageContaining("shorter than one sequence");
        assertThatThrownBy(() -> Datasets.load(write(dir, "t.csv", "x"), 256, 4, false, Split.TRAIN))
                .isInstanceOf(UserError.class).hasMessageContaining("unknown format");
        assertThatThrownBy(() -> Datasets.load(dir.resolve("none.jsonl"), 256, 4, false, Split.TRAIN))
                .isInstanceOf(UserError.class).hasMessageContaining("does not exist");
    }

    @Test
    void theDemoInstructionsAreShortAndTheirHeldOutSplitIsDisjoint() {
        Dataset train = Datasets.demo(256, 64, false, Split.TRAIN);
        Dataset eval = Datasets.demo(256, 64, false, Split.EVAL);
        assertThat(train.sequences()).hasSizeBetween(2000, 4000);
        assertThat(eval.sequences()).hasSizeBetween(100, 1000);
        assertThat(train.truncated()).isZero();
        assertThat(eval.truncated()).isZero();
        Set<String> prompts = new HashSet<>();
        train.answers().forEach(a -> prompts.add(ByteTokenizer.INSTANCE.decode(a.promptIds(), false)));
        assertThat(prompts).hasSize(train.sequences().size());
        for (EvalAnswer a : eval.answers()) {
            assertThat(prompts).doesNotContain(ByteTokenizer.INSTANCE.decode(a.promptIds(), false));
        }
        Sequence first = train.sequences().getFirst();
        String text = ByteTokenizer.INSTANCE.decode(first.ids(), true);
        assertThat(text).startsWith("### Instruction:\n").contains("\n### Response:\n");
        assertThat(TokenBatch.countTargets(new int[][] {first.labels()})).isPositive();
        assertThatThrownBy(() -> Datasets.demo(1000, 64, false, Split.TRAIN)).isInstanceOf(UserError.class);
    }

    @Test
    void theByteTokenizerIsUtf8WithEosZero() {
        ByteTokenizer bytes = ByteTokenizer.INSTANCE;
        assertThat(bytes.encode("aé", true)).containsExactly('a', 0xC3, 0xA9);
        assertThat(bytes.decode(new int[] {'h', 'i', 0}, true)).isEqualTo("hi");
        assertThat(bytes.decode(new int[] {'h', 0xC3}, false)).isEqualTo("h\uFFFD");
        Sequence s = bytes.promptAndResponse("Q:", "A");
        assertThat(s.ids()).containsExactly('Q', ':', 'A', 0);
        assertThat(s.labels()).containsExactly(-100, -100, 'A', 0);
        assertThat(bytes.document("x").ids()).containsExactly('x', 0);
        assertThat(TextTokenizer.load("bytes")).isSameAs(bytes);
    }

    @Test
    void prepareOnTheCommandLinePrintsOneJsonLineOrOneLineError() {
        Path input = write(dir, "a.jsonl", "{\"instruction\": \"Say\", \"output\": \"hi\"}\n");
        String[] ok = {"prepare", "--input", input.toString(), "--format", "alpaca", "--tokenizer", "bytes", "--prompt",
                "compact", "--out", dir.resolve("out").toString(), "--eval-fraction", "0"};
        List<String> r = run(ok);
        assertThat(r.get(0)).isEqualTo("0");
        assertThat(r.get(1).strip()).isEqualTo("{\"out\":\"" + dir.resolve("out") + "\",\"format\":\"alpaca\","
                + "\"documents\":1,"
                + "\"eval_documents\":0,\"tokens\":38,\"loss_tokens\":3,\"dropped\":0,\"vocab_size\":256}");
        assertThat(r.get(2)).isEmpty();
        List<String> again = run(ok);
        assertThat(again.get(0)).isEqualTo("2");
        assertThat(again.get(2).strip()).isEqualTo("error: --out " + dir.resolve("out") + " holds token files already;"
                + " pass --overwrite to replace them");
        List<String> bad = run("prepare", "--input", input.toString(), "--format", "csv", "--tokenizer", "bytes",
                "--out", "x");
        assertThat(bad.get(2).strip())
                .isEqualTo("error: unknown dataset format 'csv'; give one of messages, sharegpt, prompt_completion,"
                        + " alpaca, squad, text, tokens");
    }

    /** Exit status, standard output, standard error. */
    private static List<String> run(String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int status;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            status = Main.execute(args, o, e, false);
        }
        return List.of(Integer.toString(status), out.toString(StandardCharsets.UTF_8),
                err.toString(StandardCharsets.UTF_8));
    }
}
