package io.fsdp4j.fsdp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.checkpoint.HfExport;
import io.fsdp4j.checkpoint.PeftAdapter;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.TrainingJob;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * LoRA on every family against PEFT (tools/golden/make_golden_lora.py --model X): Phi-3 (one adapter on each fused
 * product, qkv_proj and gate_up_proj, as PEFT puts it), Gemma 2 and 3, Qwen3, BLOOM (adapters without bias on its
 * biased linears). all-linear, rank 4, alpha 8, from PEFT's initial adapters: 12 AdamW steps on 1, 2 and 4 CPU ranks
 * within 1e-4 of PEFT's losses, gradient norms and final adapters; the logits of PEFT's final adapter read as a PEFT
 * file, PEFT's merge_and_unload, and the export as a PEFT adapter and merged.
 */
class LoraFamiliesTest {
    @TempDir
    Path tmp;

    /** The PEFT names all-linear targets in each family: what the fixture's adapter holds. */
    @ParameterizedTest
    @CsvSource(delimiter = ';', value = {
        "phi3; qkv_proj, o_proj, gate_up_proj, down_proj",
        "gemma2; q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj",
        "gemma3; q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj",
        "qwen3; q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj",
        "bloom; query_key_value, dense, dense_h_to_4h, dense_4h_to_h"})
    void allLinearTargetsWhatPeftTargets(String model, String modules) {
        List<String> expected = Arrays.stream(modules.split(",")).map(String::trim).toList();
        ModelConfig config = Golden.config(model);
        LoraSpec spec = LoraSpec.of(lora("lora.target_modules=all-linear"), config);
        assertThat(spec.modules()).isEqualTo(expected);
        List<UnitLayout> adapters = FsdpModel.trainableLayouts(CausalLMs.create(config, CpuBackend.INSTANCE, spec));
        try (SafetensorsFile init = SafetensorsFile.open(adapterInit(model).resolve(PeftAdapter.WEIGHTS))) {
            List<String> names = adapters.stream().flatMap(u -> u.params().stream())
                    .map(p -> PeftAdapter.PREFIX + p.name()).sorted().toList();
            assertThat(names).isEqualTo(init.names().stream().sorted().toList());
        }
    }

    @ParameterizedTest(name = "{0}: {1} on {2} ranks, shard size {3}")
    @CsvSource({"phi3,full_shard,1,0", "phi3,full_shard,2,0", "phi3,hybrid_shard,4,2",
            "gemma2,full_shard,1,0", "gemma2,full_shard,2,0", "gemma2,shard_grad_op,4,0",
            "gemma3,full_shard,1,0", "gemma3,full_shard,2,0", "gemma3,hybrid_shard,4,2",
            "qwen3,full_shard,1,0", "qwen3,no_shard,2,0", "qwen3,full_shard,4,0",
            "bloom,full_shard,1,0", "bloom,full_shard,2,0", "bloom,hybrid_shard_zero2,4,2"})
    void twelveStepsMatchPeft(String model, String strategy, int ranks, int shardSize) {
        TrainingJob.Result result = LoraGoldenTest.train(model, LoraGoldenTest.layout(strategy, ranks, shardSize));
        JsonNode t = LoraGoldenTest.fixture(model);
        LoraGoldenTest.assertStepsMatch(result, t);
        List<UnitLayout> layout = adapted(model).units();
        int adapters = 0;
        try (SafetensorsFile expected = SafetensorsFile.open(LoraGoldenTest.fixtureDir(model).resolve("final.safetensors"))) {
            for (int u = 0; u < layout.size(); u++) {
                for (ParamSpec p : layout.get(u).params()) {
                    if (p.name().contains(".lora_")) {
                        adapters++;
                        LoraGoldenTest.assertClose(Arrays.copyOfRange(result.finalParams().get(u), (int) p.offset(), (int) p.end()),
                                expected.readFloats(PeftAdapter.PREFIX + p.name()), 1e-4, p.name());
                    }
                }
            }
            assertThat(adapters).isEqualTo(expected.names().size());
        }
    }

