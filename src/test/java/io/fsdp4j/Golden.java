package io.fsdp4j;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.hf.HfConfig;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.Tensor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The Hugging Face golden fixtures of {@code src/test/resources/golden/} (made by tools/golden/make_golden.py):
 * a tiny model per architecture, a batch, its logits, losses and gradients, and a 10-step AdamW trajectory.
 * A missing fixture fails the test that asks for it; nothing is skipped.
 */
public final class Golden {
    public static final List<String> MODELS = List.of("qwen2", "llama", "mistral");

    /**
     * Fixtures of tools/golden/make_golden_arch.py: BLOOM, Llama with llama3 and linear rope scaling, Qwen3, Gemma 3, Gemma 2
     * (soft-capped scores and logits) and Phi-3. Kept
     * apart from {@link #MODELS} until every user of MODELS builds its model through {@code CausalLMs}.
     */
    public static final List<String> ARCH_MODELS = List.of("bloom", "llama3-rope", "llama-linear-rope", "qwen3",
            "gemma3", "gemma2", "phi3");

    private Golden() {}

    public static Path dir(String name) {
        try {
            var url = Golden.class.getResource("/golden/" + name + "/config.json");
            if (url == null) {
                throw new IllegalStateException("golden fixture '" + name + "' is missing from test resources");
            }
            return Path.of(url.toURI()).getParent();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    public static JsonNode json(String name, String file) {
        try {
            return new ObjectMapper().readTree(Files.readString(dir(name).resolve(file)));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A fixture's sequences: its input_ids rows with their labels rows (a list the caller may extend). */
    public static List<io.fsdp4j.data.Sequence> sequences(JsonNode fixture) {
        int[][] ids = intRows(fixture.get("input_ids")), labels = intRows(fixture.get("labels"));
        List<io.fsdp4j.data.Sequence> result = new ArrayList<>();
        for (int i = 0; i < ids.length; i++) {
            result.add(new io.fsdp4j.data.Sequence(ids[i], labels[i]));
        }
        return result;
    }

    /** A training fixture's steps, length, AdamW and schedule as config settings ({@code key=value}). */
    public static List<String> trainingSettings(JsonNode t) {
        JsonNode s = t.get("schedule");
        return List.of(
                "train.steps=" + t.get("steps").intValue(),
                "data.seq_len=" + t.get("seq_len").intValue(),
                "optim.lr=" + t.get("lr").doubleValue(),
                "optim.betas=" + t.get("betas").get(0).doubleValue() + "," + t.get("betas").get(1).doubleValue(),
                "optim.eps=" + t.get("eps").doubleValue(),
                "optim.weight_decay=" + t.get("weight_decay").doubleValue(),
                "optim.decay=" + t.get("decay").asText(),
                "optim.max_grad_norm=" + t.get("max_grad_norm").doubleValue(),
                "schedule.kind=" + s.get("kind").asText(),
                "schedule.warmup_steps=" + s.get("warmup_steps").intValue(),
                "schedule.min_lr_ratio=" + s.get("min_lr_ratio").doubleValue());
    }

    public static int[][] intRows(JsonNode rows) {
        int[][] result = new int[rows.size()][];
        for (int i = 0; i < result.length; i++) {
            JsonNode row = rows.get(i);
            result[i] = new int[row.size()];
            for (int j = 0; j < row.size(); j++) {
                result[i][j] = row.get(j).intValue();
            }
        }
        return result;
    }

    public static ModelConfig config(String name) {
        return HfConfig.read(dir(name));
    }

    /** The golden model with every unit whole, on the CPU backend. */
    public static SingleDeviceModel load(String name) {
        ModelConfig config = config(name);
        CausalLM model = CausalLMs.create(config, CpuBackend.INSTANCE);
        try (HfCheckpoint weights = HfCheckpoint.open(dir(name), model.units())) {
            return new SingleDeviceModel(model, CpuBackend.INSTANCE, fullUnits(model.units(), weights));
        }
    }

    public static List<Tensor> fullUnits(List<UnitLayout> units, ParamSource source) {
        List<Tensor> params = new ArrayList<>();
        for (int u = 0; u < units.size(); u++) {
            float[] values = new float[Math.toIntExact(units.get(u).numel())];
            source.read(u, 0, values, 0, values.length);
            params.add(CpuBackend.INSTANCE.upload(values, values.length));
        }
        return params;
    }

    /** max |a - b| / max |b|: the error relative to the tensor's scale. */
    public static double relativeError(float[] actual, float[] expected) {
        if (actual.length != expected.length) {
            throw new AssertionError("length " + actual.length + " != " + expected.length);
        }
        double maxDiff = 0, maxRef = 0;
        for (int i = 0; i < actual.length; i++) {
            maxDiff = Math.max(maxDiff, Math.abs((double) actual[i] - expected[i]));
            maxRef = Math.max(maxRef, Math.abs(expected[i]));
        }
        return maxDiff / Math.max(maxRef, 1e-30);
    }

    /**
     * The sequences of a golden JSON file ({@code batch.json}, {@code train.json}) as pre-tokenized JSONL in
     * {@code dir}: {@code {"input_ids": [...], "labels": [...]}} a line ({@code labels} only with them).
     */
    public static Path jsonl(String name, String file, boolean withLabels, Path dir) {
        JsonNode rows = json(name, file);
        var mapper = new ObjectMapper();
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < rows.get("input_ids").size(); i++) {
            var line = mapper.createObjectNode();
            line.set("input_ids", rows.get("input_ids").get(i));
            if (withLabels) {
                line.set("labels", rows.get("labels").get(i));
            }
            lines.add(line.toString());
        }
        try {
            return Files.write(dir.resolve(name + "-" + file.replace(".json", "") + ".jsonl"), lines);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
