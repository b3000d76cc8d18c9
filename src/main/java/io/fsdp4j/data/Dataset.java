package io.fsdp4j.data;

import java.util.List;

/**
 * One split of a dataset, ready to train or evaluate on.
 *
 * @param name      what to call it in messages and the run summary (a path, or "built-in demo instructions")
 * @param sequences sequences of exactly the requested length, in dataset order ({@link BatchSampler} orders them)
 * @param answers   the split's examples with answers for generation-based evaluation (prepared Alpaca or SQuAD
 *                  data, the demo); empty otherwise
 * @param documents documents the sequences were cut from
 * @param truncated documents longer than a sequence and cut short
 * @param skipped   documents left out: longer than a sequence with {@code data.too_long=drop}, or (without packing)
 *                  no label within their first seq_len tokens carries a loss (a prompt longer than the sequence)
 */
public record Dataset(String name, List<Sequence> sequences, List<EvalAnswer> answers, int documents, int truncated,
                      int skipped) {
    public Dataset {
        answers = List.copyOf(answers);
    }

    /** Positions that carry a loss over all positions of the sequences ({@link SequenceWindows#efficiency}). */
    public double packingEfficiency() {
        return SequenceWindows.efficiency(sequences);
    }

    /** How many sequences, evenly spread, {@link #documentTokens} reads at most. */
    static final int DOCUMENT_SAMPLE = 256;

    /**
     * The length of the documents packed into the sequences, as attention sees them: the length d whose causal
     * attention, (d + 1) / 2 keys a query, matches the mean keys a query of (up to {@value #DOCUMENT_SAMPLE}, evenly
     * spread) sequences (a window's padding is a document of its own, which attention computes too); 0 where no
     * sequence packs documents, or where they come to the sequence's length.
     */
    public int documentTokens() {
        int n = sequences.size(), step = Math.max(1, n / DOCUMENT_SAMPLE);
        double keys = 0;
        long queries = 0;
        boolean packed = false;
        int seqLen = 0;
        for (int i = 0; i < n; i += step) {
            Sequence s = sequences.get(i);
            int[] starts = s.documentStarts();
            seqLen = Math.max(seqLen, s.length());
            for (int p = 0; p < s.length(); p++) {
                keys += p - (starts == null ? 0 : starts[p]) + 1;
            }
            queries += s.length();
            packed |= starts != null;
        }
        if (!packed || queries == 0) {
            return 0;
        }
        long d = Math.round(2 * keys / queries - 1);
        return d >= seqLen ? 0 : (int) Math.max(1, d);
    }
}
