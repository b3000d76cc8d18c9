package io.fsdp4j.data;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tokenizer.ChatTemplate;
import io.fsdp4j.tokenizer.Tokenizer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;

/**
 * What {@code fsdp4j prepare} needs of a tokenizer: text to ids, a vocabulary size, an end-of-sequence id, and
 * the ids and labels of a prompt followed by its response. Two kinds: {@link ByteTokenizer} (UTF-8 bytes, for
 * the {@code tiny} preset) and a Hugging Face {@code tokenizer.json} ({@link #load}). Close it: a Hugging Face
 * tokenizer holds native memory.
 */
public sealed interface TextTokenizer extends AutoCloseable permits ByteTokenizer, TextTokenizer.HuggingFace {
    /** The spelling of {@link ByteTokenizer} on the command line and in {@code meta.json}. */
    String BYTES = "bytes";

    /**
     * The one resolver of a tokenizer named on the command line ({@code prepare}, {@code tokenize}, {@code eval})
     * or in {@code meta.json}: {@code "bytes"}, or a {@code tokenizer.json} or model directory that holds one. A
     * missing one is a {@link UserError} that names {@code bytes} too; a model directory without a
     * {@code tokenizer.json} (such as the export of a model trained on bytes) is told to use {@code bytes}.
     */
    static TextTokenizer load(String spec) {
        if (spec.equals(BYTES)) {
            return ByteTokenizer.INSTANCE;
        }
        Path path = Path.of(spec);
        if (!Files.exists(path)) {
            throw new UserError("tokenizer " + spec + " does not exist; give a tokenizer.json, a model directory that"
                    + " has one, or '" + BYTES + "' (the byte tokenizer of the tiny preset and the demo)");
        }
        if (Files.isDirectory(path) && !Files.isRegularFile(path.resolve("tokenizer.json"))) {
            throw new UserError("model directory " + spec + " has no tokenizer.json" + byteModelHint(path));
        }
        return new HuggingFace(Tokenizer.load(path), path.toAbsolutePath().normalize().toString());
    }

    /**
     * What to do about a model directory without a tokenizer: fsdp4j exports of byte-vocabulary models have none,
     * and their {@code config.json} says {@code "vocab_size": 256}.
     */
    private static String byteModelHint(Path dir) {
        int vocab = -1;
        try {
            JsonNode v = new ObjectMapper().readTree(dir.resolve("config.json").toFile()).path("vocab_size");
            vocab = v.isInt() ? v.intValue() : -1;
        } catch (IOException | RuntimeException e) {
            // no readable config.json: no hint from it
        }
        return vocab == ByteTokenizer.VOCAB
                ? "; its vocabulary of " + vocab + " tokens is that of the byte tokenizer: pass --tokenizer " + BYTES
                : "; give a tokenizer.json, or --tokenizer " + BYTES + " for a model trained on the byte tokenizer"
                        + " (the tiny preset, the demo)";
    }

    /** How {@code meta.json} names it: {@code "bytes"} or the absolute path it was loaded from. */
    String name();

    int vocabSize();

    OptionalInt eosId();

    /** The ids of {@code text}; with {@code addSpecialTokens}, the BOS/EOS that the tokenizer itself adds. */
    int[] encode(String text, boolean addSpecialTokens);

    /** The text of {@code ids}; with {@code skipSpecialTokens}, EOS and other special tokens are left out. */
    String decode(int[] ids, boolean skipSpecialTokens);

    /**
     * {@code prompt + response} then EOS, the prompt's positions labelled {@value TokenBatch#IGNORE}: supervised
     * fine-tuning trains on the response and the EOS only (as {@link AlpacaFormat#tokenize}).
     */
    Sequence promptAndResponse(String prompt, String response);

    /**
     * A conversation rendered with a chat template and labelled ({@link ChatTokens}): {@code template} overrides the
     * tokenizer's own (null: the tokenizer's); {@code allTokens} trains on every token, else on the assistant's
     * turns. A tokenizer without chat templates (the byte tokenizer) is a {@link UserError}.
     */
    default Sequence conversation(List<Map<String, Object>> messages, Map<String, Object> extra,
                                  ChatTemplate template, boolean allTokens) {
        throw new UserError("conversations are rendered with the model's chat template, and the tokenizer " + name()
                + " has none; give a model with a tokenizer.json and a chat template (model.path, --tokenizer)");
    }

    /** A document that is trained on whole: its ids (with the tokenizer's own BOS, if it adds one) then EOS. */
    default Sequence document(String text) {
        int eos = requireEos();
        int[] ids = encode(text, true);
        if (ids.length == 0 || ids[ids.length - 1] != eos) {
            ids = Arrays.copyOf(ids, ids.length + 1);
            ids[ids.length - 1] = eos;
        }
        return Sequence.unmasked(ids);
    }

    /** The EOS id, or a {@link UserError} for a tokenizer that has none. */
    default int requireEos() {
        return eosId().orElseThrow(() -> new UserError("the tokenizer " + name() + " has no EOS token (eos_token in"
                + " tokenizer_config.json) to end documents with"));
    }

    @Override
    default void close() {}

    /** A Hugging Face tokenizer ({@link Tokenizer}) seen through this interface. */
    record HuggingFace(Tokenizer tokenizer, String name) implements TextTokenizer {
        @Override
        public int vocabSize() {
            return tokenizer.vocabSize();
        }

        @Override
        public OptionalInt eosId() {
            return tokenizer.eosId();
        }

        @Override
        public int[] encode(String text, boolean addSpecialTokens) {
            return tokenizer.encode(text, addSpecialTokens);
        }

        @Override
        public String decode(int[] ids, boolean skipSpecialTokens) {
            return tokenizer.decode(ids, skipSpecialTokens);
        }

        @Override
        public Sequence promptAndResponse(String prompt, String response) {
            requireEos();
            return AlpacaFormat.tokenize(tokenizer, prompt, response);
        }

        @Override
        public Sequence conversation(List<Map<String, Object>> messages, Map<String, Object> extra,
                                     ChatTemplate template, boolean allTokens) {
            return ChatTokens.tokenize(tokenizer, template == null ? tokenizer.compiledTemplate() : template, messages,
                    extra, allTokens);
        }

        @Override
        public void close() {
            tokenizer.close();
        }
    }
}
