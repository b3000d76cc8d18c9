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
}
