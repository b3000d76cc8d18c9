package io.fsdp4j.data;

import static io.fsdp4j.data.DataFiles.bytes;
import static io.fsdp4j.data.DataFiles.masked;
import static io.fsdp4j.data.DataFiles.withEos;
import static io.fsdp4j.data.DataFiles.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.tokenizer.Tokenizer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Each input format into token files and back: ids, labels with prompt masks, document boundaries, meta.json. */
class PrepareTest {
    @TempDir
    Path dir;

    private static final String ALPACA_JSON = """
            [
              {"instruction": "Reverse: cat", "input": "", "output": "tac"},
              {"instruction": "Add", "input": "2+2", "output": "4", "extra": 1},
              {"instruction": "Say hi", "output": "hi"}
            ]
            """;

    @Test
    void alpacaJsonListMasksThePromptAndEndsEachResponseWithEos() {
        TokenFiles files = DataFiles.prepareBytes(dir, write(dir, "a.json", ALPACA_JSON), DatasetFormat.ALPACA);
        assertThat(files.count()).isEqualTo(3);
        String[][] examples = {{"Reverse: cat", "", "tac"}, {"Add", "2+2", "4"}, {"Say hi", null, "hi"}};
        long offset = 0;
        for (int d = 0; d < 3; d++) {
            String prompt = InstructionPrompt.COMPACT.prompt(examples[d][0], examples[d][1]);
            int[] response = withEos(bytes(examples[d][2]));
            Sequence doc = files.document(d);
            assertThat(doc.ids()).containsExactly(DataFiles.concat(List.of(bytes(prompt), response)));
            assertThat(doc.labels()).containsExactly(masked(bytes(prompt).length, response));
            assertThat(files.start(d)).isEqualTo(offset);
            offset += doc.length();
        }
        assertThat(files.tokens()).isEqualTo(offset);
        assertThat(InstructionPrompt.COMPACT.prompt("Add", "2+2"))
                .isEqualTo("### Instruction:\nAdd\n### Input:\n2+2\n### Response:\n");

        TokenFilesMeta meta = files.meta();
        assertThat(meta.format()).isEqualTo("alpaca");
        assertThat(meta.prompt()).isEqualTo("compact");
        assertThat(meta.tokenizer()).isEqualTo("bytes");
        assertThat(meta.vocabSize()).isEqualTo(256);
        assertThat(meta.eosId()).isZero();
        assertThat(meta.lossTokens()).isEqualTo(4 + 2 + 3);
        assertThat(meta.source()).isEqualTo(dir.resolve("a.json").toAbsolutePath().toString());
        assertThat(meta.sourceSha256()).isEqualTo(Prepare.sha256(dir.resolve("a.json"))).hasSize(64);
        List<EvalAnswer> answers = files.answers(Split.ALL);
        assertThat(answers).extracting(EvalAnswer::answers)
                .containsExactly(List.of("tac"), List.of("4"), List.of("hi"));
        assertThat(answers.get(1).promptIds()).containsExactly(bytes(InstructionPrompt.COMPACT.prompt("Add", "2+2")));
    }

    @Test
    void alpacaJsonlGivesWhatTheJsonListGives() {
        TokenFiles list = DataFiles.prepareBytes(dir, write(dir, "a.json", ALPACA_JSON), DatasetFormat.ALPACA);
        String jsonl = ALPACA_JSON.lines().filter(l -> l.strip().startsWith("{"))
                .map(l -> l.strip().replaceAll(",$", "")).reduce("", (a, b) -> a + b + "\n\n");
        TokenFiles lines = DataFiles.prepareBytes(dir, write(dir, "a.jsonl", jsonl), DatasetFormat.ALPACA);
        assertThat(lines.count()).isEqualTo(list.count());
        for (int d = 0; d < list.count(); d++) {
            assertThat(lines.document(d)).usingRecursiveComparison().isEqualTo(list.document(d));
        }
    }

    @Test
    void theAlpacaPromptIsStanfordsByDefault() throws IOException {
        Path out = dir.resolve("out");
        Prepare.run(new Prepare.Options(write(dir, "a.json", ALPACA_JSON), DatasetFormat.ALPACA, "bytes", out, 0, 0, 1,
                InstructionPrompt.ALPACA, false));
        TokenFiles files = TokenFiles.open(out);
        assertThat(files.document(2).ids()).startsWith(bytes(AlpacaFormat.prompt("Say hi", null)));
        assertThat(files.meta().prompt()).isEqualTo("alpaca");
        assertThat(hidden()).isEmpty(); // the temporary directory was renamed
    }

