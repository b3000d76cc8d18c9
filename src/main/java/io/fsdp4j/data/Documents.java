package io.fsdp4j.data;

import java.util.List;

/** Documents with random access to their tokens: what {@link SequenceWindows} cuts into training sequences. */
public interface Documents {
    /** How many documents there are. */
    int count();

    /** Tokens of document {@code d}. */
    int length(int d);

    /** Copies ids and labels {@code from..from+n} of document {@code d} into the arrays, starting at {@code at}. */
    void copy(int d, int from, int n, int[] ids, int[] labels, int at);

    /** Sequences in memory (each one document) seen as documents. */
    static Documents of(List<Sequence> sequences) {
        List<Sequence> list = List.copyOf(sequences);
        return new Documents() {
            @Override
            public int count() {
                return list.size();
            }

            @Override
            public int length(int d) {
                return list.get(d).length();
            }

            @Override
            public void copy(int d, int from, int n, int[] ids, int[] labels, int at) {
                System.arraycopy(list.get(d).ids(), from, ids, at, n);
                System.arraycopy(list.get(d).labels(), from, labels, at, n);
            }
        };
    }
}
