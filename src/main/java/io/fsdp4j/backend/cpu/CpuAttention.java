package io.fsdp4j.backend.cpu;

import io.fsdp4j.backend.AttentionShape;

/**
 * Causal grouped-query attention in fp32, flash-style: no T x T matrix is ever stored; forward saves only the
 * log-sum-exp of each query's scores, and backward recomputes the probabilities from it. Queries go in blocks of
 * {@value #BLOCK} rows: a block's scores against the keys it may see (per-thread scratch, reused) and its five
 * products (scores, P V; in backward dP, dQ, dK, dV) run on {@link CpuMatmul}'s register tiles, reading Q, K and V in
 * place through strides, in a fixed order: the same bits for any thread count. Work is split by (batch, kv head) so
 * that the query heads sharing a key/value head accumulate into dk and dv on one thread. The head columns of a qkv
 * row come from the shape's layout. The products skip the register tiles and k-steps above the causal diagonal
 * ({@code CpuMatmul.productHere}'s causal forms), whose scores are masked and whose probabilities are zero: the same
 * bits as the whole products, about half their work at one block a sequence. An ALiBi bias, when asked for, enters
 * the scores after the scaling (it is a constant of the scores, so the backward formulas are unchanged); a soft cap,
 * when asked for, enters before the bias, and backward multiplies each score's gradient by the cap's slope 1 -
 * tanh^2.
 */
public final class CpuAttention {
    private CpuAttention() {}

    /** First key position the query of row {@code row} (at position t) may attend to. */
    static int firstKey(int t, int slidingWindow, int[] documentStarts, int row) {
        int first = slidingWindow > 0 ? Math.max(0, t - slidingWindow + 1) : 0;
        return documentStarts == null ? first : Math.max(first, documentStarts[row]);
    }

    /** Query rows per block: a block's scores against every key it may see are the only scores held at once. */
    static final int BLOCK = 64;

    /** Per-thread scratch, grown to the largest shape seen and then reused: one block's scores and their gradients. */
    private static final class Scratch {
        float[] scores = new float[0], dScores = new float[0], capSlopes = new float[0];

        Scratch sized(int floats) {
            if (scores.length < floats) {
                scores = new float[floats];
                dScores = new float[floats];
                capSlopes = new float[floats];
            }
            return this;
        }
    }

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    public static void forward(float[] out, int outO, float[] lse, int lseO, float[] qkv, int qkvO,
                               int[] documentStarts, AttentionShape s) {
        int T = s.seqLen(), NH = s.heads(), NKV = s.kvHeads(), HS = s.headDim();
        int width = s.qkvWidth(), group = NH / NKV, blocks = (T + BLOCK - 1) / BLOCK;
        float scale = s.scale();
        Parallel.forEach(s.batch() * NH * blocks, 4L * BLOCK * T * HS, task -> {
            int bh = task / blocks, b = bh / NH, h = bh % NH, kvh = h / group;
            int t0 = task % blocks * BLOCK, rows = Math.min(BLOCK, T - t0), keys = t0 + rows;
            float slope = s.slope(h);
            float[] p = SCRATCH.get().sized(BLOCK * T).scores;
            int seq = qkvO + b * T * width;
            // scores (rows, keys) = Q of the block @ K^T
            CpuMatmul.productHere(p, 0, keys, qkv, seq + t0 * width + s.queryColumn(h), width, 1,
                    qkv, seq + s.keyColumn(kvh), 1, width, rows, keys, HS, true, CpuMatmul.COLUMNS_TO_ROW, t0);
            for (int r = 0; r < rows; r++) {
                int t = t0 + r, row = r * keys;
                int lo = firstKey(t, s.slidingWindow(), documentStarts, b * T + t);
                float max = Float.NEGATIVE_INFINITY;
                for (int k = lo; k <= t; k++) {
                    p[row + k] = s.cap(p[row + k] * scale) + slope * (k - t);
                    max = Math.max(max, p[row + k]);
                }
                CpuActivations.expShifted(p, row + lo, row + t + 1, max);
                float sum = 0f;
                for (int k = lo; k <= t; k++) {
                    sum += p[row + k];
                }
                float inv = 1f / sum;
                for (int k = lo; k <= t; k++) {
                    p[row + k] *= inv;
                }
                java.util.Arrays.fill(p, row, row + lo, 0f);
                java.util.Arrays.fill(p, row + t + 1, row + keys, 0f);
                lse[lseO + (b * NH + h) * T + t] = max + (float) Math.log(sum);
            }
            // out of the block (rows, HS) = P @ V
            CpuMatmul.productHere(out, outO + (b * T + t0) * NH * HS + h * HS, NH * HS, p, 0, keys, 1,
                    qkv, seq + s.valueColumn(kvh), width, 1, rows, HS, keys, true, CpuMatmul.K_TO_ROW, t0);
        });
    }

