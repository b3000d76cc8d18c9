package io.fsdp4j.fsdp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.PeftAdapter;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.train.RankMemory;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * LoRA against PEFT (tools/golden/make_golden_lora.py): the qwen2 golden model, adapters on every linear (rank 4,
 * alpha 8) from the same initial adapters (a PEFT adapter directory, through {@code lora.init}), 12 AdamW steps with
 * clipping and a cosine schedule on CPU ranks under every strategy: the losses and gradient norms within 1e-4
 * relative of PEFT's (float64) and the final adapters within 1e-4 of their scale. The base stays frozen: each rank
 * holds its parameters only, in fp32 here (no gradient), and trains the adapters' shards.
 */
public class LoraGoldenTest {
    public static final Path FIXTURE = Golden.dir("qwen2").resolveSibling("qwen2-lora");

    public static JsonNode fixture() {
        return fixture("qwen2");
    }

    /** The LoRA fixture of the golden model {@code model} (golden/{@code model}-lora). */
    /** An adapted model's units: the base from golden {@code model}'s directory, the adapters from a PEFT file. */
    static List<float[]> adaptedUnits(String model, CausalLM adapted, Path adapter) {
        List<float[]> units = new ArrayList<>();
        try (HfCheckpoint base = HfCheckpoint.open(Golden.dir(model), CausalLMs.layout(Golden.config(model)));
             PeftAdapter.Source source = PeftAdapter.open(adapter, FsdpModel.trainableLayouts(adapted))) {
            int next = 0;
            for (int u = 0; u < adapted.units().size(); u++) {
                float[] values = new float[Math.toIntExact(adapted.units().get(u).numel())];
                long frozen = adapted.frozenNumel(u);
                base.read(u, 0, values, 0, Math.toIntExact(frozen));
                if (frozen < values.length) {
                    source.read(next++, 0, values, Math.toIntExact(frozen), Math.toIntExact(values.length - frozen));
                }
                units.add(values);
            }
        }
        return units;
    }

    /** Every element of got within {@code relative} of want's largest magnitude. */
    static void assertClose(float[] got, float[] want, double relative, String what) {
        double scale = 0;
        for (float w : want) {
            scale = Math.max(scale, Math.abs(w));
        }
        assertThat(got).as(what).hasSameSizeAs(want);
        for (int i = 0; i < want.length; i++) {
            assertThat((double) got[i]).as("%s[%d]", what, i).isCloseTo(want[i], within(relative * scale));
        }
    }

    /** Each step's loss and gradient norm within 1e-4 of the fixture's (PEFT's run). */
    static void assertStepsMatch(TrainingJob.Result result, JsonNode t) {
        assertThat(result.steps()).hasSize(t.get("steps").intValue());
        for (int i = 0; i < result.steps().size(); i++) {
            double loss = t.get("loss").get(i).doubleValue(), norm = t.get("grad_norm").get(i).doubleValue();
            assertThat(result.steps().get(i).loss()).as("loss at step %d", i + 1).isCloseTo(loss, within(1e-4 * loss));
            assertThat(result.steps().get(i).gradNorm()).as("grad norm at step %d", i + 1)
                    .isCloseTo(norm, within(1e-4 * norm));
        }
    }

    public static Path fixtureDir(String model) {
        return Golden.dir(model).resolveSibling(model + "-lora");
    }

    public static JsonNode fixture(String model) {
        try {
            return new ObjectMapper().readTree(Files.readString(fixtureDir(model).resolve("train.json")));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The fixture's run through the training path a user runs, with {@code settings} on top. */
    public static TrainingJob.Result train(List<String> settings) {
        return train("qwen2", settings);
    }

    /** The LoRA fixture of {@code model}'s run ({@link #fixture(String)}), with {@code settings} on top. */
    public static TrainingJob.Result train(String model, List<String> settings) {
        return train(model, settings, (job, config) -> job);
    }

    /** That run, the job changed by {@code with} (given the job's config) before it runs. */
    public static TrainingJob.Result train(String model, List<String> settings,
                                           java.util.function.BiFunction<TrainingJob, TrainConfig, TrainingJob> with) {
        JsonNode t = fixture(model);
        List<Sequence> data = Golden.sequences(t);
        JsonNode lora = t.get("lora");
        List<String> sets = new ArrayList<>(Golden.trainingSettings(t));
        sets.addAll(List.of(
                "lora.rank=" + lora.get("rank").intValue(),
                "lora.alpha=" + lora.get("alpha").doubleValue(),
                "lora.target_modules=" + lora.get("target_modules").asText(),
                "lora.init=" + fixtureDir(model).resolve("adapter_init")));
        sets.addAll(settings);
        ModelConfig mc = Golden.config(model);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir(model), CausalLMs.layout(mc))) {
            TrainConfig config = TrainConfig.load(null, sets);
            return with.apply(new TrainingJob(config, mc, weights, data, false), config).run(null, true);
        }
    }

    public static List<String> layout(String strategy, int ranks, int shardSize) {
        return List.of("fsdp.strategy=" + strategy, "dist.ranks=" + ranks, "fsdp.shard_size=" + shardSize,
                "train.batch_size=" + 4 / ranks, "train.grad_accum=1");
    }

    /** The adapted model's layouts (base, then adapters, per block). */
    static List<UnitLayout> adaptedLayout() {
        JsonNode lora = fixture().get("lora");
        return LlamaModel.layout(Golden.config("qwen2"), new LoraSpec(lora.get("rank").intValue(),
                lora.get("alpha").doubleValue() / lora.get("rank").intValue(), LoraSpec.linears(Golden.config("qwen2").architecture())));
    }

