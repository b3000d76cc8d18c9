package io.fsdp4j.eval;

import static io.fsdp4j.eval.EvalCommandTest.run;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.PeftAdapter;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.data.SquadPrompt;
import io.fsdp4j.fsdp.LoraGoldenTest;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code eval} and {@code score} with {@code --adapter DIR}, as a user runs them: a LoRA adapter that fsdp4j exported
 * gives the loss and the greedy answers of its merged export ({@code export --merge}), not the base's; PEFT's own
 * adapter directories give PEFT's logits; each bad adapter is one {@code error:} line and status 2.
 */
class AdapterEvalTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    static Path tmp;
    /** The golden qwen2 with LoRA trained 12 steps: its adapter as exported, and merged. */
    static Path adapter;
    static Path merged;
    static Path loraCheckpoints;
    static Path batch;

    @BeforeAll
    static void trainAndExport() throws IOException {
        Path checkpoints = tmp.resolve("lora-ck");
        loraCheckpoints = checkpoints;
        LoraGoldenTest.train("qwen2", LoraGoldenTest.layout("full_shard", 2, 0), (job, config) ->
                job.savingCheckpoints(new TrainingJob.CheckpointPlan(checkpoints, 12, 1,
                        Golden.dir("qwen2").toAbsolutePath().toString(), tree(config.toJson()))));
        adapter = tmp.resolve("adapter");
        merged = tmp.resolve("merged");
        assertThat(run("export", "--checkpoint", checkpoints, "--out", adapter).status()).isZero();
        assertThat(run("export", "--checkpoint", checkpoints, "--out", merged, "--merge").status()).isZero();
        batch = jsonl(tmp.resolve("batch.jsonl"), EvaluationTest.goldenBatch("qwen2"));
    }

    @Test
    void theLossWithTheAdapterIsTheMergedModelsAndNotTheBases() {
        double withAdapter = run("eval", "--model", Golden.dir("qwen2"), "--adapter", adapter, "--data", batch).last()
                .get("loss").doubleValue();
        double ofMerged = run("eval", "--model", merged, "--data", batch).last().get("loss").doubleValue();
        double ofBase = run("eval", "--model", Golden.dir("qwen2"), "--data", batch).last().get("loss").doubleValue();
        assertThat(withAdapter).isCloseTo(ofMerged, within(1e-5 * ofMerged));
        assertThat(Math.abs(withAdapter - ofBase)).isGreaterThan(1e-2);
        // on 2 ranks, fully sharded, batched: the same number
        double sharded = run("eval", "--model", Golden.dir("qwen2"), "--adapter", adapter, "--data", batch,
                "--batch-size", 2, "--set", "dist.ranks=2", "--set", "fsdp.strategy=full_shard").last().get("loss")
                .doubleValue();
        assertThat(sharded).isCloseTo(withAdapter, within(1e-6 * withAdapter));
        // score: per sequence, then the mean, the same as eval's
        EvalCommandTest.Run score = run("score", "--model", Golden.dir("qwen2"), "--adapter", adapter, "--data", batch);
        assertThat(score.lines()).hasSize(5);
        assertThat(score.last().get("mean_loss").doubleValue()).isCloseTo(withAdapter, within(1e-6 * withAdapter));
        EvalCommandTest.Run scoreMerged = run("score", "--model", merged, "--data", batch);
        for (int i = 0; i < 4; i++) {
            double loss = scoreMerged.lines().get(i).get("loss").doubleValue();
            assertThat(score.lines().get(i).get("loss").doubleValue()).as("sequence %d", i)
                    .isCloseTo(loss, within(1e-5 * loss));
        }
    }

    /** A LoRA run's checkpoint (its adapters only) is evaluated on the base model its run started from. */
    @Test
    void aLoraCheckpointIsEvaluatedOnItsBaseModel() throws IOException {
        double withAdapter = run("eval", "--model", Golden.dir("qwen2"), "--adapter", adapter, "--data", batch).last()
                .get("loss").doubleValue();
        assertThat(run("eval", "--checkpoint", loraCheckpoints, "--data", batch).last().get("loss").doubleValue())
                .isEqualTo(withAdapter);
        assertThat(run("score", "--checkpoint", loraCheckpoints.resolve("step-00000012"), "--data", batch).last()
                .get("mean_loss").doubleValue()).isCloseTo(withAdapter, within(1e-6 * withAdapter));
        run("eval", "--checkpoint", loraCheckpoints, "--adapter", adapter, "--data", batch)
                .failsWith("holds LoRA adapters already");
        // a base that is no model directory (any more)
        Path moved = tmp.resolve("moved-ck").resolve("step-00000012");
        Files.createDirectories(moved);
        try (var files = Files.list(loraCheckpoints.resolve("step-00000012"))) {
            for (Path f : files.toList()) {
                Files.copy(f, moved.resolve(f.getFileName()));
            }
        }
        ObjectNode index = (ObjectNode) JSON.readTree(moved.resolve("index.json").toFile());
        assertThat(index.has("modelPath")).isTrue();
        index.put("modelPath", tmp.resolve("gone").toString());
        JSON.writeValue(moved.resolve("index.json").toFile(), index);
        run("eval", "--checkpoint", moved, "--data", batch).failsWith("holds LoRA adapters of a base model that is not"
                + " a model directory (" + tmp.resolve("gone") + ")");
    }

    /** An adapter directory as PEFT writes it (save_pretrained): the adapted model's logits are PEFT's. */
    @ParameterizedTest
    @ValueSource(strings = {"phi3", "gemma2", "bloom"})
    void peftsOwnAdapterGivesPeftsLogits(String model) throws IOException {
        Path fixture = LoraGoldenTest.fixtureDir(model);
        int[][] ids = Golden.intRows(LoraGoldenTest.fixture(model).get("input_ids"));
        List<Sequence> first = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            first.add(new Sequence(ids[i], ids[i]));
        }
        Path data = jsonl(tmp.resolve(model + "-first.jsonl"), first);
        Path logits = tmp.resolve(model + "-logits.safetensors");
        EvalCommandTest.Run r = run("score", "--model", Golden.dir(model), "--adapter", fixture.resolve("adapter_final"),
                "--data", data, "--logits-out", logits, "--batch-size", 4);
        assertThat(r.status()).as(r.err()).isZero();
        try (SafetensorsFile got = SafetensorsFile.open(logits);
             SafetensorsFile want = SafetensorsFile.open(fixture.resolve("logits.safetensors"))) {
            float[] g = got.readFloats("logits"), w = want.readFloats("logits");
            double scale = 0;
            for (float v : w) {
                scale = Math.max(scale, Math.abs(v));
            }
            assertThat(g).hasSameSizeAs(w);
            for (int i = 0; i < w.length; i++) {
                assertThat((double) g[i]).as("logits[%d]", i).isCloseTo(w[i], within(1e-5 * scale));
            }
        }
    }

    /**
     * Greedy answers through the adapter: a base that learnt three SQuAD answers, LoRA trained to give others; eval
     * --task squad with the adapter answers as the merged export does, and not as the base.
     */
    @Test
    void squadAnswersThroughTheAdapterAreTheMergedModels() throws IOException {
        Path baseCk = tmp.resolve("squad-base-ck"), base = tmp.resolve("squad-base");
        SquadFixture.train(baseCk, null);
        assertThat(run("export", "--checkpoint", baseCk, "--out", base).status()).isZero();
        CharTokenizer.write(base);
        String[][] other = {{"Paris is the capital of France.", "What is the capital of France?", "Lyon"},
            {"The cat sat on the red mat.", "What color is the mat?", "blue"},
            {"Alice was born in 1990 in Oslo.", "Where was Alice born?", "Bergen"}};
        List<Sequence> data = new ArrayList<>();
        List<SquadQuestion> questions = new ArrayList<>();
        for (int i = 0; i < other.length; i++) {
            int[] prompt = CharTokenizer.ids(SquadPrompt.prompt(other[i][0], other[i][1]));
            int[] answer = CharTokenizer.ids(SquadPrompt.completion(other[i][2]));
            int[] seq = new int[prompt.length + answer.length + 1];
            System.arraycopy(prompt, 0, seq, 0, prompt.length);
            System.arraycopy(answer, 0, seq, prompt.length, answer.length);
            seq[seq.length - 1] = CharTokenizer.EOS;
            int[] labels = seq.clone();
            java.util.Arrays.fill(labels, 0, prompt.length, TokenBatch.IGNORE);
            data.add(new Sequence(seq, labels));
            questions.add(new SquadQuestion("q" + i, other[i][0], other[i][1], List.of(other[i][2])));
        }
        TrainConfig config = TrainConfig.load(null, List.of("dist.ranks=1", "dist.device=cpu", "train.batch_size=3",
                "data.seq_len=96", "train.steps=80", "optim.lr=0.005", "schedule.warmup_steps=5",
                "optim.weight_decay=0", "lora.rank=8", "lora.alpha=16", "lora.target_modules=all-linear"));
        Path loraCk = tmp.resolve("squad-lora-ck");
        try (HfCheckpoint weights = HfCheckpoint.open(base, CausalLMs.layout(SquadFixture.CONFIG))) {
            new TrainingJob(config, SquadFixture.CONFIG, weights, data, false).savingCheckpoints(
                    new TrainingJob.CheckpointPlan(loraCk, 0, 1, base.toAbsolutePath().toString(),
                            tree(config.toJson()))).run(null, true);
        }
        Path squadAdapter = tmp.resolve("squad-adapter"), squadMerged = tmp.resolve("squad-merged");
        assertThat(run("export", "--checkpoint", loraCk, "--out", squadAdapter).status()).isZero();
        assertThat(run("export", "--checkpoint", loraCk, "--out", squadMerged, "--merge").status()).isZero();
        Path squad = Files.writeString(tmp.resolve("squad-other.json"), SquadFixture.squadJson(questions));

        List<String> viaAdapter = predictions(run("eval", "--model", base, "--adapter", squadAdapter, "--task", "squad",
                "--data", squad, "--verbose"));
        List<String> viaMerged = predictions(run("eval", "--model", squadMerged, "--task", "squad", "--data", squad,
                "--verbose"));
        List<String> viaBase = predictions(run("eval", "--model", base, "--task", "squad", "--data", squad,
                "--verbose"));
        assertThat(viaBase).containsExactly("Paris", "red", "Oslo");
        assertThat(viaAdapter).isEqualTo(viaMerged).containsExactly("Lyon", "blue", "Bergen");
    }

    private static List<String> predictions(EvalCommandTest.Run r) {
        r.last();
        return r.lines().subList(0, r.lines().size() - 1).stream().map(l -> l.get("prediction").asText()).toList();
    }

    @Test
    void aBadAdapterIsOneErrorLine() throws IOException {
        Path qwen2 = Golden.dir("qwen2");
        run("eval", "--model", qwen2, "--adapter", tmp.resolve("none"), "--data", batch)
                .failsWith("--adapter: " + tmp.resolve("none") + " is not a directory");
        Path empty = Files.createDirectories(tmp.resolve("empty-adapter"));
        run("score", "--model", qwen2, "--adapter", empty, "--data", batch)
                .failsWith(empty.resolve(PeftAdapter.CONFIG) + " does not exist");
        // a config whose r its tensors do not have
        Path rank8 = copy(adapter, tmp.resolve("rank8"));
        ObjectNode config = (ObjectNode) JSON.readTree(rank8.resolve(PeftAdapter.CONFIG).toFile());
        config.put("r", 8);
        JSON.writeValue(rank8.resolve(PeftAdapter.CONFIG).toFile(), config);
        run("eval", "--model", qwen2, "--adapter", rank8, "--data", batch)
                .failsWith(rank8.resolve(PeftAdapter.CONFIG).toString(), "says r 8", "of rank 4");
        Path notLora = copy(adapter, tmp.resolve("ia3"));
        config.put("r", 4).put("peft_type", "IA3");
        JSON.writeValue(notLora.resolve(PeftAdapter.CONFIG).toFile(), config);
        run("eval", "--model", qwen2, "--adapter", notLora, "--data", batch).failsWith("not a LoRA adapter's config");
        // adapters of other bases: another family, other shapes, more layers than the base has
        run("eval", "--model", qwen2, "--adapter", LoraGoldenTest.fixtureDir("phi3").resolve("adapter_final"),
                "--data", batch).failsWith("adapts gate_up_proj, qkv_proj, which Qwen2ForCausalLM does not have (its linears: "
                + "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)");
        run("eval", "--model", qwen2, "--adapter", LoraGoldenTest.fixtureDir("qwen3").resolve("adapter_final"),
                "--data", batch).failsWith("has shape [64, 4], this model's is [32, 4]", "is it an adapter of");
        run("eval", "--model", Golden.dir("gemma2"), "--adapter", LoraGoldenTest.fixtureDir("qwen3")
                .resolve("adapter_final"), "--data", batch)
                .failsWith("has no tensor base_model.model.model.layers.2.self_attn.q_proj.lora_A.weight");
        // and an adapter with more layers than the base: the tensors it has no place for
        run("eval", "--model", Golden.dir("qwen3"), "--adapter", LoraGoldenTest.fixtureDir("gemma2")
                .resolve("adapter_final"), "--data", batch)
                .failsWith("holds base_model.model.model.layers.2.", "which this model has no place for");
    }

    private static Path copy(Path from, Path to) throws IOException {
        Files.createDirectories(to);
        for (String f : List.of(PeftAdapter.CONFIG, PeftAdapter.WEIGHTS)) {
            Files.copy(from.resolve(f), to.resolve(f));
        }
        return to;
    }

    /** The sequences as a token file, one {"input_ids", "labels"} line each (what eval --data reads). */
    static Path jsonl(Path file, List<Sequence> sequences) throws IOException {
        List<String> lines = new ArrayList<>();
        for (Sequence s : sequences) {
            ObjectNode line = JSON.createObjectNode();
            line.set("input_ids", JSON.valueToTree(s.ids()));
            line.set("labels", JSON.valueToTree(s.labels()));
            lines.add(JSON.writeValueAsString(line));
        }
        return Files.write(file, lines);
    }

    private static JsonNode tree(String json) {
        try {
            return JSON.readTree(json);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
