package io.fsdp4j.data;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.model.TokenBatch;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Sequences of exactly seq_len tokens: one document each, or documents packed into windows. */
class SequenceWindowsTest {
    /** Documents whose tokens name their place: id = 1000 * document + position, label = -id on even positions. */
    private static List<Sequence> documents(int... lengths) {
        List<Sequence> docs = new ArrayList<>();
        for (int d = 0; d < lengths.length; d++) {
            int[] ids = new int[lengths[d]], labels = new int[lengths[d]];
            for (int p = 0; p < lengths[d]; p++) {
                ids[p] = 1000 * d + p;
                labels[p] = p % 2 == 0 ? TokenBatch.IGNORE : ids[p];
            }
            docs.add(new Sequence(ids, labels));
        }
        return docs;
    }

    private static int[] all(int n) {
        return java.util.stream.IntStream.range(0, n).toArray();
    }

    @Test
    void oneDocumentPerSequenceIsTruncatedOrPadded() {
        List<Sequence> docs = documents(3, 8, 5);
        List<Sequence> seqs = SequenceWindows.of(Documents.of(docs), new int[] {1, 0, 2}, 5, false);
        assertThat(seqs).hasSize(3).allSatisfy(s -> assertThat(s.length()).isEqualTo(5));
        assertThat(seqs.get(0).ids()).containsExactly(1000, 1001, 1002, 1003, 1004);
        assertThat(seqs.get(1).ids()).containsExactly(0, 1, 2, 0, 0);
        assertThat(seqs.get(1).labels()).containsExactly(-100, 1, -100, -100, -100);
        assertThat(seqs.get(1).documentStarts()).isNull();
        assertThat(seqs.get(2)).usingRecursiveComparison().isEqualTo(docs.get(2));
        assertThat(SequenceWindows.longerThan(Documents.of(docs), new int[] {0, 1, 2}, 5)).isEqualTo(1);
    }

    @Test
    void packedWindowsCutDocumentsAndRestartThemInTheNextWindow() {
        List<Sequence> seqs = SequenceWindows.of(Documents.of(documents(3, 6, 2)), all(3), 4, true);
        assertThat(seqs).hasSize(3); // 11 tokens
        assertThat(seqs.get(0).ids()).containsExactly(0, 1, 2, 1000);
        assertThat(seqs.get(0).documentStarts()).containsExactly(0, 0, 0, 3);
        assertThat(seqs.get(1).ids()).containsExactly(1001, 1002, 1003, 1004);
        assertThat(seqs.get(1).documentStarts()).containsExactly(0, 0, 0, 0);
        assertThat(seqs.get(2).ids()).containsExactly(1005, 2000, 2001, 0);
        assertThat(seqs.get(2).labels()).containsExactly(1005, -100, 2001, -100);
        assertThat(seqs.get(2).documentStarts()).containsExactly(0, 1, 1, 3);
    }

    @Test
    void packingKeepsStartsInsideTheWindowAndCoversEveryTokenOnce() {
        SplittableRandom random = new SplittableRandom(42);
        for (int trial = 0; trial < 50; trial++) {
            int[] lengths = random.ints(1 + random.nextInt(20), 1, 40).toArray();
            List<Sequence> docs = documents(lengths);
            int[] order = random.ints(0, docs.size()).distinct().limit(docs.size()).toArray();
            int seqLen = 1 + random.nextInt(33);
            List<Sequence> windows = SequenceWindows.of(Documents.of(docs), order, seqLen, true);

            // The documents back to back, and where each begins.
            int total = sum(lengths);
            int[] ids = new int[total], labels = new int[total];
            boolean[] first = new boolean[total];
            int at = 0;
            for (int d : order) {
                System.arraycopy(docs.get(d).ids(), 0, ids, at, lengths[d]);
                System.arraycopy(docs.get(d).labels(), 0, labels, at, lengths[d]);
                first[at] = true;
                at += lengths[d];
            }
            assertThat(windows).hasSize((total + seqLen - 1) / seqLen);
            for (int w = 0; w < windows.size(); w++) {
                Sequence s = windows.get(w);
                assertThat(s.length()).isEqualTo(seqLen);
                int[] starts = s.documentStarts();
                for (int p = 0; p < seqLen; p++) {
                    int g = w * seqLen + p;
                    assertThat(starts[p]).isBetween(0, p);
                    if (g < total) { // every token once, in order; a document begins at its first token and at p = 0
                        assertThat(s.ids()[p]).isEqualTo(ids[g]);
                        assertThat(s.labels()[p]).isEqualTo(labels[g]);
                        assertThat(starts[p] == p).isEqualTo(p == 0 || first[g]);
                    } else { // padding: no loss, a document of its own
                        assertThat(s.labels()[p]).isEqualTo(TokenBatch.IGNORE);
                        assertThat(starts[p]).isEqualTo(total - w * seqLen);
                    }
                    if (starts[p] != p) {
                        assertThat(starts[p]).isEqualTo(starts[p - 1]);
                    }
                }
            }
        }
    }

    private static int sum(int[] values) {
        return java.util.Arrays.stream(values).sum();
    }

    @Test
    void aDocumentStartsWhereTheWindowCutsIt() {
        // Document 1 (6 tokens) spans windows 0..2 of 4: each piece starts a document at its window's first position.
        List<Sequence> seqs = SequenceWindows.of(Documents.of(documents(3, 6)), all(2), 4, true);
        assertThat(seqs.get(1).documentStarts()[0]).isZero();
        assertThat(seqs.get(1).ids()[0]).isEqualTo(1001);
    }
}
