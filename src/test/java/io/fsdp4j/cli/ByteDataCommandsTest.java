package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A byte-vocabulary model (the tiny preset) as a user drives it: trained on an Alpaca JSON file and evaluated on a
 * SQuAD JSON file given directly (no 'prepare'), then its checkpoint and export used with {@code --tokenizer bytes}
 * by {@code tokenize} and {@code eval}; a missing tokenizer is an error that names {@code bytes}.
 */
class ByteDataCommandsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String SQUAD = """
            {"version": "1.1", "data": [{"title": "T", "paragraphs": [
              {"context": "Paris is in France.", "qas": [
                {"id": "q1", "question": "Where is Paris?", "answers": [{"answer_start": 12, "text": "France"}]}]},
              {"context": "The sky is blue.", "qas": [
                {"id": "q2", "question": "What colour is the sky?", "answers": [{"answer_start": 11, "text": "blue"}]}]}
            ]}]}
            """;

    @TempDir
    Path tmp;

    private static JsonNode last(CommandsEndToEndTest.Run r) throws IOException {
        assertThat(r.status()).as(r.err()).isZero();
        return JSON.readTree(r.out().lines().reduce((a, b) -> b).orElseThrow());
    }

    @Test
    void alpacaAndSquadFilesTrainDirectlyAndBytesIsATokenizerEverywhere() throws IOException {
        StringBuilder list = new StringBuilder("[\n");
        for (int i = 0; i < 8; i++) {
            list.append(i == 0 ? "" : ",\n").append("{\"instruction\": \"Echo the number.\", \"input\": \"")
                    .append(i).append("\", \"output\": \"").append(i).append("\"}");
        }
        Path alpaca = Files.writeString(tmp.resolve("alpaca.json"), list.append("\n]\n"));
        Path squad = Files.writeString(tmp.resolve("squad.json"), SQUAD);
        Path ck = tmp.resolve("ck"), export = tmp.resolve("export");

        CommandsEndToEndTest.Run trained = CommandsEndToEndTest.run("train", "--set", "data.train=" + alpaca,
                "--set", "data.eval=" + squad, "--set", "data.seq_len=256", "--set", "train.steps=1",
                "--set", "train.batch_size=2", "--set", "dist.ranks=1", "--set", "dist.device=cpu",
                "--set", "checkpoint.dir=" + ck);
        assertThat(trained.status()).as(trained.err()).isZero();
        assertThat(trained.out()).contains("eval at step 1: loss");
        assertThat(CommandsEndToEndTest.run("export", "--checkpoint", ck.toString(), "--out", export.toString())
                .status()).isZero();

        Path text = Files.writeString(tmp.resolve("in.txt"), "hi\né\n");
        CommandsEndToEndTest.Run tokens = CommandsEndToEndTest.run("tokenize", "--tokenizer", "bytes", "--input",
                text.toString());
        assertThat(tokens.status()).as(tokens.err()).isZero();
        assertThat(tokens.out()).isEqualTo("[104,105]\n[195,169]\n");
        CommandsEndToEndTest.run("tokenize", "--tokenizer", export.toString(), "--input", text.toString())
                .failsWith("model directory " + export + " has no tokenizer.json", "vocabulary of 256 tokens",
                        "pass --tokenizer bytes");
        CommandsEndToEndTest.run("tokenize", "--tokenizer", tmp.toString(), "--input", text.toString())
                .failsWith("has no tokenizer.json", "--tokenizer bytes for a model trained on the byte tokenizer");
        CommandsEndToEndTest.run("tokenize", "--tokenizer", tmp.resolve("nope").toString(), "--input", text.toString())
                .failsWith("tokenizer " + tmp.resolve("nope") + " does not exist", "or 'bytes'");

        for (String[] model : new String[][] {{"--model", export.toString()}, {"--checkpoint", ck.toString()}}) {
            JsonNode scores = last(CommandsEndToEndTest.run("eval", model[0], model[1], "--task", "squad", "--data",
                    squad.toString(), "--tokenizer", "bytes", "--max-new-tokens", "3"));
            assertThat(scores.get("questions").intValue()).isEqualTo(2);
            assertThat(scores.get("f1").doubleValue()).isBetween(0.0, 100.0);
            CommandsEndToEndTest.run("eval", model[0], model[1], "--task", "squad", "--data", squad.toString())
                    .failsWith("--tokenizer bytes");
        }
    }
}
