package io.fsdp4j.backend;

/**
 * Shape of one causal grouped-query attention call over a packed qkv activation.
 *
 * <p>A row of qkv (B*T rows) holds NH query heads, then NKV key heads, then NKV value heads, each HS wide.
 * A query at position q attends to keys k with {@code k <= q} and, when {@code slidingWindow > 0},
 * {@code k > q - slidingWindow} (the Mistral convention: the window counts the query's own position).
 *
 * @param batch B
 * @param seqLen T
 * @param heads NH, query heads
 * @param kvHeads NKV, key/value heads; NH is a multiple of NKV
 * @param headDim HS
 * @param slidingWindow 0 for none
 */
public record AttentionShape(int batch, int seqLen, int heads, int kvHeads, int headDim, int slidingWindow) {
    public AttentionShape {
        if (heads % kvHeads != 0) {
            throw new IllegalArgumentException("query heads " + heads + " not a multiple of kv heads " + kvHeads);
        }
    }

    public int qkvWidth() {
        return (heads + 2 * kvHeads) * headDim;
    }

    public float scale() {
        return (float) (1.0 / Math.sqrt(headDim));
    }
}
