package io.fsdp4j.tokenizer;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.cli.Main;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code fsdp4j tokenize} as a user runs it, in-process. */
class TokenizeCommandTest {
    @TempDir
    Path tmp;

    record Run(int status, String out, String err) {}

    static Run run(String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int status;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            status = Main.execute(args, o, e, false);
        }
        return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void oneArrayPerLine() throws IOException {
        Path input = Files.writeString(tmp.resolve("in.txt"), "Hello, world!\n\n你好\n");
        Run r = run("tokenize", "--tokenizer", TestTokenizers.modelDir("qwen3").toString(), "--input", input.toString());
        assertThat(r.err()).isEmpty();
        assertThat(r.status()).isZero();
        assertThat(r.out().lines().toList()).containsExactly("[9707,11,1879,0]", "[]", "[108386]");
    }

    @Test
    void linesEndAtNewlineAndDropTheCrOfCrLf() throws IOException {
        Tokenizer qwen = TestTokenizers.tokenizer("qwen3");
        Path input = Files.writeString(tmp.resolve("in.txt"), "Hello, world!\r\nx\ry");
        Run r = run("tokenize", "--tokenizer", TestTokenizers.modelDir("qwen3").toString(), "--input", input.toString());
        assertThat(r.out().lines().toList()).containsExactly("[9707,11,1879,0]",
                java.util.Arrays.toString(qwen.encode("x\ry", false)).replace(" ", ""));
    }

    @Test
    void aByteOrderMarkAtTheStartOfTheInputIsNotText() throws IOException {
        Path input = Files.write(tmp.resolve("bom.txt"), new byte[] {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF, 'h', 'i',
                '\n', (byte) 0xEF, (byte) 0xBB, (byte) 0xBF, 'h', '\n'});
        Run r = run("tokenize", "--tokenizer", "bytes", "--input", input.toString());
        assertThat(r.status()).as(r.err()).isZero();
        // the first line's mark is the file's; one further on is a character of the text (U+FEFF) and kept
        assertThat(r.out().lines().toList()).containsExactly("[104,105]", "[239,187,191,104]");
    }

    @Test
    void specialTokensOnRequest() throws IOException {
        Path input = Files.writeString(tmp.resolve("in.txt"), "Hello, world!\n");
        String dir = TestTokenizers.modelDir("llama2").toString();
        assertThat(run("tokenize", "--tokenizer", dir, "--input", input.toString()).out())
                .isEqualTo("[22557,28725,1526,28808]\n");
        assertThat(run("tokenize", "--tokenizer", dir, "--input", input.toString(), "--add-special-tokens").out())
                .isEqualTo("[1,22557,28725,1526,28808]\n");
    }

    @Test
    void aTokenizerJsonFileWorksToo() throws IOException {
        Path input = Files.writeString(tmp.resolve("in.txt"), "Hello, world!");
        Run r = run("tokenize", "--tokenizer", TestTokenizers.modelDir("llama3").resolve("tokenizer.json").toString(),
                "--input", input.toString());
        assertThat(r.out()).isEqualTo("[9906,11,1917,0]\n");
    }

    @Test
    void badInputIsOneErrorLine() throws IOException {
        String qwen = TestTokenizers.modelDir("qwen3").toString();
        Path input = Files.writeString(tmp.resolve("in.txt"), "x\n");
        assertFails(run("tokenize", "--tokenizer", tmp.resolve("missing").toString(), "--input", input.toString()),
                "does not exist");
        assertFails(run("tokenize", "--tokenizer", qwen, "--input", tmp.resolve("missing.txt").toString()),
                "input file", "does not exist");
        assertFails(run("tokenize", "--tokenizer", Files.writeString(tmp.resolve("bad.json"), "{oops").toString(),
                "--input", input.toString()), "not valid JSON");
        assertFails(run("tokenize", "--tokenizer", Files.writeString(tmp.resolve("cfg.json"), "{\"a\": 1}").toString(),
                "--input", input.toString()), "not a Hugging Face tokenizer.json");
        Path latin1 = Files.write(tmp.resolve("latin1.txt"), new byte[] {'o', 'k', '\n', 'c', 'a', 'f', (byte) 0xE9, '\n'});
        assertFails(run("tokenize", "--tokenizer", qwen, "--input", latin1.toString()), "not valid UTF-8 (line 2)");
        assertFails(run("tokenize", "--input", input.toString()), "--tokenizer");
    }

    private static void assertFails(Run r, String... fragments) {
        assertThat(r.status()).as("status; stderr: %s", r.err()).isEqualTo(2);
        assertThat(r.err().lines().toList()).hasSize(1);
        assertThat(r.err()).startsWith("error: ");
        for (String f : fragments) {
            assertThat(r.err()).contains(f);
        }
    }
}
