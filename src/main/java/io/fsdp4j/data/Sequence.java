package io.fsdp4j.data;

import io.fsdp4j.model.TokenBatch;
import java.util.Arrays;

/**
 * One training sequence: token ids and labels aligned with them (-100 where no loss is taken; position t is
 * trained to predict labels[t+1]).
 */
public record Sequence(int[] ids, int[] labels) {

    public Sequence {
        if (ids.length != labels.length) {
            throw new IllegalArgumentException("ids and labels differ in length");
        }
    }

    public static Sequence unmasked(int[] ids) {
        return new Sequence(ids, ids.clone());
    }

    public int length() {
        return ids.length;
    }

    /** Truncated to, or padded (id 0, no loss) up to, exactly {@code seqLen} tokens. */
    public Sequence fitTo(int seqLen) {
        if (ids.length == seqLen) {
            return this;
        }
        int[] i = Arrays.copyOf(ids, seqLen), l = Arrays.copyOf(labels, seqLen);
        for (int p = ids.length; p < seqLen; p++) {
            l[p] = TokenBatch.IGNORE;
        }
        return new Sequence(i, l);
    }
}
