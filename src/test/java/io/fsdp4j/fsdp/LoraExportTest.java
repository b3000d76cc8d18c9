package io.fsdp4j.fsdp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.checkpoint.HfExport;
import io.fsdp4j.checkpoint.PeftAdapter;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.eval.Evaluation;
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
import io.fsdp4j.train.HeldOutLoss;
import io.fsdp4j.train.TrainingJob;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * LoRA's outputs against PEFT's (the fixture of tools/golden/make_golden_lora.py): the logits of the adapted model
 * from PEFT's final adapter and PEFT's merge_and_unload of it; checkpoints that hold the adapters only and resume
 * exactly; the export as a PEFT adapter (PEFT's names and config) and, with merge, as the merged model.
 */
class LoraExportTest {
    private static final ModelConfig CONFIG = Golden.config("qwen2");
    private static final LoraSpec SPEC = new LoraSpec(4, 2.0, LoraSpec.linears(CONFIG.architecture()));

    @TempDir
    Path tmp;

    @Test
    void logitsFromPeftsAdapterEqualPefts() {
        CausalLM model = CausalLMs.create(CONFIG, CpuBackend.INSTANCE, SPEC);
        Path adapter = LoraGoldenTest.FIXTURE.resolve("final.safetensors");
        List<Tensor> params = LoraGoldenTest.adaptedUnits("qwen2", model, adapter).stream()
                .map(v -> CpuBackend.INSTANCE.upload(v, v.length)).toList();
        int[][] ids = Arrays.copyOf(Golden.intRows(LoraGoldenTest.fixture().get("input_ids")), 4);
        Tensor logits = new SingleDeviceModel(model, CpuBackend.INSTANCE, params)
                .logits(TokenBatch.of(CpuBackend.INSTANCE, ids, ids));
        try (SafetensorsFile expected = SafetensorsFile.open(LoraGoldenTest.FIXTURE.resolve("logits.safetensors"))) {
            LoraGoldenTest.assertClose(CpuBackend.INSTANCE.toFloats(logits), expected.readFloats("logits"), 1e-5, "logits");
        }
        // and without the adapters the logits are not those: the adapters are in the forward
        List<Tensor> baseOnly = new ArrayList<>(params);
        CausalLM plain = CausalLMs.create(CONFIG, CpuBackend.INSTANCE);
        for (int u = 1; u <= 2; u++) {
            baseOnly.set(u, params.get(u).view(0, Math.toIntExact(plain.units().get(u).numel())));
        }
        float[] withoutAdapters = CpuBackend.INSTANCE.toFloats(new SingleDeviceModel(plain, CpuBackend.INSTANCE,
                baseOnly).logits(TokenBatch.of(CpuBackend.INSTANCE, ids, ids)));
        assertThat(withoutAdapters).isNotEqualTo(CpuBackend.INSTANCE.toFloats(logits));
    }

    /** An adapter of another rank or other targets is refused in one line naming the file and what to check. */
    @Test
    void anAdapterOfAnotherShapeIsRefusedInOneLine() {
        CausalLM rank8 = CausalLMs.create(CONFIG, CpuBackend.INSTANCE, new LoraSpec(8, 2.0, LoraSpec.linears(CONFIG.architecture())));
        Path file = LoraGoldenTest.FIXTURE.resolve("adapter_init");
        assertThatThrownBy(() -> PeftAdapter.open(file, FsdpModel.trainableLayouts(rank8)))
                .isInstanceOf(io.fsdp4j.UserError.class)
                .hasMessageContaining("lora.init: " + file.resolve(PeftAdapter.WEIGHTS))
                .hasMessageContaining("has shape [4, 32], this model's is [8, 32] (check lora.rank)")
                .hasMessageNotContaining("\n");
        assertThatThrownBy(() -> PeftAdapter.open(tmp.resolve("none"), FsdpModel.trainableLayouts(rank8)))
                .isInstanceOf(io.fsdp4j.UserError.class).hasMessageContaining("does not exist");
    }

    @Test
    void mergeEqualsPeftsMergeAndUnload() {
        CausalLM model = CausalLMs.create(CONFIG, CpuBackend.INSTANCE, SPEC);
        List<UnitLayout> base = CausalLMs.layout(CONFIG);
        List<float[]> merged = SPEC.merge(model.units(),
                LoraGoldenTest.adaptedUnits("qwen2", model, LoraGoldenTest.FIXTURE.resolve("final.safetensors")), base);
        try (SafetensorsFile expected = SafetensorsFile.open(LoraGoldenTest.FIXTURE.resolve("merged.safetensors"))) {
            for (int u = 0; u < base.size(); u++) {
                for (ParamSpec p : base.get(u).params()) {
                    LoraGoldenTest.assertClose(Arrays.copyOfRange(merged.get(u), (int) p.offset(), (int) p.end()),
                            expected.readFloats(p.name()), 1e-6, p.name());
                }
            }
        }
    }

    private TrainingJob run(List<String> extra, Path checkpoints, SavedCheckpoint resume) throws Exception {
        JsonNode t = LoraGoldenTest.fixture();
        List<Sequence> data = Golden.sequences(t);
        List<String> sets = new ArrayList<>(List.of("train.steps=12", "data.seq_len=16", "optim.lr=0.01",
                "optim.max_grad_norm=0.5", "lora.rank=4", "lora.alpha=8", "lora.target_modules=all-linear",
                "lora.init=" + LoraGoldenTest.FIXTURE.resolve("adapter_init")));
        sets.addAll(extra);
        TrainConfig config = TrainConfig.load(null, sets);
        HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(CONFIG));
        TrainingJob run = new TrainingJob(config, CONFIG, weights, data, false).savingCheckpoints(
                new TrainingJob.CheckpointPlan(checkpoints, 6, 4, Golden.dir("qwen2").toString(),
                        new ObjectMapper().readTree(config.toJson())));
        return resume != null ? run.resumingFrom(resume) : run;
    }

    @Test
    void checkpointsHoldTheAdaptersResumeExactlyAndExportAsPeftAndMerged() throws Exception {
        List<String> layout = LoraGoldenTest.layout("full_shard", 2, 0);
        TrainingJob.Result straight = run(layout, tmp.resolve("a"), null).run(null, true);
        Path step6 = tmp.resolve("a").resolve("step-00000006");
        try (SavedCheckpoint saved = SavedCheckpoint.open(step6)) {
            assertThat(saved.index().units()).extracting(u -> u.name()).containsExactly("block.0.lora", "block.1.lora");
            assertThat(saved.index().modelPath()).isEqualTo(Golden.dir("qwen2").toString());
            // resumed on another layout (the shards cut anew), the same steps 7..12 (to rounding)
            TrainingJob.Result resumed = run(LoraGoldenTest.layout("shard_grad_op", 4, 0), tmp.resolve("b"), saved)
                    .run(null, true);
            assertThat(resumed.steps()).hasSize(6);
            for (int i = 0; i < 6; i++) {
                assertThat(resumed.steps().get(i).loss()).as("loss at step %d", 7 + i)
                        .isCloseTo(straight.steps().get(6 + i).loss(), within(1e-6));
            }
        }
        // the export of the last checkpoint: a PEFT adapter with the final adapters
        Path adapter = HfExport.export(tmp.resolve("a").resolve("step-00000012"), tmp.resolve("adapter"),
                HfExport.Options.defaults());
        JsonNode config = new ObjectMapper().readTree(Files.readString(adapter.resolve(PeftAdapter.CONFIG)));
        assertThat(config.get("peft_type").asText()).isEqualTo("LORA");
        assertThat(config.get("r").asInt()).isEqualTo(4);
        assertThat(config.get("lora_alpha").asDouble()).isEqualTo(8.0);
        assertThat(config.get("base_model_name_or_path").asText()).isEqualTo(Golden.dir("qwen2").toString());
        CausalLM model = CausalLMs.create(CONFIG, CpuBackend.INSTANCE, SPEC);
        try (SafetensorsFile file = SafetensorsFile.open(adapter.resolve(PeftAdapter.WEIGHTS))) {
            assertThat(file.names()).hasSize(28).contains("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight");
            for (int u = 1; u <= 2; u++) {
                for (ParamSpec p : model.units().get(u).params()) {
                    if (p.name().contains(".lora_")) {
                        assertThat(file.readFloats(PeftAdapter.PREFIX + p.name())).as(p.name()).containsExactly(
                                Arrays.copyOfRange(straight.finalParams().get(u), (int) p.offset(), (int) p.end()));
                    }
                }
            }
        }
        // and merged: the base with the adapters merged, as the merge of the final parameters
        Path merged = HfExport.export(tmp.resolve("a").resolve("step-00000012"), tmp.resolve("merged"),
                HfExport.Options.defaults().withMerge(true));
        List<UnitLayout> base = CausalLMs.layout(CONFIG);
        List<float[]> want = SPEC.merge(model.units(), straight.finalParams(), base);
        try (SafetensorsFile file = SafetensorsFile.open(merged.resolve(HfExport.SINGLE_FILE))) {
            for (int u = 0; u < base.size(); u++) {
                for (ParamSpec p : base.get(u).params()) {
                    LoraGoldenTest.assertClose(file.readFloats(p.name()), Arrays.copyOfRange(want.get(u), (int) p.offset(),
                            (int) p.end()), 1e-6, p.name());
                }
            }
        }
        assertThat(merged.resolve("config.json")).exists();
    }

    /**
     * Evaluation during a LoRA run goes through the sharded units with the adapters applied (no merge, no whole model
     * on rank 0): the held-out loss before training is the adapted model's, after the last step the merged final
     * weights', neither the base's.
     */
    @Test
    void heldOutLossDuringTrainingIsTheAdaptedModels() throws Exception {
        JsonNode t = LoraGoldenTest.fixture();
        int[][] ids = Golden.intRows(t.get("input_ids")), labels = Golden.intRows(t.get("labels"));
        List<Sequence> heldOut = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            heldOut.add(new Sequence(ids[i], labels[i]));
        }
        Map<Integer, Double> losses = new ConcurrentHashMap<>();
        TrainingJob.Result result = run(LoraGoldenTest.layout("full_shard", 2, 0), tmp.resolve("eval"), null)
                .evaluating(new HeldOutLoss(heldOut, 0, (step, r) -> losses.put(step, r.loss())))
                .run(null, true);
        assertThat(losses).containsOnlyKeys(0, 12);
        CausalLM plain = CausalLMs.create(CONFIG, CpuBackend.INSTANCE);
        List<float[]> merged = SPEC.merge(CausalLMs.create(CONFIG, CpuBackend.INSTANCE, SPEC).units(),
                result.finalParams(), CausalLMs.layout(CONFIG));
        List<float[]> base;
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(CONFIG))) {
            base = wholeUnits(weights, CausalLMs.layout(CONFIG));
        }
        double mergedLoss = wholeLoss(plain, merged, heldOut), baseLoss = wholeLoss(plain, base, heldOut);
        assertThat(losses.get(12)).isCloseTo(mergedLoss, within(1e-5 * mergedLoss));
        // before training: the base with lora.init's adapters (the fixture's B is not zero), computed unmerged
        CausalLM adapted = CausalLMs.create(CONFIG, CpuBackend.INSTANCE, SPEC);
        double initLoss = wholeLoss(adapted,
                LoraGoldenTest.adaptedUnits("qwen2", adapted, LoraGoldenTest.FIXTURE.resolve("adapter_init")),
                heldOut);
        assertThat(losses.get(0)).isCloseTo(initLoss, within(1e-5 * initLoss));
        assertThat(Math.abs(mergedLoss - baseLoss)).isGreaterThan(1e-3); // the adapters count
        assertThat(Math.abs(initLoss - baseLoss)).isGreaterThan(1e-3);
    }

    private static List<float[]> wholeUnits(io.fsdp4j.model.ParamSource source, List<UnitLayout> layout) {
        List<float[]> units = new ArrayList<>();
        for (int u = 0; u < layout.size(); u++) {
            float[] values = new float[Math.toIntExact(layout.get(u).numel())];
            source.read(u, 0, values, 0, values.length);
            units.add(values);
        }
        return units;
    }

    private static double wholeLoss(CausalLM model, List<float[]> units, List<Sequence> data) {
        List<Tensor> params = units.stream().map(v -> CpuBackend.INSTANCE.upload(v, v.length)).toList();
        return Evaluation.loss(new SingleDeviceModel(model, CpuBackend.INSTANCE, params), CpuBackend.INSTANCE, data)
                .loss();
    }
}
