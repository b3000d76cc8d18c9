package io.fsdp4j.fsdp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.checkpoint.HfExport;
import io.fsdp4j.checkpoint.PeftAdapter;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.tensor.Nf4;
import io.fsdp4j.train.TrainingJob;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A QLoRA run's checkpoints: the adapters and their optimizer state as LoRA's, the base model and lora.quantize
 * named; resumed on another layout the same steps; evaluated on the NF4 round trip of the base; exported as PEFT's adapter (adapter_config.json as a LoRA run's,
 * PEFT records the quantization in the model card only) and, merged, into the NF4 round trip of the base: PEFT's
 * merge on the fixture's dequantized base.
 */
class QloraExportTest {
    private static final LoraSpec SPEC = new LoraSpec(4, 2.0, LoraSpec.linears(QloraGoldenTest.CONFIG.architecture()));

    @TempDir
    Path tmp;

    private TrainingJob run(List<String> extra, Path checkpoints, SavedCheckpoint resume) throws Exception {
        List<String> sets = new ArrayList<>(QloraGoldenTest.settings());
        sets.addAll(extra);
        TrainConfig config = TrainConfig.load(null, sets);
        HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(QloraGoldenTest.CONFIG));
        TrainingJob job = new TrainingJob(config, QloraGoldenTest.CONFIG, weights,
                Golden.sequences(QloraGoldenTest.fixture()), false).savingCheckpoints(new TrainingJob.CheckpointPlan(
                checkpoints, 6, 4, Golden.dir("qwen2").toString(), new ObjectMapper().readTree(config.toJson())));
        return resume != null ? job.resumingFrom(resume) : job;
    }

    @Test
    void checkpointsResumeAndExportAsPeftAndMergedIntoTheDequantizedBase() throws Exception {
        TrainingJob.Result straight = run(LoraGoldenTest.layout("full_shard", 2, 0), tmp.resolve("a"), null)
                .run(null, true);
        try (SavedCheckpoint saved = SavedCheckpoint.open(tmp.resolve("a").resolve("step-00000006"))) {
            assertThat(saved.index().units()).extracting(u -> u.name()).containsExactly("block.0.lora", "block.1.lora");
            assertThat(saved.index().modelPath()).isEqualTo(Golden.dir("qwen2").toString());
            assertThat(saved.index().config().path("lora").path("quantize").asText()).isEqualTo("nf4");
            TrainingJob.Result resumed = run(LoraGoldenTest.layout("hybrid_shard", 4, 2), tmp.resolve("b"), saved)
                    .run(null, true);
            assertThat(resumed.steps()).hasSize(6);
            for (int i = 0; i < 6; i++) {
                assertThat(resumed.steps().get(i).loss()).as("loss at step %d", 7 + i)
                        .isCloseTo(straight.steps().get(6 + i).loss(), within(1e-6));
            }
        }
        Path last = tmp.resolve("a").resolve("step-00000012");
        // evaluated (eval, score --checkpoint): the adapters on the NF4 round trip of the base, as PEFT's final
        // adapters on its dequantized base give the fixture's logits
        int[][] ids = Arrays.copyOf(Golden.intRows(QloraGoldenTest.fixture().get("input_ids")), 4);
        float[] logits = CpuBackend.INSTANCE.toFloats(EvalModel.fromCheckpoint(last).load()
                .logits(TokenBatch.of(CpuBackend.INSTANCE, ids, ids)));
        try (SafetensorsFile pefts = SafetensorsFile.open(QloraGoldenTest.FIXTURE.resolve("logits.safetensors"))) {
            LoraGoldenTest.assertClose(logits, pefts.readFloats("logits"), 1e-4, "logits");
        }
        Path adapter = HfExport.export(last, tmp.resolve("adapter"), HfExport.Options.defaults());
        JsonNode config = new ObjectMapper().readTree(Files.readString(adapter.resolve(PeftAdapter.CONFIG)));
        JsonNode peft = new ObjectMapper().readTree(Files.readString(
                QloraGoldenTest.FIXTURE.resolve("adapter_init").resolve(PeftAdapter.CONFIG)));
        for (String key : List.of("peft_type", "task_type", "r", "lora_alpha", "lora_dropout", "use_rslora", "bias",
                "fan_in_fan_out")) {
            assertThat(config.get(key)).as(key).isEqualTo(peft.get(key));
        }
        assertThat(config.has("quantization_config")).isFalse(); // PEFT keeps it out of adapter_config.json
        assertThat(Files.readString(adapter.resolve(PeftAdapter.CARD)))
                .contains("The following `bitsandbytes` quantization config was used during training:")
                .contains("- bnb_4bit_quant_type: nf4").contains("- bnb_4bit_compute_dtype: float32");
        CausalLM model = CausalLMs.create(QloraGoldenTest.CONFIG, CpuBackend.INSTANCE, SPEC);
        try (SafetensorsFile file = SafetensorsFile.open(adapter.resolve(PeftAdapter.WEIGHTS))) {
            assertThat(file.names()).hasSize(28);
            for (ParamSpec p : model.units().get(1).params()) {
                if (p.name().contains(".lora_")) {
                    assertThat(file.readFloats(PeftAdapter.PREFIX + p.name())).as(p.name()).containsExactly(
                            Arrays.copyOfRange(straight.finalParams().get(1), (int) p.offset(), (int) p.end()));
                }
            }
        }
        // merged: the final parameters (the base as the run held it: the NF4 round trip) merged, and near PEFT's
        // merge of its own final adapters into the dequantized base
        Path merged = HfExport.export(last, tmp.resolve("merged"), HfExport.Options.defaults().withMerge(true));
        List<UnitLayout> base = CausalLMs.layout(QloraGoldenTest.CONFIG);
        List<float[]> want = SPEC.merge(model.units(), straight.finalParams(), base);
        try (SafetensorsFile file = SafetensorsFile.open(merged.resolve(HfExport.SINGLE_FILE));
             SafetensorsFile pefts = SafetensorsFile.open(QloraGoldenTest.FIXTURE.resolve("merged.safetensors"));
             HfCheckpoint original = HfCheckpoint.open(Golden.dir("qwen2"), base)) {
            for (int u = 0; u < base.size(); u++) {
                for (ParamSpec p : base.get(u).params()) {
                    float[] got = file.readFloats(p.name());
                    LoraGoldenTest.assertClose(got, Arrays.copyOfRange(want.get(u), (int) p.offset(), (int) p.end()),
                            1e-6, p.name());
                    LoraGoldenTest.assertClose(got, pefts.readFloats(p.name()), 1e-4, p.name() + " (PEFT's)");
                    if (u >= 1 && u <= 2 && p.kind() == ParamSpec.Kind.MATRIX) { // not merged into the unquantized
                        float[] plain = new float[got.length];
                        original.read(u, p.offset(), plain, 0, plain.length);
                        float[] trip = Nf4.roundTrip(plain);
                        double apart = 0;
                        for (int i = 0; i < got.length; i++) {
                            apart = Math.max(apart, Math.abs(trip[i] - plain[i]));
                        }
                        assertThat(apart).as("%s: NF4 moved the base", p.name()).isGreaterThan(1e-4);
                    }
                }
            }
        }
    }
}
