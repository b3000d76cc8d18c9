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
        // the export carries a tokenizer.json (byte-level BPE, no merges) that encodes as the byte tokenizer does
        CommandsEndToEndTest.Run exported = CommandsEndToEndTest.run("tokenize", "--tokenizer", export.toString(),
                "--input", text.toString());
        assertThat(exported.status()).as(exported.err()).isZero();
        assertThat(exported.out()).isEqualTo(tokens.out());
        Path every = Files.write(tmp.resolve("bytes.txt"), everyByteButNulAndNewline());
        assertThat(CommandsEndToEndTest.run("tokenize", "--tokenizer", export.toString(), "--input", every.toString())
                .out()).isEqualTo(CommandsEndToEndTest.run("tokenize", "--tokenizer", "bytes", "--input",
                        every.toString()).out());
        assertThat(JSON.readTree(export.resolve("generation_config.json").toFile()).get("eos_token_id").intValue())
                .isZero();
        assertThat(JSON.readTree(export.resolve("config.json").toFile()).get("eos_token_id").intValue()).isZero();
        CommandsEndToEndTest.run("tokenize", "--tokenizer", tmp.toString(), "--input", text.toString())
                .failsWith("has no tokenizer.json", "--tokenizer bytes for a model trained on the byte tokenizer");
        CommandsEndToEndTest.run("tokenize", "--tokenizer", tmp.resolve("nope").toString(), "--input", text.toString())
                .failsWith("tokenizer " + tmp.resolve("nope") + " does not exist", "or 'bytes'");

        for (String[] model : new String[][] {{"--model", export.toString()}, {"--checkpoint", ck.toString()}}) {
            JsonNode scores = last(CommandsEndToEndTest.run("eval", model[0], model[1], "--task", "squad", "--data",
                    squad.toString(), "--tokenizer", "bytes", "--max-new-tokens", "3"));
            assertThat(scores.get("questions").intValue()).isEqualTo(2);
            assertThat(scores.get("f1").doubleValue()).isBetween(0.0, 100.0);
            CommandsEndToEndTest.Run own = CommandsEndToEndTest.run("eval", model[0], model[1], "--task", "squad",
                    "--data", squad.toString(), "--max-new-tokens", "3");
            if (model[0].equals("--model")) { // the export's own tokenizer.json: the same ids, the same scores
                assertThat(last(own)).isEqualTo(scores);
            } else {
                own.failsWith("--tokenizer bytes");
            }
        }
    }

    /** Valid UTF-8 text holding every byte value but NUL (EOS) and newline (a line end to tokenize): ASCII, then
     *  every two-, three- and four-byte lead with continuation bytes 0x80..0xBF among them. */
    private static byte[] everyByteButNulAndNewline() {
        var text = new StringBuilder();
        for (int c = 1; c < 0x80; c++) {
            if (c != '\n' && c != '\r') {
                text.append((char) c);
            }
        }
        for (int c = 0x80; c < 0x800; c += 7) { // two-byte leads C2..DF, continuations
            text.append((char) c);
        }
        for (int c = 0x800; c < 0xD800; c += 61) { // three-byte leads E0..ED
            text.append((char) c);
        }
        for (int c = 0xE000; c < 0x10000; c += 61) { // E E..EF
            text.append((char) c);
        }
        for (int c = 0x10000; c < 0x110000; c += 4093) { // four-byte leads F0..F4
            text.appendCodePoint(c);
        }
        return (text + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }
}