    @Test
    void alpacaWithAHuggingFaceTokenizerIsWhatAlpacaFormatGives() {
        Path model = DataFiles.qwen3(dir);
        Path out = dir.resolve("out");
        Prepare.run(DataFiles.options(write(dir, "a.json", ALPACA_JSON), DatasetFormat.ALPACA, model.toString(), out));
        TokenFiles files = TokenFiles.open(out);
        try (Tokenizer qwen = Tokenizer.load(model)) {
            Sequence expected = AlpacaFormat.tokenize(qwen, InstructionPrompt.COMPACT.prompt("Add", "2+2"), "4");
            assertThat(files.document(1)).usingRecursiveComparison().isEqualTo(expected);
            assertThat(files.meta().vocabSize()).isEqualTo(qwen.vocabSize());
            assertThat(files.meta().eosId()).isEqualTo(qwen.eosId().orElseThrow());
            assertThat(files.meta().tokenizer()).isEqualTo(model.toAbsolutePath().toString());
        }
    }

    static final String SQUAD = """
            {"version": "1.1", "data": [
              {"title": "T", "paragraphs": [
                {"context": "Paris is in France.", "qas": [
                  {"id": "q1", "question": "Where is Paris?", "answers": [{"answer_start": 12, "text": "France"},
                                                                          {"answer_start": 12, "text": "in France"}]},
                  {"id": "q2", "question": "What is in France?", "answers": [{"answer_start": 0, "text": "Paris"}]}]},
                {"context": "Two plus two is four.", "qas": [
                  {"id": "q3", "question": "What is two plus two?",
                   "answers": [{"answer_start": 16, "text": "four"}]}]}]}]}
            """;

    @Test
    void squadTrainsOnTheFirstAnswerAndKeepsEveryAnswer() {
        TokenFiles files = DataFiles.prepareBytes(dir, write(dir, "squad.json", SQUAD), DatasetFormat.SQUAD);
        assertThat(files.count()).isEqualTo(3);
        String prompt = "Context: Paris is in France.\nQuestion: Where is Paris?\nAnswer:";
        assertThat(SquadPrompt.prompt("Paris is in France.", "Where is Paris?")).isEqualTo(prompt);
        int[] response = withEos(bytes(" France"));
        assertThat(files.document(0).ids()).containsExactly(DataFiles.concat(List.of(bytes(prompt), response)));
        assertThat(files.document(0).labels()).containsExactly(masked(bytes(prompt).length, response));
        List<EvalAnswer> answers = files.answers(Split.ALL);
        assertThat(answers).extracting(EvalAnswer::id).containsExactly("q1", "q2", "q3");
        assertThat(answers.getFirst().answers()).containsExactly("France", "in France");
        assertThat(answers.getFirst().promptIds()).containsExactly(bytes(prompt));
        assertThat(files.meta().prompt()).isEqualTo("squad");
    }

    @Test
    void textDocumentsAreSeparatedByBlankLinesAndAllTokensCarryLoss() {
        String text = "\nfirst line\nsecond line\n\n  \n\r\nthird\r\n\n\nfourth";
        TokenFiles files = DataFiles.prepareBytes(dir, write(dir, "t.txt", text), DatasetFormat.TEXT);
        String[] documents = {"first line\nsecond line", "third", "fourth"};
        assertThat(files.count()).isEqualTo(documents.length);
        for (int d = 0; d < documents.length; d++) {
            int[] ids = withEos(bytes(documents[d]));
            assertThat(files.document(d).ids()).as("document %d", d).containsExactly(ids);
            assertThat(files.document(d).labels()).containsExactly(ids);
        }
        assertThat(files.meta().answers()).isNull();
        assertThat(files.answers(Split.ALL)).isEmpty();
    }

    @Test
    void preTokenizedJsonlIsKeptAsItIs() {
        String jsonl = """
                {"input_ids": [5, 6, 7], "labels": [-100, 6, 7]}
                {"input_ids": [9]}
                {"input_ids": [1, 2], "labels": [1, 2]}
                """;
        TokenFiles files = DataFiles.prepareBytes(dir, write(dir, "t.jsonl", jsonl), DatasetFormat.TOKENS);
        // [9] alone carries no loss (position 0 predicts nothing) and is left out.
        assertThat(files.count()).isEqualTo(2);
        assertThat(files.meta().dropped()).isEqualTo(1);
        assertThat(files.document(0).ids()).containsExactly(5, 6, 7);
        assertThat(files.document(0).labels()).containsExactly(-100, 6, 7);
        assertThat(files.document(1).labels()).containsExactly(1, 2);
        assertThat(files.tokens()).isEqualTo(5);
    }

