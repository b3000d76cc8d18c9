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
    void packingNeverCutsADocumentAndTruncatesOnlyThoseLongerThanAWindow() {
        // lengths 3, 6 (cut to 4), 2 in windows of 4, best fit decreasing: {6}, {3}, {2} (3 + 2 > 4)
        List<Sequence> seqs = SequenceWindows.of(Documents.of(documents(3, 6, 2)), all(3), 4, true);
        assertThat(seqs).hasSize(3);
        assertThat(seqs.get(0).ids()).containsExactly(0, 1, 2, 0); // windows in the order of their first document
        assertThat(seqs.get(0).labels()).containsExactly(-100, 1, -100, -100);
        assertThat(seqs.get(0).documentStarts()).containsExactly(0, 0, 0, 3);
        assertThat(seqs.get(1).ids()).containsExactly(1000, 1001, 1002, 1003);
        assertThat(seqs.get(1).documentStarts()).containsExactly(0, 0, 0, 0);
        assertThat(seqs.get(2).ids()).containsExactly(2000, 2001, 0, 0);
        assertThat(seqs.get(2).documentStarts()).containsExactly(0, 0, 2, 2);
        // dropped instead of truncated
        List<Sequence> dropped = SequenceWindows.of(Documents.of(documents(3, 6, 2)), all(3), 4, true, true);
        assertThat(dropped).hasSize(2);
        assertThat(dropped.stream().flatMapToInt(x -> java.util.Arrays.stream(x.ids())).filter(id -> id >= 1000
                && id < 2000)).isEmpty();
    }

    @Test
    void bestFitDecreasingFillsTheFullestWindowThatHoldsADocument() {
        // 5, 4, 3, 3, 2, 2, 1 in windows of 6: 5+1, 4+2, 3+3, 2 -> four windows, ordered by first document
        List<Sequence> seqs = SequenceWindows.of(Documents.of(documents(5, 4, 3, 3, 2, 2, 1)), all(7), 6, true);
        assertThat(seqs).hasSize(4);
        assertThat(seqs.stream().map(x -> x.ids()[0] / 1000 + "+" + x.ids()[x.documentStarts()[5]] / 1000).toList())
                .containsExactly("0+6", "1+4", "2+3", "5+0");
        assertThat(SequenceWindows.efficiency(seqs)).isEqualTo(8.0 / 24); // labels on odd positions of each document
    }

    @Test
    void packingKeepsEveryDocumentWholeInOneWindow() {
        SplittableRandom random = new SplittableRandom(42);
        for (int trial = 0; trial < 50; trial++) {
            int[] lengths = random.ints(1 + random.nextInt(20), 1, 40).toArray();
            List<Sequence> docs = documents(lengths);
            int[] order = random.ints(0, docs.size()).distinct().limit(docs.size()).toArray();
            int seqLen = 1 + random.nextInt(33);
            List<Sequence> windows = SequenceWindows.of(Documents.of(docs), order, seqLen, true);
            int[] seen = new int[docs.size()];
            int total = 0;
            for (int d = 0; d < docs.size(); d++) {
                total += Math.min(lengths[d], seqLen);
            }
            assertThat(windows.size()).isBetween((total + seqLen - 1) / seqLen, docs.size());
            for (Sequence s : windows) {
                assertThat(s.length()).isEqualTo(seqLen);
                int[] starts = s.documentStarts();
                for (int p = 0; p < seqLen; p++) {
                    assertThat(starts[p]).isBetween(0, p);
                    if (starts[p] != p) {
                        assertThat(starts[p]).isEqualTo(starts[p - 1]);
                    }
                }
                // each document of the window: its first min(length, seqLen) tokens, from its start on
                for (int p = 0; p < seqLen; p = next(starts, p)) {
                    int end = next(starts, p);
                    if (s.labels()[p] == TokenBatch.IGNORE && s.ids()[p] == 0 && p > 0 && end == seqLen
                            && java.util.Arrays.stream(s.ids(), p, end).allMatch(id -> id == 0)) {
                        break; // the padding after the last document
                    }
                    int d = s.ids()[p] / 1000;
                    assertThat(end - p).isEqualTo(Math.min(lengths[d], seqLen));
                    assertThat(java.util.Arrays.copyOfRange(s.ids(), p, end))
                            .containsExactly(java.util.Arrays.copyOf(docs.get(d).ids(), end - p));
                    assertThat(java.util.Arrays.copyOfRange(s.labels(), p, end))
                            .containsExactly(java.util.Arrays.copyOf(docs.get(d).labels(), end - p));
                    seen[d]++;
                }
            }
            assertThat(seen).containsOnly(1); // every document once
        }
    }

    /** Where the document that starts at {@code p} ends. */
    private static int next(int[] starts, int p) {
        int q = p + 1;
        while (q < starts.length && starts[q] == p) {
            q++;
        }
        return q;
    }

    private static int sum(int[] values) {
        return java.util.Arrays.stream(values).sum();
    }
}
