package io.fsdp4j.data;

import io.fsdp4j.model.TokenBatch;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.OptionalInt;

/**
 * The byte "tokenizer" of byte-vocabulary models (the {@code tiny} preset): a text's ids are its UTF-8 bytes,
 * 0..255. EOS is byte 0 (NUL), which text does not contain; a NUL in the data would read as an end of document.
 * Decoding turns malformed UTF-8 (a model's output cut mid-character) into U+FFFD.
 */
public final class ByteTokenizer implements TextTokenizer {
    public static final ByteTokenizer INSTANCE = new ByteTokenizer();
    public static final int VOCAB = TextBytes.VOCAB;
    /** The end-of-sequence id: byte 0 (NUL). */
    public static final int EOS = 0;

    private ByteTokenizer() {}

    @Override
    public String name() {
        return BYTES;
    }

    @Override
    public int vocabSize() {
        return VOCAB;
    }

    @Override
    public OptionalInt eosId() {
        return OptionalInt.of(EOS);
    }

    /** The UTF-8 bytes; there are no special tokens to add. */
    @Override
    public int[] encode(String text, boolean addSpecialTokens) {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        int[] ids = new int[bytes.length];
        for (int i = 0; i < bytes.length; i++) {
            ids[i] = bytes[i] & 0xff;
        }
        return ids;
    }

    @Override
    public String decode(int[] ids, boolean skipSpecialTokens) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(ids.length);
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] < 0 || ids[i] >= VOCAB) {
                throw new IllegalArgumentException("token id " + ids[i] + " at " + i + " is outside [0, " + VOCAB
                        + ")");
            }
            if (!(skipSpecialTokens && ids[i] == EOS)) {
                bytes.write(ids[i]);
            }
        }
        return bytes.toString(StandardCharsets.UTF_8);
    }

    /** Bytes split exactly at the prompt's end: the prompt's bytes carry no loss, the response's and EOS do. */
    @Override
    public Sequence promptAndResponse(String prompt, String response) {
        int[] p = encode(prompt, true), r = encode(response, true);
        int[] ids = Arrays.copyOf(p, p.length + r.length + 1);
        System.arraycopy(r, 0, ids, p.length, r.length);
        ids[ids.length - 1] = EOS;
        int[] labels = ids.clone();
        Arrays.fill(labels, 0, p.length, TokenBatch.IGNORE);
        return new Sequence(ids, labels);
    }

    /** EOS's name in an export's tokenizer.json. */
    static final String HF_EOS = "<|endoftext|>";

    /**
     * Writes, into a Hugging Face model directory of a byte-vocabulary model, what transformers needs to use it
     * without help: {@code tokenizer.json} (a byte-level BPE with no merges, so that {@code AutoTokenizer} encodes a
     * text as its UTF-8 bytes, the ids this tokenizer gives; id 0, EOS, is the special token
     * {@code <|endoftext|>}, and a NUL byte, which text does not hold, is dropped), {@code tokenizer_config.json} and
     * {@code generation_config.json} ({@code eos_token_id} 0, so that {@code generate()} stops), and adds
     * {@code eos_token_id} to {@code config}, the export's config.json.
     */
    public static void writeHfFiles(java.nio.file.Path dir, com.fasterxml.jackson.databind.node.ObjectNode config)
            throws java.io.IOException {
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        var nodes = json.getNodeFactory();
        var tokenizer = nodes.objectNode();
        tokenizer.put("version", "1.0");
        tokenizer.putNull("truncation");
        tokenizer.putNull("padding");
        // EOS (id 0) is a special token of its own name, as in transformers' tokenizers; were it the character of
        // byte 0, text holding that character (U+0100, Latvian's Ā) would read as EOS
        tokenizer.putArray("added_tokens").addObject().put("id", EOS).put("content", HF_EOS).put("single_word", false)
                .put("lstrip", false).put("rstrip", false).put("normalized", false).put("special", true);
        tokenizer.putNull("normalizer");
        // GPT-2's byte-level mapping, over the whole text (no regex split) and with no prefix space: byte b is the
        // character byteLevelChar(b), and the vocabulary maps that character to b
        tokenizer.set("pre_tokenizer", nodes.objectNode().put("type", "ByteLevel").put("add_prefix_space", false)
                .put("trim_offsets", false).put("use_regex", false));
        tokenizer.putNull("post_processor");
        tokenizer.set("decoder", nodes.objectNode().put("type", "ByteLevel").put("add_prefix_space", false)
                .put("trim_offsets", false).put("use_regex", false));
        var model = tokenizer.putObject("model");
        model.put("type", "BPE").putNull("dropout").putNull("unk_token").putNull("continuing_subword_prefix")
                .putNull("end_of_word_suffix").put("fuse_unk", false).put("byte_fallback", false)
                .put("ignore_merges", false);
        var vocab = model.putObject("vocab");
        vocab.put(HF_EOS, EOS);
        for (int b = 1; b < VOCAB; b++) {
            vocab.put(byteLevelChar(b), b);
        }
        model.putArray("merges");
        var writer = json.writerWithDefaultPrettyPrinter();
        writer.writeValue(dir.resolve("tokenizer.json").toFile(), tokenizer);
        writer.writeValue(dir.resolve("tokenizer_config.json").toFile(), nodes.objectNode()
                .put("tokenizer_class", "PreTrainedTokenizerFast").put("eos_token", HF_EOS)
                .put("model_max_length", config.path("max_position_embeddings").asInt(1 << 20))
                .put("clean_up_tokenization_spaces", false));
        writer.writeValue(dir.resolve("generation_config.json").toFile(), nodes.objectNode()
                .put("eos_token_id", EOS).put("pad_token_id", EOS));
        config.put("eos_token_id", EOS);
    }

    /**
     * GPT-2's {@code bytes_to_unicode}: the printable Latin-1 bytes ({@code !}..{@code ~}, {@code ¡}..{@code ¬},
     * {@code ®}..{@code ÿ}) stand for themselves, every other byte for U+0100 onwards, in byte order.
     */
    static String byteLevelChar(int b) {
        boolean printable = b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF;
        if (printable) {
            return String.valueOf((char) b);
        }
        int n = 0;
        for (int c = 0; c < b; c++) {
            if (!(c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE && c <= 0xFF)) {
                n++;
            }
        }
        return String.valueOf((char) (0x100 + n));
    }
}
