package io.fsdp4j.eval;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tokenizer.Tokenizer;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.GZIPInputStream;
import org.assertj.core.data.Offset;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/** The library API: loss against the Hugging Face golden values, SQuAD answers of a model that learnt them. */
class EvaluationTest {
    static final List<String> MODELS = Golden.MODELS;
    private static final CpuBackend CPU = CpuBackend.INSTANCE;

    @TempDir
    static Path tmp;
    static Tokenizer chars;
    static TrainingJob.Result trained;

    @BeforeAll
    static void trainTheSquadModel() {
        chars = Tokenizer.load(CharTokenizer.write(tmp.resolve("chars")));
        trained = SquadFixture.train(tmp.resolve("ck"), null);
    }

    @AfterAll
    static void closeTokenizer() {
        chars.close();
    }

    /** The golden batch (4 sequences of 16 tokens, some labels -100). */
    static List<Sequence> goldenBatch(String name) {
        JsonNode b = Golden.json(name, "batch.json");
        List<Sequence> batch = Golden.sequences(b);
        return batch;
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void lossAndPerplexityMatchTransformers(String name) {
        SingleDeviceModel model = EvalModel.fromHf(Golden.dir(name)).load();
        Evaluation.LossResult r = Evaluation.loss(model, CPU, goldenBatch(name));
        try (var expected = SafetensorsFile.open(Golden.dir(name).resolve("expected.safetensors"))) {
            double loss = expected.readFloats("loss")[0];
            float[] seqTokens = expected.readFloats("seq_tokens"), seqLoss = expected.readFloats("seq_loss");
            assertThat(r.loss()).isCloseTo(loss, Percentage.withPercentage(1e-3));
            assertThat(r.perplexity()).isCloseTo(Math.exp(loss), Percentage.withPercentage(1e-3));
            assertThat(r.perplexity()).isEqualTo(Math.exp(r.loss()));
            double tokens = 0;
            for (float t : seqTokens) {
                tokens += t;
            }
            assertThat(r.tokens()).isEqualTo((long) tokens);
            assertThat(r.sequences()).isEqualTo(4);
            // each sequence's mean, as the callback and sequenceLoss report it
            List<Evaluation.SequenceLoss> each = new ArrayList<>();
            Evaluation.loss(model, CPU, goldenBatch(name), (l, i) -> each.add(l));
            for (int i = 0; i < 4; i++) {
                assertThat(each.get(i).tokens()).isEqualTo((long) seqTokens[i]);
                assertThat(each.get(i).mean()).isCloseTo(seqLoss[i], Percentage.withPercentage(1e-3));
            }
        }
    }

    @Test
    void theLossIsTokenWeightedAcrossSequencesOfAnyLength() {
        SingleDeviceModel model = Golden.load("qwen2");
        List<Sequence> batch = goldenBatch("qwen2");
        // the same sequences cut to different lengths: the result is the sum of losses over the sum of tokens
        List<Sequence> ragged = List.of(cut(batch.get(0), 16), cut(batch.get(1), 9), cut(batch.get(3), 12));
        double sum = 0;
        long tokens = 0;
        for (Sequence s : ragged) {
            TokenBatch b = TokenBatch.of(CPU, new int[][] {s.ids()}, new int[][] {s.labels()});
            sum += model.loss(b, null);
            tokens += TokenBatch.countTargets(new int[][] {s.labels()});
        }
        Evaluation.LossResult r = Evaluation.loss(model, CPU, ragged);
        assertThat(r.tokens()).isEqualTo(tokens);
        assertThat(r.loss()).isCloseTo(sum / tokens, Offset.offset(1e-12));
        assertThat(r.sequences()).isEqualTo(3);
    }

    private static Sequence cut(Sequence s, int length) {
        return new Sequence(Arrays.copyOf(s.ids(), length), Arrays.copyOf(s.labels(), length));
    }

    @Test
    void aSetWithoutLabelsIsAUserError() {
        int[] ids = {1, 2, 3};
        List<Sequence> unlabelled = List.of(new Sequence(ids, new int[] {-100, -100, -100}), Sequence.unmasked(new int[] {4}));
        assertThatThrownBy(() -> Evaluation.loss(Golden.load("qwen2"), CPU, unlabelled))
                .isInstanceOf(UserError.class).hasMessageContaining("no position").hasMessageContaining("-100");
    }

    @Test
    void aModelBuiltFromGatheredArraysEqualsTheLoadedOne() {
        ModelConfig config = Golden.config("llama");
        List<float[]> units = new ArrayList<>();
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("llama"), LlamaModel.layout(config))) {
            for (var u : LlamaModel.layout(config)) {
                float[] values = new float[Math.toIntExact(u.numel())];
                weights.read(units.size(), 0, values, 0, values.length);
                units.add(values);
            }
        }
        SingleDeviceModel built = EvalModel.build(config, CPU, units);
        assertThat(Evaluation.loss(built, CPU, goldenBatch("llama")))
                .isEqualTo(Evaluation.loss(Golden.load("llama"), CPU, goldenBatch("llama")));
        units.set(1, new float[3]);
        assertThatThrownBy(() -> EvalModel.build(config, CPU, units)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("block.0");
    }

