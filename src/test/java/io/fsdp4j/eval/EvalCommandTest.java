package io.fsdp4j.eval;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.HfExport;
import io.fsdp4j.cli.Main;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.train.TrainingJob;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.assertj.core.data.Offset;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code fsdp4j eval} as a user runs it, in-process: from a Hugging Face directory and from checkpoints (the same
 * loss as the parameters in memory and as their export), SQuAD scores of a model that learnt its answers, and for
 * each kind of bad input one {@code error:} line and status 2.
 */
class EvalCommandTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    static Path tmp;
    /** The golden qwen2 trained 2 steps on 2 ranks, a checkpoint after each step. */
    static Path goldenCheckpoints;
    static TrainingJob.Result goldenRun;
    /** The SQuAD fixture's checkpoints, recording the char tokenizer's directory as the original model. */
    static Path squadCheckpoints;
    static Path charModelDir;
    static Path batch;

    record Run(int status, String out, String err) {
        List<JsonNode> lines() {
            return out.lines().map(EvalCommandTest::parse).toList();
        }

        JsonNode last() {
            assertThat(status).as("exit status; stderr: %s", err).isZero();
            return lines().getLast();
        }

        void failsWith(String... fragments) {
            assertThat(status).as("exit status; stderr: %s", err).isEqualTo(2);
            assertThat(err.lines().toList()).as("stderr").hasSize(1);
            assertThat(err).startsWith("error: ");
            for (String f : fragments) {
                assertThat(err).contains(f);
            }
            assertThat(out).isEmpty();
        }
    }

    /**
     * The command, in-process; eval and score on CPU ranks (without {@code dist.device=cpu} they would take the GPUs
     * of a machine that has them, in bf16: other numbers than the whole-model fp32 ones these tests compare with).
     */
    static Run run(Object... args) {
        List<String> given = new ArrayList<>(java.util.Arrays.stream(args).map(Object::toString).toList());
        if (List.of("eval", "score").contains(given.getFirst()) && !given.contains("--help")) {
            given.addAll(List.of("--set", "dist.device=cpu"));
        }
        String[] strings = given.toArray(String[]::new);
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int status;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            status = Main.execute(strings, o, e, false);
        }
        return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    static JsonNode parse(String line) {
        try {
            return JSON.readTree(line);
        } catch (IOException e) {
            throw new AssertionError("not JSON: " + line, e);
        }
    }

    @BeforeAll
    static void trainAndSave() throws IOException {
        List<String> lines = new ArrayList<>();
        for (Sequence s : EvaluationTest.goldenBatch("qwen2")) {
            ObjectNode line = JSON.createObjectNode();
            line.set("input_ids", JSON.valueToTree(s.ids()));
            line.set("labels", JSON.valueToTree(s.labels()));
            lines.add(JSON.writeValueAsString(line));
        }
        batch = Files.write(tmp.resolve("batch.jsonl"), lines);

        JsonNode t = Golden.json("qwen2", "train.json");
        List<Sequence> data = Golden.sequences(t);
        TrainConfig config = TrainConfig.load(null, List.of("dist.ranks=2", "dist.device=cpu", "train.batch_size=6",
                "data.seq_len=16", "train.steps=2", "optim.lr=0.01"));
        ModelConfig mc = Golden.config("qwen2");
        goldenCheckpoints = tmp.resolve("golden-ck");
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), LlamaModel.layout(mc))) {
            goldenRun = new TrainingJob(config, mc, weights, data, true)
                    .savingCheckpoints(new TrainingJob.CheckpointPlan(goldenCheckpoints, 1, 5,
                            Golden.dir("qwen2").toAbsolutePath().toString(), null))
                    .run(null, true);
        }

        charModelDir = CharTokenizer.write(tmp.resolve("char-model"));
        squadCheckpoints = tmp.resolve("squad-ck");
        SquadFixture.train(squadCheckpoints, charModelDir);
    }

    @Test
    void theLossOfAHuggingFaceModelIsOneJsonLine() throws IOException {
        Run r = run("eval", "--model", Golden.dir("qwen2"), "--data", batch);
        assertThat(r.lines()).hasSize(1);
        JsonNode line = r.last();
        assertThat(line.properties()).extracting(java.util.Map.Entry::getKey)
                .containsExactly("loss", "perplexity", "tokens", "sequences");
        try (var expected = SafetensorsFile.open(Golden.dir("qwen2").resolve("expected.safetensors"))) {
            double loss = expected.readFloats("loss")[0];
            assertThat(line.get("loss").doubleValue()).isCloseTo(loss, Percentage.withPercentage(1e-3));
            assertThat(line.get("perplexity").doubleValue()).isCloseTo(Math.exp(loss), Percentage.withPercentage(1e-3));
        }
        assertThat(line.get("sequences").intValue()).isEqualTo(4);
        assertThat(run("eval", "--model", Golden.dir("qwen2"), "--data", batch, "--task", "loss").out).isEqualTo(r.out);
        // --verbose: each sequence first, as score prints them; --limit: the first K sequences
        Run verbose = run("eval", "--model", Golden.dir("qwen2"), "--data", batch, "--verbose");
        assertThat(verbose.lines()).hasSize(5);
        Run scored = run("score", "--model", Golden.dir("qwen2"), "--data", batch);
        assertThat(verbose.out.lines().limit(4).toList()).isEqualTo(scored.out.lines().limit(4).toList());
        JsonNode first = run("eval", "--model", Golden.dir("qwen2"), "--data", batch, "--limit", 1).last();
        assertThat(first.get("sequences").intValue()).isEqualTo(1);
        assertThat(first.get("loss").doubleValue()).isEqualTo(verbose.lines().getFirst().get("loss").doubleValue());
        assertThat(first.get("tokens").intValue()).isEqualTo(verbose.lines().getFirst().get("tokens").intValue());
    }

    @Test
    void aCheckpointGivesTheLossOfItsParametersInMemoryAndExported() {
        double inMemory = Evaluation.loss(EvalModel.build(Golden.config("qwen2"), CpuBackend.INSTANCE,
                goldenRun.finalParams()), CpuBackend.INSTANCE, EvaluationTest.goldenBatch("qwen2")).loss();
        Path step2 = Checkpoints.stepDir(goldenCheckpoints, 2);
        JsonNode newest = run("eval", "--checkpoint", goldenCheckpoints, "--data", batch).last();
        assertThat(newest.get("loss").doubleValue()).isEqualTo(inMemory);
        assertThat(run("eval", "--checkpoint", step2, "--data", batch).last()).isEqualTo(newest);
        Path exported = HfExport.export(step2, tmp.resolve("exported"), DType.F32);
        assertThat(run("eval", "--model", exported, "--data", batch).last()).isEqualTo(newest);
        // the older checkpoint is another model; both trained, both below the initial loss
        double step1 = run("eval", "--checkpoint", Checkpoints.stepDir(goldenCheckpoints, 1), "--data", batch).last()
                .get("loss").doubleValue();
        double initial = run("eval", "--model", Golden.dir("qwen2"), "--data", batch).last().get("loss").doubleValue();
        assertThat(step1).isNotEqualTo(inMemory);
        assertThat(inMemory).isLessThan(initial);
    }

    @Test
    void squadScoresAModelThatLearntItsAnswers() throws IOException {
        List<SquadQuestion> questions = new ArrayList<>(SquadFixture.questions());
        SquadQuestion paris = questions.getFirst();
        questions.add(new SquadQuestion("q0-long", paris.context(), paris.question(), List.of("Paris, France")));
        Path squad = Files.writeString(tmp.resolve("squad.json"), SquadFixture.squadJson(questions));
        // the tokenizer: the checkpoint's original model directory, as recorded in its index
        Run r = run("eval", "--checkpoint", squadCheckpoints, "--task", "squad", "--data", squad, "--verbose");
        JsonNode summary = r.last();
        List<JsonNode> lines = r.lines();
        assertThat(lines).hasSize(5);
        assertThat(lines.subList(0, 4)).extracting(l -> l.get("id").asText()).containsExactly("q0", "q1", "q2", "q0-long");
        assertThat(lines.subList(0, 4)).extracting(l -> l.get("prediction").asText())
                .containsExactly("Paris", "red", "Oslo", "Paris");
        assertThat(lines.get(0).properties()).extracting(java.util.Map.Entry::getKey)
                .containsExactly("id", "prediction", "em", "f1");
        // "Paris" against "Paris, France": EM 0, F1 = 2 * 1 * (1/2) / (1 + 1/2) = 2/3
        assertThat(lines.get(3).get("em").doubleValue()).isZero();
        assertThat(lines.get(3).get("f1").doubleValue()).isCloseTo(200.0 / 3, Offset.offset(1e-9));
        assertThat(summary.properties()).extracting(java.util.Map.Entry::getKey)
                .containsExactly("exact_match", "f1", "questions");
        assertThat(summary.get("exact_match").doubleValue()).isEqualTo(75.0);
        assertThat(summary.get("f1").doubleValue()).isCloseTo((300 + 200.0 / 3) / 4, Offset.offset(1e-9));
        assertThat(summary.get("questions").intValue()).isEqualTo(4);

        Run limited = run("eval", "--checkpoint", squadCheckpoints, "--task", "squad", "--data", squad, "--limit", 2,
                "--tokenizer", charModelDir.resolve("tokenizer.json"));
        assertThat(limited.lines()).hasSize(1);
        assertThat(limited.last()).isEqualTo(parse("{\"exact_match\":100.0,\"f1\":100.0,\"questions\":2}"));
        // two new tokens: " P", so "P"
        Run cut = run("eval", "--checkpoint", squadCheckpoints, "--task", "squad", "--data", squad, "--limit", 1,
                "--max-new-tokens", 2, "--verbose");
        assertThat(cut.lines().getFirst().get("prediction").asText()).isEqualTo("P");
    }

    @Test
    void aCheckpointWithoutATokenizerAsksForOne() throws IOException {
        Path squad = Files.writeString(tmp.resolve("squad-1.json"), SquadFixture.squadJson(SquadFixture.questions()));
        Path preset = copyWithoutModelPath(Checkpoints.latest(squadCheckpoints), tmp.resolve("preset-ck"));
        run("eval", "--checkpoint", preset, "--task", "squad", "--data", squad)
                .failsWith("trained from a preset", "pass --tokenizer");
        assertThat(run("eval", "--checkpoint", preset, "--task", "squad", "--data", squad, "--tokenizer", charModelDir)
                .last().get("exact_match").doubleValue()).isEqualTo(100.0);
        // loss needs no tokenizer
        assertThat(run("eval", "--checkpoint", goldenCheckpoints, "--data", batch).status).isZero();
        run("eval", "--checkpoint", goldenCheckpoints, "--task", "squad", "--data", squad)
                .failsWith(Golden.dir("qwen2").toAbsolutePath().toString(), "no tokenizer.json", "pass --tokenizer");
        run("eval", "--model", Golden.dir("qwen2"), "--task", "squad", "--data", squad)
                .failsWith("model directory", "has no tokenizer.json", "pass --tokenizer");
        run("eval", "--model", Golden.dir("qwen2"), "--task", "squad", "--data", squad, "--tokenizer", tmp.resolve("nope"))
                .failsWith("tokenizer", "nope", "does not exist");
    }

    private static Path copyWithoutModelPath(Path checkpoint, Path copy) throws IOException {
        Files.createDirectories(copy);
        try (var files = Files.list(checkpoint)) {
            for (Path f : files.toList()) {
                Files.copy(f, copy.resolve(f.getFileName()));
            }
        }
        ObjectNode index = (ObjectNode) JSON.readTree(copy.resolve("index.json").toFile());
        index.putNull("modelPath");
        JSON.writeValue(copy.resolve("index.json").toFile(), index);
        return copy;
    }

    @Test
    void badInputIsOneErrorLine() throws IOException {
        Path squad = Files.writeString(tmp.resolve("squad-2.json"), SquadFixture.squadJson(SquadFixture.questions()));
        String model = Golden.dir("qwen2").toString();
        run("eval", "--data", batch).failsWith("--model DIR or --checkpoint DIR");
        run("eval", "--model", model, "--checkpoint", goldenCheckpoints, "--data", batch).failsWith("not both");
        run("eval", "--model", model, "--data", batch, "--task", "mmlu").failsWith("--task", "loss, squad or answers", "mmlu");
        run("eval", "--model", model, "--data", batch, "--limit", 0).failsWith("--limit", "at least 1");
        run("eval", "--model", model, "--data", batch, "--max-new-tokens", 0).failsWith("--max-new-tokens", "at least 1");
        run("eval", "--model", tmp.resolve("no-model"), "--data", batch).failsWith("no-model", "does not exist");
        run("eval", "--checkpoint", tmp.resolve("no-ck"), "--data", batch).failsWith("no-ck", "does not exist");
        run("eval", "--checkpoint", charModelDir, "--data", batch).failsWith("index.json");
        run("eval", "--model", model, "--data", tmp.resolve("none.jsonl")).failsWith("none.jsonl", "does not exist");
        // SQuAD data for the loss is read with the model's tokenizer, which this model lacks
        run("eval", "--model", model, "--data", squad).failsWith("has no tokenizer.json", "pass --tokenizer");
        run("score", "--model", model, "--data", squad).failsWith("has no tokenizer.json", "pass --tokenizer");
        run("eval", "--model", model, "--data", batch, "--set", "train.steps=3")
                .failsWith("--set train.steps=3", "dist.* and fsdp.*");
        run("eval", "--model", model, "--data", batch, "--batch-size", 0).failsWith("--batch-size", "at least 1");
        run("score", "--model", model, "--checkpoint", goldenCheckpoints, "--data", batch).failsWith("not both");
        run("eval", "--checkpoint", squadCheckpoints, "--task", "squad", "--data", tmp.resolve("none.json"))
                .failsWith("none.json", "does not exist");
        Path broken = Files.writeString(tmp.resolve("broken.json"),
                "{\"data\":[{\"paragraphs\":[{\"context\":\"c\",\"qas\":[{\"id\":\"1\",\"answers\":[{\"text\":\"a\"}]}]}]}]}");
        run("eval", "--checkpoint", squadCheckpoints, "--task", "squad", "--data", broken)
                .failsWith("broken.json", "data[0].paragraphs[0].qas[0]", "\"question\"");
        Path tooLong = Files.writeString(tmp.resolve("long.jsonl"), "{\"input_ids\":" + JSON.valueToTree(new int[65]) + "}");
        run("eval", "--model", model, "--data", tooLong).failsWith("sequence 0", "65 tokens", "max_position_embeddings");
        Run missing = run("eval", "--model", model);
        assertThat(missing.status).isEqualTo(2);
        assertThat(missing.err).startsWith("error: Missing required option").contains("--data");
    }

    /** The ranks and how the model is sharded over them change no number: each sequence alone on some rank. */
    @Test
    void theRanksAndTheirShardingChangeNoNumber() {
        Run one = run("eval", "--model", Golden.dir("qwen2"), "--data", batch, "--verbose");
        Run scored = run("score", "--model", Golden.dir("qwen2"), "--data", batch);
        assertThat(one.lines()).hasSize(5);
        for (List<String> sets : List.of(List.of("dist.ranks=2"), List.of("dist.ranks=3", "fsdp.cpu_offload=true"),
                List.of("dist.ranks=4", "fsdp.strategy=hybrid_shard", "fsdp.shard_size=2"),
                List.of("dist.ranks=2", "fsdp.strategy=no_shard"))) {
            List<Object> args = new ArrayList<>(List.of("eval", "--model", Golden.dir("qwen2"), "--data", batch,
                    "--verbose"));
            List<Object> scoreArgs = new ArrayList<>(List.of("score", "--checkpoint", goldenCheckpoints, "--data", batch));
            for (String set : sets) {
                args.addAll(List.of("--set", set));
                scoreArgs.addAll(List.of("--set", set));
            }
            assertThat(run(args.toArray()).out).as("eval with %s", sets).isEqualTo(one.out);
            assertThat(run(scoreArgs.toArray()).out).as("score with %s", sets)
                    .isEqualTo(run("score", "--checkpoint", goldenCheckpoints, "--data", batch).out);
        }
        // batched on the ranks: the same within fp32 rounding
        JsonNode batched = run("eval", "--model", Golden.dir("qwen2"), "--data", batch, "--batch-size", 4, "--set",
                "dist.ranks=2").last();
        assertThat(batched.get("loss").doubleValue()).isCloseTo(one.last().get("loss").doubleValue(),
                Percentage.withPercentage(1e-4));
        assertThat(scored.lines().getLast().get("mean_loss").doubleValue())
                .isCloseTo(one.last().get("loss").doubleValue(), Percentage.withPercentage(1e-12));
    }

    /**
     * Data in the formats train reads is read as training reads it: raw Alpaca gives what its pre-tokenized form
     * gives, to eval and score, and its examples are answered, --verbose showing prompt, expected and predicted.
     */
    @Test
    void rawAlpacaIsEvaluatedAsItsTokensAre() throws IOException {
        ModelConfig tiny = ModelConfig.tiny();
        Path ck = tmp.resolve("tiny-ck");
        TrainConfig config = TrainConfig.load(null, List.of("dist.ranks=1", "dist.device=cpu", "train.batch_size=1",
                "data.seq_len=16", "train.steps=1"));
        int[] ids = java.util.stream.IntStream.range(0, 16).map(i -> 'a' + i).toArray();
        new io.fsdp4j.train.TrainingJob(config, tiny, new io.fsdp4j.fsdp.RandomInit(3, 0.02, io.fsdp4j.model.CausalLMs.layout(tiny)),
                List.of(Sequence.unmasked(ids)), false)
                .savingCheckpoints(new io.fsdp4j.train.TrainingJob.CheckpointPlan(ck, 0, 1, null, null)).run(null, false);
        Path alpaca = Files.write(tmp.resolve("alpaca.jsonl"), List.of(
                "{\"instruction\":\"Reverse the word.\",\"input\":\"cat\",\"output\":\"tac\"}",
                "{\"instruction\":\"Add one.\",\"input\":\"41\",\"output\":\"42\"}",
                "{\"instruction\":\"Say hi.\",\"output\":\"hi\"}"));
        Run tokenized = run("tokenize", "--tokenizer", "bytes", "--format", "alpaca", "--input", alpaca);
        assertThat(tokenized.status).as(tokenized.err).isZero();
        Path tokens = Files.writeString(tmp.resolve("alpaca-tokens.jsonl"), tokenized.out);
        Run raw = run("eval", "--checkpoint", ck, "--data", alpaca, "--verbose");
        assertThat(raw.lines()).hasSize(4);
        assertThat(raw.out).isEqualTo(run("eval", "--checkpoint", ck, "--data", tokens, "--verbose").out);
        assertThat(run("score", "--checkpoint", ck, "--data", alpaca).out)
                .isEqualTo(run("score", "--checkpoint", ck, "--data", tokens).out)
                .isEqualTo(run("score", "--checkpoint", ck, "--data", alpaca, "--tokenizer", "bytes").out);
        Run answers = run("eval", "--checkpoint", ck, "--task", "answers", "--data", alpaca, "--verbose",
                "--max-new-tokens", 3, "--set", "dist.ranks=2");
        List<JsonNode> lines = answers.lines();
        assertThat(lines).hasSize(4);
        assertThat(lines.getFirst().properties()).extracting(java.util.Map.Entry::getKey)
                .containsExactly("id", "prompt", "expected", "prediction", "em", "f1");
        assertThat(lines.getFirst().get("prompt").asText()).contains("Reverse the word.", "cat", "### Response:");
        assertThat(lines.getFirst().get("expected")).isEqualTo(parse("[\"tac\"]"));
        assertThat(lines.get(2).get("expected")).isEqualTo(parse("[\"hi\"]"));
        assertThat(answers.last().get("examples").intValue()).isEqualTo(3);
    }

    /** SQuAD data as answers (prompt-and-response examples, as training reads it): the answers the model learnt. */
    @Test
    void rawSquadGivesTheLearntAnswers() throws IOException {
        Path squad = Files.writeString(tmp.resolve("squad-answers.json"), SquadFixture.squadJson(SquadFixture.questions()));
        Run r = run("eval", "--checkpoint", squadCheckpoints, "--task", "answers", "--data", squad, "--verbose",
                "--set", "dist.ranks=2", "--batch-size", 2);
        assertThat(r.lines().subList(0, 3)).extracting(l -> l.get("prediction").asText())
                .containsExactly("Paris", "red", "Oslo");
        assertThat(r.lines().getFirst().get("prompt").asText()).startsWith("Context: Paris is the capital of France.");
        assertThat(r.last().get("exact_match").doubleValue()).isEqualTo(100.0);
    }

    @Test
    void helpNamesEveryOption() {
        Run help = run("eval", "--help");
        assertThat(help.status).isZero();
        assertThat(help.out).contains("--model", "--checkpoint", "--data", "--tokenizer", "--task", "--max-new-tokens",
                "--limit", "--verbose", "--batch-size", "--set", "Context: {context}");
    }
}