    public static void backward(float[] dQkv, int dO, float[] dOut, int dOutO, float[] qkv, int qkvO,
                                float[] out, int outO, float[] lse, int lseO, int[] documentStarts, AttentionShape s) {
        int T = s.seqLen(), NH = s.heads(), NKV = s.kvHeads(), HS = s.headDim();
        int width = s.qkvWidth(), group = NH / NKV;
        float scale = s.scale();
        Parallel.forEach(s.batch() * NKV, 10L * group * T * T * HS, bkv -> {
            int b = bkv / NKV, kvh = bkv % NKV;
            int kCol = s.keyColumn(kvh), vCol = s.valueColumn(kvh);
            Scratch sc = SCRATCH.get().sized(BLOCK * T);
            float[] p = sc.scores, ds = sc.dScores, capSlopes = s.softcap() > 0 ? sc.capSlopes : null;
            int seq = qkvO + b * T * width, dSeq = dO + b * T * width;
            // this task owns dq of its group's query heads and dk, dv of its kv head
            for (int k = 0; k < T; k++) {
                java.util.Arrays.fill(dQkv, dSeq + k * width + kCol, dSeq + k * width + kCol + HS, 0f);
                java.util.Arrays.fill(dQkv, dSeq + k * width + vCol, dSeq + k * width + vCol + HS, 0f);
            }
            for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                float slope = s.slope(h);
                int qCol = s.queryColumn(h);
                for (int t0 = 0; t0 < T; t0 += BLOCK) {
                    int rows = Math.min(BLOCK, T - t0), keys = t0 + rows;
                    int dOutBlock = dOutO + (b * T + t0) * NH * HS + h * HS;
                    // scores (rows, keys) = Q K^T and dP (rows, keys) = dOut V^T, then P and dS in their place
                    CpuMatmul.productHere(p, 0, keys, qkv, seq + t0 * width + qCol, width, 1,
                            qkv, seq + kCol, 1, width, rows, keys, HS, true, CpuMatmul.COLUMNS_TO_ROW, t0);
                    CpuMatmul.productHere(ds, 0, keys, dOut, dOutBlock, NH * HS, 1,
                            qkv, seq + vCol, 1, width, rows, keys, HS, true, CpuMatmul.COLUMNS_TO_ROW, t0);
                    for (int r = 0; r < rows; r++) {
                        int t = t0 + r, row = r * keys;
                        int lo = firstKey(t, s.slidingWindow(), documentStarts, b * T + t);
                        float rowLse = lse[lseO + (b * NH + h) * T + t];
                        float delta = CpuMatmul.dot(dOut, dOutBlock + r * NH * HS, out,
                                outO + (b * T + t) * NH * HS + h * HS, HS);
                        // the exponents, e^ of them (vectorised), then dS = P (dP - delta) cap' scale
                        for (int k = lo; k <= t; k++) {
                            float capped = s.cap(p[row + k] * scale);
                            if (capSlopes != null) {
                                capSlopes[row + k] = s.capSlope(capped);
                            }
                            p[row + k] = capped + slope * (k - t);
                        }
                        CpuActivations.expShifted(p, row + lo, row + t + 1, rowLse);
                        for (int k = lo; k <= t; k++) {
                            float capSlope = capSlopes != null ? capSlopes[row + k] : 1f;
                            ds[row + k] = p[row + k] * (ds[row + k] - delta) * capSlope * scale;
                        }
                        java.util.Arrays.fill(p, row, row + lo, 0f);
                        java.util.Arrays.fill(p, row + t + 1, row + keys, 0f);
                        java.util.Arrays.fill(ds, row, row + lo, 0f);
                        java.util.Arrays.fill(ds, row + t + 1, row + keys, 0f);
                    }
                    // dQ of the block = dS K ; dK += dS^T Q of the block ; dV += P^T dOut of the block
                    CpuMatmul.productHere(dQkv, dSeq + t0 * width + qCol, width, ds, 0, keys, 1,
                            qkv, seq + kCol, width, 1, rows, HS, keys, true, CpuMatmul.K_TO_ROW, t0);
                    CpuMatmul.productHere(dQkv, dSeq + kCol, width, ds, 0, 1, keys,
                            qkv, seq + t0 * width + qCol, width, 1, keys, HS, rows, false, CpuMatmul.K_FROM_ROW, t0);
                    CpuMatmul.productHere(dQkv, dSeq + vCol, width, p, 0, 1, keys,
                            dOut, dOutBlock, NH * HS, 1, keys, HS, rows, false, CpuMatmul.K_FROM_ROW, t0);
                }
            }
        });
    }

    /**
     * Appends the keys and values of each qkv row (B*T rows) to the cache (B, capacity, NKV*HS) at the row's position:
     * row r of sequence r / T goes to slot positions[r].
     */
    public static void cacheAppend(float[] k, int kO, float[] v, int vO, float[] src, int qkvO, int[] pos, int po,
                                   int rows, int capacity, AttentionShape shape) {
        int width = shape.qkvWidth(), hs = shape.headDim(), kvWidth = shape.kvHeads() * hs;
        int perSequence = shape.seqLen();
        for (int r = 0; r < rows; r++) {
            int row = qkvO + r * width;
            int cacheRow = (r / perSequence * capacity + pos[po + r]) * kvWidth;
            for (int h = 0; h < shape.kvHeads(); h++) {
                System.arraycopy(src, row + shape.keyColumn(h), k, kO + cacheRow + h * hs, hs);
                System.arraycopy(src, row + shape.valueColumn(h), v, vO + cacheRow + h * hs, hs);
            }
        }
    }

    /**
     * Attention of queries over cached keys and values (generation): the query of row n, at t = positions[n], in
     * sequence n / shape.seqLen() of the batch, attends to rows 0..t (sliding window honoured) of that sequence's
     * keys and values (B, capacity, NKV*HS).
     */
    public static void cached(float[] out, int outO, float[] qkv, int qkvO, float[] keys, int kO, float[] values, int vO,
                              int[] positions, int capacity, AttentionShape s) {
        int NH = s.heads(), NKV = s.kvHeads(), HS = s.headDim(), width = s.qkvWidth(), group = NH / NKV;
        int queries = positions.length, perSequence = s.seqLen();
        float scale = s.scale();
        Parallel.forEach(queries * NH, (long) (positions[queries - 1] + 1) * HS * 2, mh -> {
            int m = mh / NH, h = mh % NH, kvh = h / group, t = positions[m];
            int cache = (m / perSequence) * capacity * NKV * HS;
            float slope = s.slope(h);
            int qRow = qkvO + m * width + s.queryColumn(h);
            int lo = firstKey(t, s.slidingWindow(), null, 0);
            float[] p = new float[t + 1];
            float max = Float.NEGATIVE_INFINITY;
            for (int k = lo; k <= t; k++) {
                p[k] = s.cap(CpuMatmul.dot(qkv, qRow, keys, kO + cache + k * NKV * HS + kvh * HS, HS) * scale)
                        + slope * (k - t);
                max = Math.max(max, p[k]);
            }
            float sum = 0f;
            for (int k = lo; k <= t; k++) {
                p[k] = (float) Math.exp(p[k] - max);
                sum += p[k];
            }
            int oRow = outO + m * NH * HS + h * HS;
            java.util.Arrays.fill(out, oRow, oRow + HS, 0f);
            for (int k = lo; k <= t; k++) {
                CpuMatmul.axpy(out, oRow, p[k] / sum, values, vO + cache + k * NKV * HS + kvh * HS, HS);
            }
        });
    }
}
