package io.fsdp4j.fsdp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tensor.Nf4;
import io.fsdp4j.train.RankMemory;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * QLoRA against PEFT (tools/golden/make_golden_qlora.py): PEFT's LoRA (rank 4, alpha 8, every linear, from the same
 * initial adapters) on the qwen2 golden model whose block linears are their NF4 round trip, which is QLoRA's
 * arithmetic, against fsdp4j with {@code lora.quantize=nf4} loading the plain qwen2 weights and quantizing them itself:
 * 12 AdamW steps on CPU ranks under every strategy, the losses and gradient norms within 1e-4 relative of PEFT's
 * (float64) and the final adapters within 1e-4 of their scale. Each rank holds its blocks' linears as NF4 (packed
 * codes and an fp32 absmax per 64, sharded in whole blocks), the rest of the base in fsdp.param_dtype.
 */
public class QloraGoldenTest {
    public static final Path FIXTURE = Golden.dir("qwen2").resolveSibling("qwen2-qlora");
    static final ModelConfig CONFIG = Golden.config("qwen2");

    public static JsonNode fixture() {
        try {
            return new ObjectMapper().readTree(Files.readString(FIXTURE.resolve("train.json")));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The fixture's settings: LoRA as PEFT's run, from its initial adapters, the base in NF4. */
    public static List<String> settings() {
        JsonNode lora = fixture().get("lora");
        List<String> sets = new ArrayList<>(Golden.trainingSettings(fixture()));
        sets.addAll(List.of("lora.rank=" + lora.get("rank").intValue(), "lora.alpha=" + lora.get("alpha").doubleValue(),
                "lora.target_modules=" + lora.get("target_modules").asText(),
                "lora.init=" + FIXTURE.resolve("adapter_init"), "lora.quantize=nf4"));
        return sets;
    }

    /** The fixture's run on the plain qwen2 weights, with {@code settings} on top. */
    public static TrainingJob.Result train(List<String> extra) {
        List<String> sets = new ArrayList<>(settings());
        sets.addAll(extra);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(CONFIG))) {
            return new TrainingJob(TrainConfig.load(null, sets), CONFIG, weights, Golden.sequences(fixture()), false)
                    .run(null, true);
        }
    }

    /** The adapted model's layouts (base, then adapters, per block). */
    static List<UnitLayout> adaptedLayout() {
        return CausalLMs.create(CONFIG, CpuBackend.INSTANCE, new LoraSpec(4, 2.0,
                LoraSpec.linears(CONFIG.architecture()))).units();
    }

    @ParameterizedTest(name = "{0} on {1} ranks, shard size {2}, offload {3}")
    @CsvSource({"full_shard,1,0,false", "full_shard,2,0,false", "shard_grad_op,2,0,false", "no_shard,2,0,false",
            "full_shard,4,0,false", "hybrid_shard,4,2,false", "hybrid_shard_zero2,4,2,false", "full_shard,2,0,true"})
    void twelveStepsMatchPeftOnTheDequantizedBase(String strategy, int ranks, int shardSize, boolean offload) {
        List<String> sets = new ArrayList<>(LoraGoldenTest.layout(strategy, ranks, shardSize));
        sets.add("fsdp.cpu_offload=" + offload);
        TrainingJob.Result result = train(sets);
        JsonNode t = fixture();
        LoraGoldenTest.assertStepsMatch(result, t);
        List<UnitLayout> layout = adaptedLayout();
        try (SafetensorsFile expected = SafetensorsFile.open(FIXTURE.resolve("final.safetensors"))) {
            for (int u = 1; u <= 2; u++) {
                for (ParamSpec p : layout.get(u).params()) {
                    if (p.name().contains(".lora_")) {
                        LoraGoldenTest.assertClose(Arrays.copyOfRange(result.finalParams().get(u), (int) p.offset(),
                                (int) p.end()), expected.readFloats("base_model.model." + p.name()), 1e-4, p.name());
                    }
                }
            }
        }
        // each rank: the embeddings and head in fp32, each block's linears as NF4 (36 bytes a block of 64, whole
        // blocks a rank), its norms and biases in fp32, and its share of the adapters' masters
        int s = strategy.equals("no_shard") ? 1 : strategy.startsWith("hybrid") ? shardSize : ranks;
        List<UnitLayout> base = CausalLMs.layout(CONFIG);
        long expected = 4 * ceil(base.get(0).numel(), s) + 4 * ceil(base.get(3).numel(), s);
        for (int u = 1; u <= 2; u++) {
            long linears = base.get(u).params().stream().filter(p -> p.kind() == ParamSpec.Kind.MATRIX)
                    .mapToLong(ParamSpec::numel).sum();
            expected += 36 * ceil(linears / 64, s) + 4 * ceil(base.get(u).numel() - linears, s)
                    + 4 * ceil(layout.get(u).numel() - base.get(u).numel(), s);
        }
        for (RankMemory m : result.memory()) {
            assertThat(m.paramBytes()).as("rank %d parameter bytes", m.rank()).isEqualTo(expected);
        }
    }

