package io.fsdp4j.data;

import io.fsdp4j.model.TokenBatch;
import java.util.Arrays;

/**
 * One training sequence: token ids and labels aligned with them (-100 where no loss is taken; position t is
 * trained to predict labels[t+1]). A packed sequence holds several documents: documentStarts[p] is the position
 * where token p's document begins (null: the sequence is one document).
 */
public record Sequence(int[] ids, int[] labels, int[] documentStarts) {

    public Sequence {
        if (ids.length != labels.length || documentStarts != null && documentStarts.length != ids.length) {
            throw new IllegalArgumentException("ids, labels and document starts differ in length");
        }
    }

    public Sequence(int[] ids, int[] labels) {
        this(ids, labels, null);
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
        int[] d = documentStarts == null ? null : Arrays.copyOf(documentStarts, seqLen);
        for (int p = ids.length; p < seqLen; p++) {
            l[p] = TokenBatch.IGNORE;
            if (d != null) {
                d[p] = ids.length; // padding is a document of its own
            }
        }
        return new Sequence(i, l, d);
    }
}
