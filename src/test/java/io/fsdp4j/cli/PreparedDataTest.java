package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The pipeline as a user runs it on their own data: {@code prepare} Alpaca data into token files with a held-out
 * split, {@code train} on them (packed or not; the held-out split is evaluated after the last step), then
 * {@code eval} the checkpoint on the same held-out documents (the same loss) and by greedy answers.
 */
class PreparedDataTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    private Path alpaca(int examples) throws IOException {
        try (InputStream in = getClass().getClassLoader().getResourceAsStream("demo/instructions.jsonl")) {
            List<String> lines = new String(in.readAllBytes(), StandardCharsets.UTF_8).lines().limit(examples).toList();
            return Files.write(tmp.resolve("alpaca.jsonl"), lines);
        }
    }

    private static JsonNode last(CommandsEndToEndTest.Run r) throws IOException {
        assertThat(r.status()).as(r.err()).isZero();
        return JSON.readTree(r.out().lines().reduce((a, b) -> b).orElseThrow());
    }

    @Test
    void prepareTrainAndEvaluateTheHeldOutSplit() throws IOException {
        Path tokens = tmp.resolve("tokens"), ck = tmp.resolve("ck");
        JsonNode prepared = last(CommandsEndToEndTest.run("prepare", "--input", alpaca(80).toString(), "--format",
                "alpaca", "--prompt", "compact", "--tokenizer", "bytes", "--out", tokens.toString(),
                "--eval-fraction", "0.25"));
        assertThat(prepared.toString()).contains("80");

        CommandsEndToEndTest.Run trained = CommandsEndToEndTest.run("train", "--set", "data.train=" + tokens,
                "--set", "data.seq_len=64", "--set", "train.steps=2", "--set", "train.batch_size=4",
                "--set", "dist.device=cpu", "--set", "checkpoint.dir=" + ck);
        assertThat(trained.status()).as(trained.err()).isZero();
        Matcher m = Pattern.compile("eval at step 2: loss ([0-9.]+)").matcher(trained.out());
        assertThat(m.find()).as(trained.out()).isTrue();
        double trainingEval = Double.parseDouble(m.group(1));

        JsonNode loss = last(CommandsEndToEndTest.run("eval", "--checkpoint", ck.toString(), "--data",
                tokens.toString(), "--set", "dist.device=cpu"));
        assertThat(loss.get("sequences").intValue()).isEqualTo(20);
        assertThat(loss.get("loss").doubleValue()).isCloseTo(trainingEval, Offset.offset(1e-4));

        JsonNode answers = last(CommandsEndToEndTest.run("eval", "--checkpoint", ck.toString(), "--data",
                tokens.toString(), "--task", "answers", "--max-new-tokens", "6", "--limit", "10", "--verbose", "--set",
                "dist.device=cpu"));
        assertThat(answers.get("examples").intValue()).isEqualTo(10);
        assertThat(answers.get("exact_match").doubleValue()).isBetween(0.0, 100.0);

        CommandsEndToEndTest.Run packed = CommandsEndToEndTest.run("train", "--set", "data.train=" + tokens,
                "--set", "data.seq_len=128", "--set", "data.pack=true", "--set", "train.steps=1",
                "--set", "train.batch_size=2", "--set", "dist.device=cpu");
        assertThat(packed.status()).as(packed.err()).isZero();
        assertThat(packed.out()).contains("packed sequences of 128 tokens");

        CommandsEndToEndTest.run("eval", "--checkpoint", ck.toString(), "--data", tokens.toString(), "--split", "x")
                .failsWith("--split must be eval, train or all");
        // raw Alpaca is answered too, read as training reads it (the checkpoint's byte tokenizer; the default prompt)
        JsonNode raw = last(CommandsEndToEndTest.run("eval", "--checkpoint", ck.toString(), "--data",
                alpaca(3).toString(), "--task", "answers", "--max-new-tokens", "4", "--set", "dist.device=cpu"));
        assertThat(raw.get("examples").intValue()).isEqualTo(3);
    }
}