    /** Recomputing a block's activations gathers and dequantizes its base again: the same steps, bit for bit. */
    @ParameterizedTest(name = "activation checkpointing {0}, prefetch {1}")
    @CsvSource({"full,1", "selective,1", "none,0", "none,2"})
    void recomputingAndPrefetchingKeepTheTrajectory(String checkpointing, int prefetch) {
        List<String> sets = new ArrayList<>(LoraGoldenTest.layout("full_shard", 2, 0));
        TrainingJob.Result plain = train(sets);
        sets.addAll(List.of("fsdp.activation_checkpointing=" + checkpointing, "fsdp.prefetch=" + prefetch));
        TrainingJob.Result other = train(sets);
        for (int i = 0; i < plain.steps().size(); i++) {
            assertThat(other.steps().get(i).loss()).as("loss at step %d", i + 1).isEqualTo(plain.steps().get(i).loss());
        }
    }

    private static long ceil(long a, long b) {
        return (a + b - 1) / b;
    }

    /**
     * The base the run computed with is the NF4 round trip of the loaded weights, as the fixture's PEFT run held it
     * (its merged model less the merged adapters is not at hand, so the trip is checked against Nf4 itself), and
     * the norms and biases are the loaded ones; PEFT's run on the unquantized base is another trajectory.
     */
    @Test
    void theFrozenBaseIsTheRoundTripOfTheLoadedWeights() {
        TrainingJob.Result result = train(LoraGoldenTest.layout("full_shard", 2, 0));
        List<UnitLayout> base = CausalLMs.layout(CONFIG);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), base)) {
            for (int u = 1; u <= 2; u++) {
                for (ParamSpec p : base.get(u).params()) {
                    float[] loaded = new float[Math.toIntExact(p.numel())];
                    weights.read(u, p.offset(), loaded, 0, loaded.length);
                    float[] held = Arrays.copyOfRange(result.finalParams().get(u), (int) p.offset(), (int) p.end());
                    float[] want = p.kind() == ParamSpec.Kind.MATRIX ? Nf4.roundTrip(loaded) : loaded;
                    assertThat(held).as(p.name()).containsExactly(want);
                    if (p.kind() == ParamSpec.Kind.MATRIX) {
                        assertThat(held).as(p.name() + " is quantized").isNotEqualTo(loaded);
                    }
                }
            }
        }
        double plainLoss = LoraGoldenTest.fixture().get("loss").get(0).doubleValue();
        assertThat(result.steps().get(0).loss()).as("not the unquantized base's loss")
                .isNotCloseTo(plainLoss, within(1e-3 * plainLoss));
    }

    /**
     * With bf16 gathers the NF4 base is dequantized to bf16 (code * absmax rounded, as bitsandbytes' bf16 compute
     * dtype), its norms and biases held in bf16: the losses stay near PEFT's (fp64) within bf16's rounding.
     */
    @Test
    void aBf16RunDequantizesToBf16() {
        TrainingJob.Result result = train(List.of("fsdp.strategy=full_shard", "dist.ranks=2", "train.batch_size=2",
                "fsdp.param_dtype=bf16"));
        JsonNode t = fixture();
        for (int i = 0; i < result.steps().size(); i++) {
            double loss = t.get("loss").get(i).doubleValue();
            assertThat(result.steps().get(i).loss()).as("loss at step %d", i + 1).isCloseTo(loss, within(2e-2 * loss));
        }
        TrainingJob.Result lora = LoraGoldenTest.train(List.of("fsdp.strategy=full_shard", "dist.ranks=2",
                "train.batch_size=2", "fsdp.param_dtype=bf16"));
        for (int r = 0; r < 2; r++) { // NF4's 4.5 bits against bf16's 16 for the block linears
            assertThat(result.memory().get(r).paramBytes()).isLessThan(lora.memory().get(r).paramBytes());
        }
    }

    /** A model whose block linear is not whole blocks of 64 elements is refused in one line naming it. */
    @Test
    void aWeightNotInWholeBlocksIsRefused() {
        ModelConfig odd = new ModelConfig(CONFIG.architecture(), CONFIG.vocabSize(), 36, 64, 1, 6, 2, 6,
                CONFIG.ropeTheta(), CONFIG.rmsNormEps(), true, true, 0, CONFIG.maxPositions());
        CausalLM model = CausalLMs.create(odd, CpuBackend.INSTANCE, new LoraSpec(4, 2.0,
                LoraSpec.linears(odd.architecture())));
        // a job on it is refused before any rank starts
        List<String> sets = new ArrayList<>(settings());
        sets.removeIf(x -> x.startsWith("lora.init="));
        sets.add("dist.ranks=2");
        TrainingJob job = new TrainingJob(TrainConfig.load(null, sets), odd, new RandomInit(1, 0.02,
                CausalLMs.layout(odd)), Golden.sequences(fixture()), false);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> job.run(null, false))
                .isInstanceOf(io.fsdp4j.UserError.class).hasMessageContaining("q_proj.weight [36, 36]");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> FsdpModel.requireQuantizable(model))
                .isInstanceOf(io.fsdp4j.UserError.class)
                .hasMessageContaining("lora.quantize")
                .hasMessageContaining("model.layers.0.self_attn.q_proj.weight [36, 36] has 1296 elements, not a "
                        + "multiple of NF4's block of 64")
                .hasMessageContaining("lora.quantize=none")
                .hasMessageNotContaining("\n");
        FsdpModel.requireQuantizable(CausalLMs.create(CONFIG, CpuBackend.INSTANCE, new LoraSpec(4, 2.0,
                LoraSpec.linears(CONFIG.architecture())))); // qwen2's are
    }
}
