package io.fsdp4j.data;

import io.fsdp4j.model.TokenBatch;
import java.util.AbstractList;
import java.util.Arrays;
import java.util.List;
import java.util.RandomAccess;

/**
 * Training sequences of exactly {@code seqLen} tokens cut from documents, built when asked for (from memory-mapped
 * token files, nothing is read before a sequence is used):
 * <ul>
 *   <li>one document per sequence: truncated to {@code seqLen}, or padded with id 0 and label -100;</li>
 *   <li>packed: the documents back to back, cut into windows of {@code seqLen} with {@link Sequence#documentStarts}
 *       set, so attention never crosses a document and positions restart at each. A document cut at a window's
 *       end continues in the next window as a new document. The last window is padded (the padding a document of
 *       its own, as {@link Sequence#fitTo} pads); every token of every document is in exactly one window.</li>
 * </ul>
 * Which windows make up a step stays the job of {@link BatchSampler}.
 */
public final class SequenceWindows {
    private SequenceWindows() {}

    /** The sequences of {@code documents} (indices into {@code source}, in this order). */
    public static List<Sequence> of(Documents source, int[] documents, int seqLen, boolean pack) {
        if (seqLen < 1) {
            throw new IllegalArgumentException("seqLen " + seqLen);
        }
        int[] order = documents.clone();
        return pack ? new Packed(source, order, seqLen) : new OnePerDocument(source, order, seqLen);
    }

    /**
     * The documents of {@code documents} that carry a loss within their first {@code seqLen} tokens: a label other
     * than -100 at a position 1..seqLen-1 (position 0 is never predicted). Without packing, the others would be
     * sequences that train nothing.
     */
    public static int[] withLoss(Documents source, int[] documents, int seqLen) {
        int[] ids = new int[seqLen], labels = new int[seqLen];
        return Arrays.stream(documents).filter(d -> {
            int n = Math.min(source.length(d), seqLen);
            source.copy(d, 0, n, ids, labels, 0);
            for (int p = 1; p < n; p++) {
                if (labels[p] != TokenBatch.IGNORE) {
                    return true;
                }
            }
            return false;
        }).toArray();
    }

    /** Documents of {@code documents} longer than {@code seqLen}: truncated when not packed. */
    public static int longerThan(Documents source, int[] documents, int seqLen) {
        int n = 0;
        for (int d : documents) {
            if (source.length(d) > seqLen) {
                n++;
            }
        }
        return n;
    }

    private static final class OnePerDocument extends AbstractList<Sequence> implements RandomAccess {
        private final Documents source;
        private final int[] documents;
        private final int seqLen;

        OnePerDocument(Documents source, int[] documents, int seqLen) {
            this.source = source;
            this.documents = documents;
            this.seqLen = seqLen;
        }

        @Override
        public Sequence get(int index) {
            int d = documents[index];
            int n = Math.min(source.length(d), seqLen);
            int[] ids = new int[seqLen], labels = new int[seqLen];
            source.copy(d, 0, n, ids, labels, 0);
            Arrays.fill(labels, n, seqLen, TokenBatch.IGNORE);
            return new Sequence(ids, labels); // padding follows causally: no document starts needed
        }

        @Override
        public int size() {
            return documents.length;
        }
    }

    private static final class Packed extends AbstractList<Sequence> implements RandomAccess {
        private final Documents source;
        private final int[] documents;
        private final long[] ends; // (documents) where each document ends in the concatenation
        private final int seqLen;
        private final int windows;

        Packed(Documents source, int[] documents, int seqLen) {
            this.source = source;
            this.documents = documents;
            this.seqLen = seqLen;
            this.ends = new long[documents.length];
            long total = 0;
            for (int i = 0; i < documents.length; i++) {
                total += source.length(documents[i]);
                ends[i] = total;
            }
            this.windows = Math.toIntExact((total + seqLen - 1) / seqLen);
        }

        @Override
        public Sequence get(int index) {
            if (index < 0 || index >= windows) {
                throw new IndexOutOfBoundsException(index);
            }
            long start = (long) index * seqLen;
            int[] ids = new int[seqLen], labels = new int[seqLen], starts = new int[seqLen];
            // The document holding the window's first token: the first whose end lies after it.
            int i = Arrays.binarySearch(ends, start);
            i = i >= 0 ? i + 1 : -i - 1;
            int p = 0;
            for (; p < seqLen && i < documents.length; i++) {
                long docStart = i == 0 ? 0 : ends[i - 1];
                int from = (int) (start + p - docStart); // > 0 only for a document continued from the last window
                int n = (int) Math.min(ends[i] - docStart - from, seqLen - p);
                source.copy(documents[i], from, n, ids, labels, p);
                Arrays.fill(starts, p, p + n, p);
                p += n;
            }
            Arrays.fill(labels, p, seqLen, TokenBatch.IGNORE);
            Arrays.fill(starts, p, seqLen, p);
            return new Sequence(ids, labels, starts);
        }

        @Override
        public int size() {
            return windows;
        }
    }
}