    /** PEFT's final adapter read as a PEFT file: the adapted model's logits are PEFT's, and not the base's. */
    @ParameterizedTest
    @ValueSource(strings = {"phi3", "gemma2", "gemma3", "qwen3", "bloom"})
    void logitsOfPeftsAdapterArePefts(String model) {
        CausalLM adapted = adapted(model);
        List<Tensor> params = LoraGoldenTest.adaptedUnits(model, adapted,
                        LoraGoldenTest.fixtureDir(model).resolve("final.safetensors"))
                .stream().map(v -> CpuBackend.INSTANCE.upload(v, v.length)).toList();
        int[][] ids = Arrays.copyOf(Golden.intRows(LoraGoldenTest.fixture(model).get("input_ids")), 4);
        float[] logits = CpuBackend.INSTANCE.toFloats(new SingleDeviceModel(adapted, CpuBackend.INSTANCE, params)
                .logits(TokenBatch.of(CpuBackend.INSTANCE, ids, ids)));
        try (SafetensorsFile expected = SafetensorsFile.open(LoraGoldenTest.fixtureDir(model).resolve("logits.safetensors"))) {
            LoraGoldenTest.assertClose(logits, expected.readFloats("logits"), 1e-5, "logits");
        }
        CausalLM plain = CausalLMs.create(Golden.config(model), CpuBackend.INSTANCE);
        List<Tensor> baseOnly = new ArrayList<>(params);
        for (int u = 1; u < params.size() - 1; u++) {
            baseOnly.set(u, params.get(u).view(0, Math.toIntExact(plain.units().get(u).numel())));
        }
        float[] base = CpuBackend.INSTANCE.toFloats(new SingleDeviceModel(plain, CpuBackend.INSTANCE, baseOnly)
                .logits(TokenBatch.of(CpuBackend.INSTANCE, ids, ids)));
        assertThat(maxAbsDiff(base, logits)).isGreaterThan(1e-3f);
    }

    /** The run exported as a PEFT adapter holds the final adapters; merged, it is PEFT's merge_and_unload. */
    @ParameterizedTest
    @ValueSource(strings = {"phi3", "gemma3", "bloom"})
    void exportsAsPeftAndMergedAsPeftMerges(String model) throws Exception {
        Path checkpoints = tmp.resolve("run");
        TrainingJob.Result result = trainSaving(model, LoraGoldenTest.layout("full_shard", 2, 0), checkpoints);
        Path last = checkpoints.resolve("step-00000012");
        Path adapter = HfExport.export(last, tmp.resolve("adapter"), HfExport.Options.defaults());
        JsonNode adapterConfig = new ObjectMapper().readTree(Files.readString(adapter.resolve(PeftAdapter.CONFIG)));
        List<String> targets = new ArrayList<>();
        adapterConfig.get("target_modules").forEach(n -> targets.add(n.asText()));
        assertThat(targets).isEqualTo(LoraSpec.linears(Golden.config(model).architecture()));
        try (SafetensorsFile got = SafetensorsFile.open(adapter.resolve(PeftAdapter.WEIGHTS));
             SafetensorsFile want = SafetensorsFile.open(LoraGoldenTest.fixtureDir(model).resolve("final.safetensors"))) {
            assertThat(got.names()).containsExactlyInAnyOrderElementsOf(want.names());
            for (String name : want.names()) {
                LoraGoldenTest.assertClose(got.readFloats(name), want.readFloats(name), 1e-4, name);
            }
        }
        Path merged = HfExport.export(last, tmp.resolve("merged"), HfExport.Options.defaults().withMerge(true));
        try (SafetensorsFile got = SafetensorsFile.open(merged.resolve(HfExport.SINGLE_FILE));
             SafetensorsFile want = SafetensorsFile.open(LoraGoldenTest.fixtureDir(model).resolve("merged.safetensors"))) {
            for (String name : want.names()) {
                LoraGoldenTest.assertClose(got.readFloats(name), want.readFloats(name), 1e-4, name);
            }
        }
        assertThat(result.steps()).hasSize(12);
    }

