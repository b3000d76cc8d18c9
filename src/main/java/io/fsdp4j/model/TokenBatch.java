package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.tensor.Tensor;

/**
 * B sequences of T tokens on a device, flattened to N = B*T rows.
 *
 * @param ids (N) I32 input token ids
 * @param positions (N) I32 position of each token in its sequence (rotary embedding)
 * @param targets (N) I32 the token each position must predict (the label of the next position), -100 for none
 * @param documentStarts (N) I32 where each row's document begins in its sequence, for packed sequences; null when
 *                       each sequence is one document
 * @param labelledRuns the runs of rows whose target is not {@link #IGNORE}, as [start, end) pairs read on the host
 *                     (the head computes logits for these rows only); null when not known: every row
 * @param training where the batch sits in a training run, for what training draws at random (LoRA's dropout); null
 *                 outside training (evaluation, scoring, generation): nothing is drawn
 */
public record TokenBatch(int batch, int seqLen, Tensor ids, Tensor positions, Tensor targets, Tensor documentStarts,
                         int[] labelledRuns, Training training) {

    public static final int IGNORE = -100;

    /**
     * A training batch's place in its run: what a random draw of training is keyed by, so that every rank, every
     * split of the global batch into micro-batches and every recompute of a forward draws the same for a sequence.
     *
     * @param seed          the run's seed ({@code train.seed})
     * @param step          the optimizer step (1-based)
     * @param firstSequence the index of the batch's first sequence in the step's global batch (its rows are the
     *                      global batch's rows from firstSequence * seqLen on)
     */
    public record Training(long seed, long step, long firstSequence) {}

    /** A batch outside training. */
    public TokenBatch(int batch, int seqLen, Tensor ids, Tensor positions, Tensor targets, Tensor documentStarts,
                      int[] labelledRuns) {
        this(batch, seqLen, ids, positions, targets, documentStarts, labelledRuns, null);
    }

    /** This batch as the training batch at {@code training}. */
    public TokenBatch inTraining(Training training) {
        return new TokenBatch(batch, seqLen, ids, positions, targets, documentStarts, labelledRuns, training);
    }

    /** A batch whose labelled rows are not known on the host: the head takes every row. */
    public TokenBatch(int batch, int seqLen, Tensor ids, Tensor positions, Tensor targets, Tensor documentStarts) {
        this(batch, seqLen, ids, positions, targets, documentStarts, null);
    }

    public int rows() {
        return batch * seqLen;
    }

    /**
     * Sequences of equal length with labels aligned to the ids, as in Hugging Face causal LMs: position t is
     * trained to predict labels[t+1]; the last position predicts nothing.
     */
    public static TokenBatch of(Backend backend, int[][] ids, int[][] labels) {
        return of(backend, ids, labels, null);
    }

    /**
     * Packed sequences: documentStarts[s][p] is the position in sequence s where the document of token p begins.
     * Each document is its own sequence in all but storage: rotary positions restart at its start, attention
     * stays inside it, and its last token predicts nothing. With documentStarts null, a sequence is one document.
     */
    public static TokenBatch of(Backend backend, int[][] ids, int[][] labels, int[][] documentStarts) {
        int b = ids.length, t = ids[0].length;
        int[] flatIds = new int[b * t], positions = new int[b * t], targets = new int[b * t];
        int[] starts = documentStarts == null ? null : new int[b * t];
        for (int s = 0; s < b; s++) {
            if (ids[s].length != t || labels[s].length != t) {
                throw new IllegalArgumentException("sequences of a batch must have one length");
            }
            for (int p = 0; p < t; p++) {
                int start = documentStarts == null ? 0 : documentStarts[s][p];
                boolean nextInSameDocument = p + 1 < t && (documentStarts == null || documentStarts[s][p + 1] == start);
                flatIds[s * t + p] = ids[s][p];
                positions[s * t + p] = p - start;
                targets[s * t + p] = nextInSameDocument ? labels[s][p + 1] : IGNORE;
                if (starts != null) {
                    starts[s * t + p] = start;
                }
            }
        }
        return new TokenBatch(b, t, backend.uploadInts(flatIds, b * t), backend.uploadInts(positions, b * t),
                backend.uploadInts(targets, b * t), starts == null ? null : backend.uploadInts(starts, b * t),
                HeadLoss.labelledRuns(targets));
    }

    /** Positions that carry a loss (as {@link #of} sets the targets). */
    public static long countTargets(int[][] labels) {
        return countTargets(labels, null);
    }

    public static long countTargets(int[][] labels, int[][] documentStarts) {
        long n = 0;
        for (int s = 0; s < labels.length; s++) {
            int[] seq = labels[s];
            for (int p = 1; p < seq.length; p++) {
                boolean sameDocument = documentStarts == null || documentStarts[s][p] == documentStarts[s][p - 1];
                if (seq[p] != IGNORE && sameDocument) {
                    n++;
                }
            }
        }
        return n;
    }
}