    @Test
    void aModelThatLearntTheAnswersScoresFullMarks() {
        SingleDeviceModel model = EvalModel.build(SquadFixture.CONFIG, CPU, trained.finalParams());
        List<Evaluation.SquadPrediction> seen = new ArrayList<>();
        Evaluation.SquadResult r = Evaluation.squad(model, chars, SquadFixture.questions(), 32, seen::add);
        assertThat(r.predictions()).extracting(Evaluation.SquadPrediction::prediction).containsExactly("Paris", "red", "Oslo");
        assertThat(r.exactMatch()).isEqualTo(100.0);
        assertThat(r.f1()).isEqualTo(100.0);
        assertThat(r.questions()).isEqualTo(3);
        assertThat(seen).isEqualTo(r.predictions());
    }

    @Test
    void aTokenizerThatAppendsEosHasItDroppedFromThePrompt() {
        SingleDeviceModel model = EvalModel.build(SquadFixture.CONFIG, CPU, trained.finalParams());
        try (Tokenizer appending = Tokenizer.load(CharTokenizer.write(tmp.resolve("chars-eos"), true))) {
            String prompt = SquadFixture.questions().getFirst().prompt();
            assertThat(appending.encode(prompt, true)).endsWith(CharTokenizer.EOS).hasSize(prompt.length() + 1);
            Evaluation.SquadResult r = Evaluation.squad(model, appending, SquadFixture.questions(), 32);
            assertThat(r.exactMatch()).isEqualTo(100.0);
        }
    }

    @Test
    void scoresAreMeansInPercentAgainstTheBestGroundTruth() {
        SingleDeviceModel model = EvalModel.build(SquadFixture.CONFIG, CPU, trained.finalParams());
        List<SquadQuestion> learnt = SquadFixture.questions();
        List<SquadQuestion> questions = List.of(
                learnt.get(0), // "Paris": right
                new SquadQuestion("other", learnt.get(1).context(), learnt.get(1).question(), List.of("the red one", "blue")),
                new SquadQuestion("wrong", learnt.get(2).context(), learnt.get(2).question(), List.of("Bergen")));
        Evaluation.SquadResult r = Evaluation.squad(model, chars, questions, 8);
        // "red" against "the red one": normalised "red one", precision 1, recall 1/2, F1 2/3
        assertThat(r.predictions()).extracting(Evaluation.SquadPrediction::exactMatch).containsExactly(100.0, 0.0, 0.0);
        assertThat(r.predictions().get(1).f1()).isCloseTo(200.0 / 3, Offset.offset(1e-9));
        assertThat(r.exactMatch()).isCloseTo(100.0 / 3, Offset.offset(1e-9));
        assertThat(r.f1()).isCloseTo((100.0 + 200.0 / 3 + 0) / 3, Offset.offset(1e-9));
    }

