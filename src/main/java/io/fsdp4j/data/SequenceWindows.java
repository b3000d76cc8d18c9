package io.fsdp4j.data;

import io.fsdp4j.model.TokenBatch;
import java.util.AbstractList;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.RandomAccess;
import java.util.TreeMap;

/**
 * Training sequences of exactly {@code seqLen} tokens cut from documents, built when asked for (from memory-mapped
 * token files, nothing is read before a sequence is used):
 * <ul>
 *   <li>one document per sequence: truncated to {@code seqLen}, or padded with id 0 and label -100;</li>
 *   <li>packed: whole documents packed into windows of {@code seqLen} by best-fit decreasing, with
 *       {@link Sequence#documentStarts} set, so attention never crosses a document and positions restart at each.
 *       No document is cut across windows; one longer than a window is truncated to it (or left out). A window's
 *       rest is padding (id 0, no loss, a document of its own, as {@link Sequence#fitTo} pads).</li>
 * </ul>
 * Which windows make up a step stays the job of {@link BatchSampler}.
 */
public final class SequenceWindows {
    private SequenceWindows() {}

    /** The sequences of {@code documents} (indices into {@code source}, in this order), longer ones truncated. */
    public static List<Sequence> of(Documents source, int[] documents, int seqLen, boolean pack) {
        return of(source, documents, seqLen, pack, false);
    }

    /**
     * The sequences of {@code documents}: packed ({@link Packed}) or one per document; a document longer than
     * {@code seqLen} is truncated to it, or with {@code dropLong} left out.
     */
    public static List<Sequence> of(Documents source, int[] documents, int seqLen, boolean pack, boolean dropLong) {
        if (seqLen < 1) {
            throw new IllegalArgumentException("seqLen " + seqLen);
        }
        int[] order = documents.clone();
        if (pack) {
            return new Packed(source, order, seqLen, dropLong);
        }
        if (dropLong) {
            order = Arrays.stream(order).filter(d -> source.length(d) <= seqLen).toArray();
        }
        return new OnePerDocument(source, order, seqLen);
    }

    /**
     * Packing efficiency: the positions that carry a loss (a label other than -100) over all positions of
     * {@code sequences}; 0 for none.
     */
    public static double efficiency(List<Sequence> sequences) {
        long labelled = 0, positions = 0;
        for (Sequence s : sequences) {
            for (int label : s.labels()) {
                if (label != TokenBatch.IGNORE) {
                    labelled++;
                }
            }
            positions += s.length();
        }
        return positions == 0 ? 0 : (double) labelled / positions;
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

    /**
     * Documents packed whole into windows by best-fit decreasing: the longest first, each into the window with the
     * least room that still holds it (a new window when none does). A document longer than the window was cut to it
     * (or left out, {@link #of(Documents, int[], int, boolean, boolean)}). Each window lists its documents in dataset
     * order, and the windows follow the dataset order of their first document.
     */
    private static final class Packed extends AbstractList<Sequence> implements RandomAccess {
        private final Documents source;
        private final int[][] windows; // (windows) document indices into source, in dataset order
        private final int seqLen;

        Packed(Documents source, int[] documents, int seqLen, boolean dropLong) {
            this.source = source;
            this.seqLen = seqLen;
            int n = documents.length;
            int[] length = new int[n];
            List<Integer> kept = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                length[i] = source.length(documents[i]);
                if (!(dropLong && length[i] > seqLen) && length[i] > 0) {
                    length[i] = Math.min(length[i], seqLen);
                    kept.add(i);
                }
            }
            // Longest first; equal lengths in dataset order, so the packing is a pure function of the data.
            kept.sort(Comparator.comparingInt((Integer i) -> -length[i]).thenComparingInt(i -> i));
            // Open windows by the room left in them: room -> the windows with that room, oldest first.
            TreeMap<Integer, ArrayDeque<List<Integer>>> byRoom = new TreeMap<>();
            List<List<Integer>> bins = new ArrayList<>();
            for (int i : kept) {
                var fit = byRoom.ceilingEntry(length[i]);
                List<Integer> bin;
                int room;
                if (fit == null) {
                    bin = new ArrayList<>();
                    bins.add(bin);
                    room = seqLen;
                } else {
                    room = fit.getKey();
                    bin = fit.getValue().pollFirst();
                    if (fit.getValue().isEmpty()) {
                        byRoom.remove(room);
                    }
                }
                bin.add(i);
                room -= length[i];
                if (room > 0) {
                    byRoom.computeIfAbsent(room, r -> new ArrayDeque<>()).addLast(bin);
                }
            }
            for (List<Integer> bin : bins) {
                bin.sort(null);
            }
            bins.sort(Comparator.comparingInt(b -> b.getFirst()));
            this.windows = new int[bins.size()][];
            for (int w = 0; w < windows.length; w++) {
                windows[w] = bins.get(w).stream().mapToInt(i -> documents[i]).toArray();
            }
        }

        @Override
        public Sequence get(int index) {
            int[] ids = new int[seqLen], labels = new int[seqLen], starts = new int[seqLen];
            int p = 0;
            for (int d : windows[index]) {
                int n = Math.min(source.length(d), seqLen);
                source.copy(d, 0, n, ids, labels, p);
                Arrays.fill(starts, p, p + n, p);
                p += n;
            }
            Arrays.fill(labels, p, seqLen, TokenBatch.IGNORE);
            Arrays.fill(starts, p, seqLen, p);
            return new Sequence(ids, labels, starts);
        }

        @Override
        public int size() {
            return windows.length;
        }
    }
}
