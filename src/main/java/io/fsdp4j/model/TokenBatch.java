package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.tensor.Tensor;

/**
 * B sequences of T tokens on a device, flattened to N = B*T rows.
 *
 * @param ids (N) I32 input token ids
 * @param positions (N) I32 position of each token in its sequence (rotary embedding)
 * @param targets (N) I32 the token each position must predict (the label of the next position), -100 for none
 */
public record TokenBatch(int batch, int seqLen, Tensor ids, Tensor positions, Tensor targets) {

    public static final int IGNORE = -100;

    public int rows() {
        return batch * seqLen;
    }

    /**
     * Sequences of equal length with labels aligned to the ids, as in Hugging Face causal LMs: position t is
     * trained to predict labels[t+1]; the last position predicts nothing.
     */
    public static TokenBatch of(Backend backend, int[][] ids, int[][] labels) {
        int b = ids.length, t = ids[0].length;
        int[] flatIds = new int[b * t], positions = new int[b * t], targets = new int[b * t];
        for (int s = 0; s < b; s++) {
            if (ids[s].length != t || labels[s].length != t) {
                throw new IllegalArgumentException("sequences of a batch must have one length");
            }
            for (int p = 0; p < t; p++) {
                flatIds[s * t + p] = ids[s][p];
                positions[s * t + p] = p;
                targets[s * t + p] = p + 1 < t ? labels[s][p + 1] : IGNORE;
            }
        }
        return new TokenBatch(b, t, backend.uploadInts(flatIds, b * t), backend.uploadInts(positions, b * t),
                backend.uploadInts(targets, b * t));
    }

    /** Positions that carry a loss. */
    public static long countTargets(int[][] labels) {
        long n = 0;
        for (int[] seq : labels) {
            for (int p = 1; p < seq.length; p++) {
                if (seq[p] != IGNORE) {
                    n++;
                }
            }
        }
        return n;
    }
}