    @Test
    void seqLenLeavesOutExamplesWhoseLossLiesBeyondIt() {
        Path input = write(dir, "a.jsonl", """
                {"instruction": "a long instruction that fills the window", "output": "x"}
                {"instruction": "hi", "output": "y"}
                """);
        Path out = dir.resolve("out");
        Prepare.run(new Prepare.Options(input, DatasetFormat.ALPACA, "bytes", out, 40, 0, 1, InstructionPrompt.COMPACT,
                false));
        TokenFiles files = TokenFiles.open(out);
        assertThat(files.count()).isEqualTo(1);
        assertThat(files.meta().dropped()).isEqualTo(1);
        assertThat(files.meta().seqLen()).isEqualTo(40);
        assertThat(files.answers(Split.ALL)).extracting(EvalAnswer::answers).containsExactly(List.of("y"));
    }

    @Test
    void heldOutDocumentsAreDisjointFromTrainingAndStableUnderTheSeed() {
        StringBuilder jsonl = new StringBuilder();
        for (int i = 0; i < 200; i++) {
            jsonl.append("{\"instruction\": \"n").append(i).append("\", \"output\": \"").append(i).append("\"}\n");
        }
        Path input = write(dir, "a.jsonl", jsonl.toString());
        int[] first = heldOut(input, "one", 0.1, 7);
        int[] again = heldOut(input, "two", 0.1, 7);
        int[] other = heldOut(input, "three", 0.1, 8);
        assertThat(first).hasSize(20).isSorted().containsExactly(again);
        assertThat(other).hasSize(20).isNotEqualTo(first);

        TokenFiles files = TokenFiles.open(dir.resolve("one"));
        int[] train = files.documents(Split.TRAIN), eval = files.documents(Split.EVAL);
        Set<Integer> seen = new HashSet<>();
        IntStream.concat(Arrays.stream(train), Arrays.stream(eval)).forEach(d -> assertThat(seen.add(d)).isTrue());
        assertThat(seen).hasSize(200);
        assertThat(eval).containsExactly(first);
        assertThat(files.answers(Split.EVAL)).extracting(EvalAnswer::document).containsExactlyElementsOf(
                Arrays.stream(eval).boxed().toList());
        assertThat(files.answers(Split.TRAIN)).hasSize(180);
        assertThat(heldOut(input, "none", 0, 7)).isEmpty();
        assertThat(heldOut(input, "all", 1, 7)).hasSize(200);
    }

    private int[] heldOut(Path input, String out, double fraction, long seed) {
        Prepare.run(new Prepare.Options(input, DatasetFormat.ALPACA, "bytes", dir.resolve(out), 0, fraction, seed,
                InstructionPrompt.COMPACT, false));
        return TokenFiles.open(dir.resolve(out)).meta().evalDocuments();
    }

    @Test
    void squadHoldsOutWholeParagraphs() {
        for (long seed = 0; seed < 10; seed++) {
            Path out = dir.resolve("s" + seed);
            Prepare.run(new Prepare.Options(write(dir, "squad.json", SQUAD), DatasetFormat.SQUAD, "bytes", out, 0, 0.5,
                    seed, InstructionPrompt.COMPACT, false));
            int[] eval = TokenFiles.open(out).meta().evalDocuments();
            assertThat(eval).satisfiesAnyOf(e -> assertThat(e).containsExactly(0, 1),
                    e -> assertThat(e).containsExactly(2));
        }
    }

    @Test
    void heldOutKeepsAtLeastOneOfEachSplit() {
        assertThat(Prepare.heldOut(new int[] {0, 1, 2}, 0.01, 1)).hasSize(1);
        assertThat(Prepare.heldOut(new int[] {0, 1, 2}, 0.99, 1)).hasSize(2);
        assertThat(Prepare.heldOut(new int[] {0}, 0.5, 1)).isEmpty();
        assertThat(Prepare.heldOut(new int[] {4, 4, 9}, 0.5, 3)).satisfiesAnyOf(
                e -> assertThat(e).containsExactly(0, 1), e -> assertThat(e).containsExactly(2));
    }

    @Test
    void anExistingOutputIsReplacedOnlyWhenAsked() throws IOException {
        Path input = write(dir, "a.json", ALPACA_JSON);
        Path out = dir.resolve("out");
        Prepare.run(DataFiles.options(input, DatasetFormat.ALPACA, "bytes", out));
        assertThatThrownBy(() -> Prepare.run(DataFiles.options(input, DatasetFormat.ALPACA, "bytes", out)))
                .isInstanceOf(UserError.class).hasMessageContaining("pass --overwrite");
        Path text = write(dir, "t.txt", "just one document");
        Prepare.run(new Prepare.Options(text, DatasetFormat.TEXT, "bytes", out, 0, 0, 1, InstructionPrompt.COMPACT,
                true));
        assertThat(TokenFiles.open(out).meta().format()).isEqualTo("text");
        assertThat(hidden()).isEmpty();

        Path other = Files.createDirectories(dir.resolve("other"));
        Files.writeString(other.resolve("keep.txt"), "mine");
        assertThatThrownBy(() -> Prepare.run(new Prepare.Options(text, DatasetFormat.TEXT, "bytes", other, 0, 0, 1,
                InstructionPrompt.COMPACT, true)))
                .isInstanceOf(UserError.class).hasMessageContaining("does not hold token files");
        assertThat(other.resolve("keep.txt")).hasContent("mine");
    }

