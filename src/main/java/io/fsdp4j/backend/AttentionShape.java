package io.fsdp4j.backend;

/**
 * Shape of one causal grouped-query attention call over a packed qkv activation.
 *
 * <p>A row of qkv (B*T rows) holds the heads in the order of {@link #layout()}: {@link QkvLayout#GROUPED}, NH query
 * heads, then NKV key heads, then NKV value heads, each HS wide (the Llama family); or
 * {@link QkvLayout#PER_HEAD}, for each head h its query, key and value side by side ([NH, 3, HS], BLOOM's fused
 * query_key_value; NKV = NH). A query at position q attends to keys k with {@code k <= q} and, when
 * {@code slidingWindow > 0}, {@code k > q - slidingWindow} (the Mistral convention: the window counts the query's
 * own position). With {@link #alibi()}, head h's score of key k for the query at t gets the linear bias
 * {@code slope(h) * (k - t)} (ALiBi, BLOOM's slopes: {@link #alibiSlope}); transformers adds {@code slope(h) * k},
 * which differs by a constant per query row and so gives the same softmax. A score is {@code q.k * scale}
 * ({@code 1/sqrt(HS)} unless the model says otherwise: Gemma's query_pre_attn_scalar) and, with {@code softcap > 0},
 * soft-capped to {@code softcap * tanh(score / softcap)} before the bias and the mask (Gemma 2's
 * attn_logit_softcapping).
 *
 * @param batch B
 * @param seqLen T
 * @param heads NH, query heads
 * @param kvHeads NKV, key/value heads; NH is a multiple of NKV
 * @param headDim HS
 * @param slidingWindow 0 for none
 * @param layout the order of q, k and v heads in a row of qkv
 * @param alibi whether scores get ALiBi's linear position bias
 * @param scale the factor of q.k
 * @param softcap the soft cap of the scaled scores, 0 for none
 */
public record AttentionShape(int batch, int seqLen, int heads, int kvHeads, int headDim, int slidingWindow,
                             QkvLayout layout, boolean alibi, float scale, float softcap) {

    /** How a row of the packed qkv activation holds its heads. */
    public enum QkvLayout {
        /** NH query heads, NKV key heads, NKV value heads (Llama, Qwen2, Mistral). */
        GROUPED,
        /** For each head h: q_h, k_h, v_h ([NH, 3, HS], BLOOM); requires NKV = NH. */
        PER_HEAD
    }

    public AttentionShape {
        if (heads % kvHeads != 0) {
            throw new IllegalArgumentException("query heads " + heads + " not a multiple of kv heads " + kvHeads);
        }
        if (layout == QkvLayout.PER_HEAD && kvHeads != heads) {
            throw new IllegalArgumentException("the per-head qkv layout needs as many kv heads as query heads, got "
                    + kvHeads + " and " + heads);
        }
        if (!(scale > 0) || !(softcap >= 0)) {
            throw new IllegalArgumentException("attention scale " + scale + " and soft cap " + softcap);
        }
    }

    /** Scores q.k / sqrt(HS), uncapped. */
    public AttentionShape(int batch, int seqLen, int heads, int kvHeads, int headDim, int slidingWindow,
                          QkvLayout layout, boolean alibi) {
        this(batch, seqLen, heads, kvHeads, headDim, slidingWindow, layout, alibi, (float) (1.0 / Math.sqrt(headDim)),
                0f);
    }

    /** Grouped layout, no ALiBi: the Llama family's attention. */
    public AttentionShape(int batch, int seqLen, int heads, int kvHeads, int headDim, int slidingWindow) {
        this(batch, seqLen, heads, kvHeads, headDim, slidingWindow, QkvLayout.GROUPED, false);
    }

    public int qkvWidth() {
        return (heads + 2 * kvHeads) * headDim;
    }

    /** This shape with scores {@code q.k * scale}, soft-capped at {@code softcap} (0: not capped). */
    public AttentionShape withScores(float scale, float softcap) {
        return new AttentionShape(batch, seqLen, heads, kvHeads, headDim, slidingWindow, layout, alibi, scale, softcap);
    }

    /** The score of a scaled q.k: soft-capped when {@link #softcap} is set. */
    public float cap(float scaled) {
        return softcap > 0 ? softcap * (float) Math.tanh(scaled / softcap) : scaled;
    }

    /** d cap(s) / ds at the capped score c: 1 - (c / softcap)^2, or 1 uncapped. */
    public float capSlope(float capped) {
        if (softcap <= 0) {
            return 1f;
        }
        float t = capped / softcap;
        return 1f - t * t;
    }

    /** First column of query head h in a row of qkv. */
    public int queryColumn(int h) {
        return layout == QkvLayout.GROUPED ? h * headDim : 3 * h * headDim;
    }

    /** First column of key head kvh in a row of qkv. */
    public int keyColumn(int kvh) {
        return layout == QkvLayout.GROUPED ? (heads + kvh) * headDim : (3 * kvh + 1) * headDim;
    }

    /** First column of value head kvh in a row of qkv. */
    public int valueColumn(int kvh) {
        return layout == QkvLayout.GROUPED ? (heads + kvHeads + kvh) * headDim : (3 * kvh + 2) * headDim;
    }

    /** ALiBi slope of head h, or 0 without ALiBi. */
    public float slope(int h) {
        return alibi ? alibiSlope(h, heads) : 0f;
    }

    /**
     * BLOOM's ALiBi slope of head h of n (transformers' build_alibi_tensor): with p the largest power of two
     * {@code <= n}, heads 0..p-1 get {@code 2^(-8(h+1)/p)}; the remaining n - p heads get every other slope of the
     * 2p-head sequence, {@code 2^(-4(2i+1)/p)} for i = 0.. . Computed in double, rounded once.
     */
    public static float alibiSlope(int h, int n) {
        if (h < 0 || h >= n) {
            throw new IllegalArgumentException("head " + h + " of " + n);
        }
        int p = Integer.highestOneBit(n);
        if (h < p) {
            return (float) Math.pow(2.0, -8.0 * (h + 1) / p);
        }
        int i = h - p;
        return (float) Math.pow(2.0, -8.0 * (2 * i + 1) / (2.0 * p));
    }
}
