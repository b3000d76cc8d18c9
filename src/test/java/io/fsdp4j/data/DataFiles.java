package io.fsdp4j.data;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.zip.GZIPInputStream;

/** Helpers of the data tests: files written in a temporary directory, token files prepared from them. */
final class DataFiles {
    private DataFiles() {}

    static Path write(Path dir, String name, String text) {
        try {
            return Files.writeString(dir.resolve(name), text);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Path write(Path dir, String name, byte[] bytes) {
        try {
            return Files.write(dir.resolve(name), bytes);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Prepare.Options options(Path input, DatasetFormat format, String tokenizer, Path out) {
        return new Prepare.Options(input, format, tokenizer, out, 0, 0.0, 1234, InstructionPrompt.COMPACT, false);
    }

    /** Prepares {@code input} with the byte tokenizer, nothing held out, into {@code dir/out}, and opens it. */
    static TokenFiles prepareBytes(Path dir, Path input, DatasetFormat format) {
        Path out = dir.resolve("out-" + input.getFileName());
        Prepare.run(options(input, format, TextTokenizer.BYTES, out));
        return TokenFiles.open(out);
    }

    /** The test tokenizer Qwen3 (tokenizer.json and tokenizer_config.json of src/test/resources/tokenizer/qwen3). */
    static Path qwen3(Path dir) {
        try {
            Path model = Files.createDirectories(dir.resolve("qwen3"));
            try (InputStream in = new GZIPInputStream(resource("tokenizer/qwen3/tokenizer.json.gz"))) {
                Files.copy(in, model.resolve("tokenizer.json"));
            }
            try (InputStream in = resource("tokenizer/qwen3/tokenizer_config.json")) {
                Files.copy(in, model.resolve("tokenizer_config.json"));
            }
            return model;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static InputStream resource(String name) {
        InputStream in = DataFiles.class.getClassLoader().getResourceAsStream(name);
        if (in == null) {
            throw new IllegalStateException("test resource " + name + " is missing");
        }
        return in;
    }

    /** The ids of the UTF-8 bytes of {@code text}. */
    static int[] bytes(String text) {
        return ByteTokenizer.INSTANCE.encode(text, false);
    }

    /** {@code ids} then EOS (byte 0). */
    static int[] withEos(int[] ids) {
        int[] r = Arrays.copyOf(ids, ids.length + 1);
        r[ids.length] = ByteTokenizer.EOS;
        return r;
    }

    /** {@code n} times -100 then {@code rest}. */
    static int[] masked(int n, int[] rest) {
        int[] r = new int[n + rest.length];
        Arrays.fill(r, 0, n, -100);
        System.arraycopy(rest, 0, r, n, rest.length);
        return r;
    }

    static int[] concat(List<int[]> parts) {
        return parts.stream().flatMapToInt(Arrays::stream).toArray();
    }
}