    /**
     * Recomputing a block's activations (all of them, all but attention, or the cheap ones; or, under full keeping
     * attention, the last block checkpointed selectively) recomputes its adapters' too, and the gate|up gradient
     * written over gate|up leaves the adapters' backward what it reads.
     */
    @ParameterizedTest(name = "activation checkpointing {0}")
    @CsvSource({"full", "full_keep_attention", "selective", "full_keep_attention fsdp.blocks_selective=1"})
    void activationCheckpointingKeepsTheTrajectory(String checkpointing) {
        List<String> sets = new ArrayList<>(layout("full_shard", 2, 0));
        TrainingJob.Result plain = train(sets);
        String[] mode = checkpointing.split(" ");
        sets.add("fsdp.activation_checkpointing=" + mode[0]);
        sets.addAll(List.of(mode).subList(1, mode.length));
        TrainingJob.Result recomputed = train(sets);
        for (int i = 0; i < plain.steps().size(); i++) {
            assertThat(recomputed.steps().get(i).loss()).as("loss at step %d", i + 1)
                    .isEqualTo(plain.steps().get(i).loss());
        }
    }

    /**
     * With bf16 gathers the frozen base is held in bf16 (2 bytes a parameter, no gradient), the adapters with fp32
     * masters, gradients and moments; the losses stay near PEFT's (fp64) within bf16's rounding.
     */
    @org.junit.jupiter.api.Test
    void aBf16BaseIsHeldInTwoBytesAParameter() {
        TrainingJob.Result result = train(List.of("fsdp.strategy=full_shard", "dist.ranks=2", "train.batch_size=2",
                "fsdp.param_dtype=bf16"));
        List<UnitLayout> base = CausalLMs.layout(Golden.config("qwen2")), adapted = adaptedLayout();
        long baseShards = base.stream().mapToLong(u -> (u.numel() + 1) / 2).sum();
        long adapterShards = 0;
        for (int u = 1; u <= 2; u++) {
            adapterShards += (adapted.get(u).numel() - base.get(u).numel() + 1) / 2;
        }
        for (RankMemory m : result.memory()) {
            assertThat(m.paramBytes()).as("rank %d parameter bytes", m.rank()).isEqualTo(2 * baseShards + 4 * adapterShards);
            assertThat(m.gradBytes()).isEqualTo(4 * adapterShards);
        }
        JsonNode t = fixture();
        for (int i = 0; i < result.steps().size(); i++) {
            double loss = t.get("loss").get(i).doubleValue();
            assertThat(result.steps().get(i).loss()).as("loss at step %d", i + 1).isCloseTo(loss, within(2e-2 * loss));
        }
    }

    @ParameterizedTest(name = "{0} on {1} ranks, shard size {2}, offload {3}")
    @CsvSource({"full_shard,1,0,false", "full_shard,2,0,false", "shard_grad_op,2,0,false", "no_shard,2,0,false",
            "full_shard,4,0,false", "hybrid_shard,4,2,false", "hybrid_shard_zero2,4,2,false", "full_shard,2,0,true"})
    void twelveStepsMatchPeft(String strategy, int ranks, int shardSize, boolean offload) {
        List<String> sets = new ArrayList<>(layout(strategy, ranks, shardSize));
        sets.add("fsdp.cpu_offload=" + offload);
        TrainingJob.Result result = train(sets);
        JsonNode t = fixture();
        assertStepsMatch(result, t);
        for (int i = 0; i < result.steps().size(); i++) {
            assertThat(result.steps().get(i).lr()).isCloseTo(t.get("lr_per_step").get(i).doubleValue(), within(1e-9));
        }
        List<UnitLayout> layout = adaptedLayout();
        int adapters = 0;
        try (SafetensorsFile expected = SafetensorsFile.open(FIXTURE.resolve("final.safetensors"))) {
            for (int u = 0; u < layout.size(); u++) {
                for (ParamSpec p : layout.get(u).params()) {
                    if (!p.name().contains(".lora_")) {
                        continue;
                    }
                    adapters++;
                    float[] want = expected.readFloats("base_model.model." + p.name());
                    float[] got = Arrays.copyOfRange(result.finalParams().get(u), (int) p.offset(), (int) p.end());
                    double scale = 0;
                    for (float w : want) {
                        scale = Math.max(scale, Math.abs(w));
                    }
                    for (int i = 0; i < want.length; i++) {
                        assertThat((double) got[i]).as("%s[%d]", p.name(), i).isCloseTo(want[i], within(1e-4 * scale));
                    }
                }
            }
        }
        assertThat(adapters).isEqualTo(28); // A and B of 7 linears in 2 blocks
        // each rank holds the frozen base (fp32 here) and its share of the adapters' master and gradient shards
        long adapterNumel = layout.stream().skip(1).limit(2).mapToLong(u -> u.numel()).sum()
                - CausalLMs.layout(Golden.config("qwen2")).stream().skip(1).limit(2).mapToLong(UnitLayout::numel).sum();
        for (RankMemory m : result.memory()) {
            int shards = strategy.equals("no_shard") ? 1 : strategy.startsWith("hybrid") ? shardSize : ranks;
            assertThat(m.gradBytes()).as("rank %d gradient bytes", m.rank()).isBetween(4 * adapterNumel / shards,
                    4 * (adapterNumel / shards + 2));
            assertThat(m.optimizerBytes()).isEqualTo(2 * m.gradBytes());
        }
    }
}
