package io.fsdp4j.data;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Plain text as byte tokens (vocabulary of 256): the text's UTF-8 bytes cut into consecutive sequences of
 * {@code seqLen} tokens, every position carrying a loss. For byte-vocabulary models such as the {@code tiny}
 * preset; models with a tokenizer read text through {@code fsdp4j prepare}.
 */
public final class TextBytes {
    public static final int VOCAB = 256;

    private TextBytes() {}

    public static List<Sequence> sequences(String text, int seqLen) {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        List<Sequence> result = new ArrayList<>();
        for (int start = 0; start + seqLen <= bytes.length; start += seqLen) {
            int[] ids = new int[seqLen];
            for (int i = 0; i < seqLen; i++) {
                ids[i] = bytes[start + i] & 0xff;
            }
            result.add(Sequence.unmasked(ids));
        }
        return result;
    }
}