    @Test
    void generationIsCutAtTheLimitAndAPromptMustFitTheModel() {
        SingleDeviceModel model = EvalModel.build(SquadFixture.CONFIG, CPU, trained.finalParams());
        Evaluation.SquadResult r = Evaluation.squad(model, chars, SquadFixture.questions().subList(0, 1), 3);
        assertThat(r.predictions().getFirst().prediction()).isEqualTo("Pa"); // " Pa": three tokens, stripped
        SquadQuestion longOne = new SquadQuestion("long", "x".repeat(100), "Why?", List.of("y"));
        assertThatThrownBy(() -> Evaluation.squad(model, chars, List.of(longOne), 32)).isInstanceOf(UserError.class)
                .hasMessageContaining("question long").hasMessageContaining("max_position_embeddings of 128");
        SquadQuestion nonAscii = new SquadQuestion("é", "café", "Où?", List.of("y"));
        assertThatThrownBy(() -> Evaluation.squad(Golden.load("qwen2"), qwen3(), List.of(nonAscii), 4))
                .isInstanceOf(UserError.class).hasMessageContaining("outside the model's vocabulary of 160")
                .hasMessageContaining("do not match");
    }

    @Test
    void theAnswerIsTheTextBeforeTheFirstNewlineWithoutEosOrUnknownIds() {
        int[] answer = CharTokenizer.ids(" Oslo, Norway \nQuestion");
        assertThat(Evaluation.answerText(chars, answer)).isEqualTo("Oslo, Norway");
        int[] withEos = Arrays.copyOf(CharTokenizer.ids(" red"), 5);
        withEos[4] = CharTokenizer.EOS;
        assertThat(Evaluation.answerText(chars, withEos)).isEqualTo("red");
        // ids beyond the tokenizer's vocabulary (a model's padded rows) are dropped, not decoded
        assertThat(Evaluation.answerText(chars, new int[] {CharTokenizer.id('a'), 120, CharTokenizer.id('b')})).isEqualTo("ab");
        assertThat(Evaluation.answerText(chars, new int[] {CharTokenizer.NEWLINE})).isEmpty();
    }

    @Test
    void generationStopsAtEosAndAtEveryTokenHoldingANewline() {
        assertThat(Evaluation.stopTokens(chars, CharTokenizer.VOCAB)).containsExactlyInAnyOrder(CharTokenizer.EOS,
                CharTokenizer.NEWLINE);
        Tokenizer qwen = qwen3();
        long start = System.nanoTime();
        int[] stop = Evaluation.stopTokens(qwen, 151936);
        double seconds = (System.nanoTime() - start) / 1e9;
        assertThat(seconds).as("a scan of the 151k-token vocabulary").isLessThan(10);
        assertThat(stop).contains(qwen.eosId().orElseThrow());
        for (String text : List.of("\n", "\n\n", ".\n", ")\n\n")) {
            int[] ids = qwen.encode(text, false);
            assertThat(ids).as("'%s' is one token", text.replace("\n", "\\n")).hasSize(1);
            assertThat(stop).contains(ids[0]);
        }
        assertThat(stop).doesNotContain(qwen.encode(" Paris", false));
        for (int id : stop) {
            if (id != qwen.eosId().orElseThrow()) {
                assertThat(qwen.decode(new int[] {id}, false)).contains("\n");
            }
        }
    }

    private static Tokenizer qwen3;

    /** The Qwen3 test tokenizer of src/test/resources/tokenizer/qwen3, unpacked once. */
    static synchronized Tokenizer qwen3() {
        if (qwen3 == null) {
            try {
                Path dir = Files.createDirectories(tmp.resolve("qwen3"));
                Path resources = Path.of(EvaluationTest.class.getResource("/tokenizer/qwen3/tokenizer_config.json").toURI())
                        .getParent();
                try (InputStream in = new GZIPInputStream(Files.newInputStream(resources.resolve("tokenizer.json.gz")))) {
                    Files.copy(in, dir.resolve("tokenizer.json"));
                }
                Files.copy(resources.resolve("tokenizer_config.json"), dir.resolve("tokenizer_config.json"));
                qwen3 = Tokenizer.load(dir);
            } catch (IOException | URISyntaxException e) {
                throw new AssertionError(e);
            }
        }
        return qwen3;
    }

    @AfterAll
    static void closeQwen() {
        if (qwen3 != null) {
            qwen3.close();
            qwen3 = null;
        }
    }
}