    private List<Path> hidden() throws IOException {
        try (var entries = Files.list(dir)) {
            return entries.filter(p -> p.getFileName().toString().startsWith(".")).toList();
        }
    }

    @Test
    void aFailedPrepareLeavesNothingBehind() throws IOException {
        Path input = write(dir, "bad.jsonl", "{\"instruction\": \"a\", \"output\": \"b\"}\n{\"instruction\": \"a\"}\n");
        Path out = dir.resolve("out");
        assertThatThrownBy(() -> Prepare.run(DataFiles.options(input, DatasetFormat.ALPACA, "bytes", out)))
                .isInstanceOf(UserError.class);
        try (var entries = Files.list(dir)) {
            assertThat(entries.map(p -> p.getFileName().toString())).containsExactly("bad.jsonl");
        }
    }

    @Test
    void whatACrashedPrepareLeftIsRemovedByTheNextAndNeverMixedIn() throws Exception {
        Path input = write(dir, "a.json", ALPACA_JSON);
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor();
        long dead = gone.pid(), alive = ProcessHandle.current().pid();
        String host = Prepare.host();
        Path crashed = Files.createDirectories(dir.resolve(".out.tmp-" + host + "-" + dead + "-17"));
        Files.write(crashed.resolve("tokens.bin"), new byte[1_000_000]);
        Path older = Files.createDirectories(dir.resolve(".out.tmp-" + dead + "-18")); // named before hosts were
        Path running = Files.createDirectories(dir.resolve(".out.tmp-" + host + "-" + alive + "-19"));
        Path elsewhere = Files.createDirectories(dir.resolve(".out.tmp-some-other-host-" + dead + "-20"));
        var notices = new java.io.ByteArrayOutputStream();
        Prepare.run(DataFiles.options(input, DatasetFormat.ALPACA, "bytes", dir.resolve("out")),
                new java.io.PrintStream(notices, true, java.nio.charset.StandardCharsets.UTF_8));
        assertThat(crashed).doesNotExist();
        assertThat(older).doesNotExist();
        assertThat(running).isDirectory(); // its process still runs
        assertThat(elsewhere).isDirectory(); // another host's: its process cannot be seen from here
        assertThat(notices.toString(java.nio.charset.StandardCharsets.UTF_8).lines().toList()).first().asString()
                .startsWith("fsdp4j: prepare: removed what an interrupted prepare of " + dir.resolve("out") + " left: ")
                .contains(crashed.getFileName() + " (1.0 MB, of process " + dead + ")")
                .contains(older.getFileName() + " (0.0 MB, of process " + dead + ")")
                .doesNotContain(running.getFileName().toString()).doesNotContain(elsewhere.getFileName().toString());
        assertThat(TokenFiles.open(dir.resolve("out")).count()).isEqualTo(3);
        try (var entries = Files.list(dir.resolve("out"))) {
            assertThat(entries.map(p -> p.getFileName().toString())).doesNotContain("tokens.bin.partial")
                    .allMatch(n -> !n.startsWith("."));
        }
    }

    @Test
    void aCrashBetweenTheRenamesOfAReplacementPutsTheOldOutputBack() throws IOException {
        Path input = write(dir, "a.json", ALPACA_JSON);
        Path out = dir.resolve("out");
        Prepare.run(DataFiles.options(input, DatasetFormat.ALPACA, "bytes", out));
        // the crash: out renamed into .out.old-X/data, the new output not yet renamed to out
        Path old = Files.createDirectories(dir.resolve(".out.old-123"));
        Files.move(out, old.resolve("data"));
        Path text = write(dir, "t.txt", "just one document");
        assertThatThrownBy(() -> Prepare.run(new Prepare.Options(text, DatasetFormat.TEXT, "bytes", out, 0, 0, 1,
                InstructionPrompt.COMPACT, false))).isInstanceOf(UserError.class).hasMessageContaining("--overwrite");
        assertThat(TokenFiles.open(out).meta().format()).isEqualTo("alpaca"); // put back, not replaced unasked
        assertThat(hidden()).isEmpty();
        // and one left beside a complete output is removed
        Files.createDirectories(dir.resolve(".out.old-456").resolve("data"));
        Prepare.run(new Prepare.Options(text, DatasetFormat.TEXT, "bytes", out, 0, 0, 1, InstructionPrompt.COMPACT,
                true));
        assertThat(TokenFiles.open(out).meta().format()).isEqualTo("text");
        assertThat(hidden()).isEmpty();
    }
}
