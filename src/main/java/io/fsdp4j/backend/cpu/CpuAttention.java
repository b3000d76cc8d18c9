package io.fsdp4j.backend.cpu;

import io.fsdp4j.backend.AttentionShape;

/**
 * Causal grouped-query attention in fp32, flash-style: forward saves only the log-sum-exp of each query's
 * scores, and backward recomputes the probabilities from it. Work is split by (batch, kv head) so that the
 * query heads sharing a key/value head accumulate into dk and dv on one thread. The head columns of a qkv row
 * come from the shape's layout; an ALiBi bias, when asked for, enters the scores after the scaling (it is a
 * constant of the scores, so the backward formulas are unchanged).
 */
public final class CpuAttention {
    private CpuAttention() {}

    /** First key position the query of row {@code row} (at position t) may attend to. */
    static int firstKey(int t, int slidingWindow, int[] documentStarts, int row) {
        int first = slidingWindow > 0 ? Math.max(0, t - slidingWindow + 1) : 0;
        return documentStarts == null ? first : Math.max(first, documentStarts[row]);
    }

    public static void forward(float[] out, int outO, float[] lse, int lseO, float[] qkv, int qkvO,
                               int[] documentStarts, AttentionShape s) {
        int T = s.seqLen(), NH = s.heads(), NKV = s.kvHeads(), HS = s.headDim();
        int width = s.qkvWidth(), group = NH / NKV;
        float scale = s.scale();
        Parallel.forEach(s.batch() * NH, (long) T * T * HS, bh -> {
            int b = bh / NH, h = bh % NH, kvh = h / group;
            float slope = s.slope(h);
            float[] p = new float[T];
            for (int t = 0; t < T; t++) {
                int qRow = qkvO + (b * T + t) * width + s.queryColumn(h);
                int lo = firstKey(t, s.slidingWindow(), documentStarts, b * T + t);
                float max = Float.NEGATIVE_INFINITY;
                for (int k = lo; k <= t; k++) {
                    int kRow = qkvO + (b * T + k) * width + s.keyColumn(kvh);
                    p[k] = CpuMatmul.dot(qkv, qRow, qkv, kRow, HS) * scale + slope * (k - t);
                    max = Math.max(max, p[k]);
                }
                float sum = 0f;
                for (int k = lo; k <= t; k++) {
                    p[k] = (float) Math.exp(p[k] - max);
                    sum += p[k];
                }
                float inv = 1f / sum;
                int oRow = outO + (b * T + t) * NH * HS + h * HS;
                java.util.Arrays.fill(out, oRow, oRow + HS, 0f);
                for (int k = lo; k <= t; k++) {
                    int vRow = qkvO + (b * T + k) * width + s.valueColumn(kvh);
                    CpuMatmul.axpy(out, oRow, p[k] * inv, qkv, vRow, HS);
                }
                lse[lseO + (b * NH + h) * T + t] = max + (float) Math.log(sum);
            }
        });
    }

    public static void backward(float[] dQkv, int dO, float[] dOut, int dOutO, float[] qkv, int qkvO,
                                float[] out, int outO, float[] lse, int lseO, int[] documentStarts, AttentionShape s) {
        int T = s.seqLen(), NH = s.heads(), NKV = s.kvHeads(), HS = s.headDim();
        int width = s.qkvWidth(), group = NH / NKV;
        float scale = s.scale();
        Parallel.forEach(s.batch() * NKV, (long) group * T * T * HS * 3, bkv -> {
            int b = bkv / NKV, kvh = bkv % NKV;
            int kCol = s.keyColumn(kvh), vCol = s.valueColumn(kvh);
            // this task owns dq of its group's query heads and dk, dv of its kv head
            for (int t = 0; t < T; t++) {
                int row = dO + (b * T + t) * width;
                for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                    java.util.Arrays.fill(dQkv, row + s.queryColumn(h), row + s.queryColumn(h) + HS, 0f);
                }
                java.util.Arrays.fill(dQkv, row + kCol, row + kCol + HS, 0f);
                java.util.Arrays.fill(dQkv, row + vCol, row + vCol + HS, 0f);
            }
            for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                float slope = s.slope(h);
                for (int t = 0; t < T; t++) {
                    int qRow = qkvO + (b * T + t) * width + s.queryColumn(h);
                    int dqRow = dO + (b * T + t) * width + s.queryColumn(h);
                    int doRow = dOutO + (b * T + t) * NH * HS + h * HS;
                    int oRow = outO + (b * T + t) * NH * HS + h * HS;
                    float rowLse = lse[lseO + (b * NH + h) * T + t];
                    float delta = CpuMatmul.dot(dOut, doRow, out, oRow, HS);
                    for (int k = firstKey(t, s.slidingWindow(), documentStarts, b * T + t); k <= t; k++) {
                        int kRow = qkvO + (b * T + k) * width + kCol;
                        int vRow = qkvO + (b * T + k) * width + vCol;
                        float score = CpuMatmul.dot(qkv, qRow, qkv, kRow, HS) * scale + slope * (k - t);
                        float p = (float) Math.exp(score - rowLse);
                        float dp = CpuMatmul.dot(dOut, doRow, qkv, vRow, HS);
                        float ds = p * (dp - delta) * scale;
                        CpuMatmul.axpy(dQkv, dqRow, ds, qkv, kRow, HS);
                        CpuMatmul.axpy(dQkv, dO + (b * T + k) * width + kCol, ds, qkv, qRow, HS);
                        CpuMatmul.axpy(dQkv, dO + (b * T + k) * width + vCol, p, dOut, doRow, HS);
                    }
                }
            }
        });
    }

    /** M queries at positions position.. over a cache of keys and values (rows of NKV*HS). */
    public static void cached(float[] out, int outO, float[] qkv, int qkvO, float[] keys, int kO, float[] values, int vO,
                              int queries, int position, AttentionShape s) {
        int NH = s.heads(), NKV = s.kvHeads(), HS = s.headDim(), width = s.qkvWidth(), group = NH / NKV;
        float scale = s.scale();
        Parallel.forEach(queries * NH, (long) (position + queries) * HS * 2, mh -> {
            int m = mh / NH, h = mh % NH, kvh = h / group, t = position + m;
            float slope = s.slope(h);
            int qRow = qkvO + m * width + s.queryColumn(h);
            int lo = firstKey(t, s.slidingWindow(), null, 0);
            float[] p = new float[t + 1];
            float max = Float.NEGATIVE_INFINITY;
            for (int k = lo; k <= t; k++) {
                p[k] = CpuMatmul.dot(qkv, qRow, keys, kO + k * NKV * HS + kvh * HS, HS) * scale + slope * (k - t);
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
                CpuMatmul.axpy(out, oRow, p[k] / sum, values, vO + k * NKV * HS + kvh * HS, HS);
            }
        });
    }
}