    /** A module the family lacks is refused in one line naming the family's linears. */
    @Test
    void aModuleTheFamilyLacksIsRefusedNamingItsLinears() {
        assertThatThrownBy(() -> LoraSpec.of(lora("lora.target_modules=q_proj,v_proj"), Golden.config("phi3")))
                .isInstanceOf(UserError.class)
                .hasMessage("config key 'lora.target_modules': Phi3ForCausalLM has no linear q_proj; its linears are "
                        + "qkv_proj, o_proj, gate_up_proj, down_proj (or all-linear)");
        assertThatThrownBy(() -> LoraSpec.of(lora("lora.target_modules=dense,q_proj"), Golden.config("bloom")))
                .isInstanceOf(UserError.class)
                .hasMessage("config key 'lora.target_modules': BloomForCausalLM has no linear q_proj; its linears are "
                        + "query_key_value, dense, dense_h_to_4h, dense_4h_to_h (or all-linear)");
        assertThatThrownBy(() -> LoraSpec.of(lora("lora.target_modules=qkv_proj"), Golden.config("gemma2")))
                .isInstanceOf(UserError.class).hasMessageContaining("Gemma2ForCausalLM has no linear qkv_proj")
                .hasMessageNotContaining("\n");
        // and through training, before any step
        assertThatThrownBy(() -> LoraGoldenTest.train("phi3", List.of("lora.target_modules=q_proj")))
                .isInstanceOf(UserError.class).hasMessageContaining("Phi3ForCausalLM has no linear q_proj");
        // with no target_modules (auto), what PEFT targets in the family
        assertThat(LoraSpec.of(lora(), Golden.config("phi3")).modules()).containsExactly("qkv_proj");
        assertThat(LoraSpec.of(lora(), Golden.config("bloom")).modules()).containsExactly("query_key_value");
        assertThat(LoraSpec.of(lora(), Golden.config("gemma3")).modules()).containsExactly("q_proj", "v_proj");
        // a subset trains only those: Phi-3's fused attention product alone
        assertThat(LoraSpec.of(lora("lora.target_modules=down_proj,qkv_proj"), Golden.config("phi3")).modules())
                .containsExactly("qkv_proj", "down_proj");
    }

    /** lora.rank 4 with {@code sets} (none: every other key's default). */
    private static io.fsdp4j.config.LoraSection lora(String... sets) {
        List<String> all = new ArrayList<>(List.of("lora.rank=4", "lora.alpha=8"));
        all.addAll(List.of(sets));
        return TrainConfig.load(null, all).lora();
    }

    private static Path adapterInit(String model) {
        return LoraGoldenTest.fixtureDir(model).resolve("adapter_init");
    }

    private static CausalLM adapted(String model) {
        ModelConfig config = Golden.config(model);
        return CausalLMs.create(config, CpuBackend.INSTANCE, new LoraSpec(4, 2.0,
                LoraSpec.linears(config.architecture())));
    }

    /** The fixture's run, saving a checkpoint after its last step under {@code checkpoints}. */
    private static TrainingJob.Result trainSaving(String model, List<String> layout, Path checkpoints) {
        return LoraGoldenTest.train(model, layout, (job, config) -> {
            try {
                return job.savingCheckpoints(new TrainingJob.CheckpointPlan(checkpoints, 12, 1,
                        Golden.dir(model).toString(), new ObjectMapper().readTree(config.toJson())));
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
    }

    private static float maxAbsDiff(float[] a, float[] b) {
        float max = 0;
        for (int i = 0; i < a.length; i++) {
            max = Math.max(max, Math.abs(a[i] - b[i]));
        }
        return max;
    }

}
