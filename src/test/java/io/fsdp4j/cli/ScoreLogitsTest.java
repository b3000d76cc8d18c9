package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.safetensors.SafetensorsFile;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code fsdp4j score --logits-out}: the logits that tools/golden/check_export.py compares with transformers' on the
 * GPU machine. Here, on the CPU: they equal the golden logits transformers computed for the same model, and an
 * export's logits equal those of the checkpoint it was written from.
 */
class ScoreLogitsTest {
    @TempDir
    Path tmp;

    private static float[] logits(Path file) {
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            return f.readFloats("logits");
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"qwen2", "llama", "mistral"})
    void theLogitsAreThoseOfTransformers(String model) throws IOException {
        Path out = tmp.resolve("logits.safetensors");
        var r = CommandsEndToEndTest.run("score", "--model", Golden.dir(model).toString(), "--data",
                Golden.jsonl(model, "batch.json", false, tmp).toString(), "--logits-out", out.toString());
        assertThat(r.status()).as(r.err()).isZero();
        try (SafetensorsFile f = SafetensorsFile.open(out);
             SafetensorsFile expected = SafetensorsFile.open(Golden.dir(model).resolve("expected.safetensors"))) {
            assertThat(f.info("logits").shape()).containsExactly(4, 16, 160);
            assertThat(Golden.relativeError(f.readFloats("logits"), expected.readFloats("logits"))).isLessThan(1e-5);
        }
    }

    @Test
    void anExportHasTheLogitsOfItsCheckpoint() throws IOException {
        Path ck = tmp.resolve("ck"), data = Golden.jsonl("qwen2", "batch.json", false, tmp);
        var trained = CommandsEndToEndTest.run("train", "--set", "model.path=" + Golden.dir("qwen2"), "--set",
                "data.train=" + data, "--set", "data.seq_len=16", "--set", "train.batch_size=2", "--set",
                "dist.ranks=2", "--set", "dist.device=cpu", "--set", "train.steps=2", "--set", "checkpoint.dir=" + ck);
        assertThat(trained.status()).as(trained.err()).isZero();
        Path export = tmp.resolve("export");
        assertThat(CommandsEndToEndTest.run("export", "--checkpoint", ck.toString(), "--out", export.toString())
                .status()).isZero();
        Path out = tmp.resolve("logits.safetensors");
        assertThat(CommandsEndToEndTest.run("score", "--model", export.toString(), "--data", data.toString(),
                "--logits-out", out.toString()).status()).isZero();

        SingleDeviceModel fromCheckpoint = EvalModel.fromCheckpoint(ck).load();
        int[][] ids = Golden.intRows(Golden.json("qwen2", "batch.json").get("input_ids"));
        float[] expected = CpuBackend.INSTANCE.toFloats(fromCheckpoint.logits(TokenBatch.of(CpuBackend.INSTANCE, ids,
                ids)));
        assertThat(logits(out)).isEqualTo(expected);
        float[] original = logits(tmp.resolve("original.safetensors"), data);
        assertThat(logits(out)).isNotEqualTo(original); // the export holds the trained weights
    }

    private float[] logits(Path out, Path data) {
        CommandsEndToEndTest.run("score", "--model", Golden.dir("qwen2").toString(), "--data", data.toString(),
                "--logits-out", out.toString());
        return logits(out);
    }

    @Test
    void sequencesOfDifferentLengthsAreRefused() throws IOException {
        Path data = Files.write(tmp.resolve("mixed.jsonl"), List.of("{\"input_ids\":[1,2,3]}", "{\"input_ids\":[1,2]}"));
        CommandsEndToEndTest.run("score", "--model", Golden.dir("qwen2").toString(), "--data", data.toString(),
                "--logits-out", tmp.resolve("l.safetensors").toString()).failsWith("one length");
    }
}
