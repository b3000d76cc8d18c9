package io.fsdp4j.backend.cpu;

import static io.fsdp4j.RandomArrays.uniform;
import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.backend.AttentionShape;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The blocked attention against a direct one (each query's full score row, softmax in double) and across thread
 * counts: with 1, 2 and 4 threads, forward and backward give the same bits. The sequence (150) ends inside a third
 * query block; heads share kv heads (GQA); a sliding window and document starts cut rows short.
 */
class CpuAttentionTest {
    private static final int B = 2, T = 150, NH = 4, NKV = 2, HS = 16;

    private static int[] documentStarts() {
        int[] starts = new int[B * T];
        for (int row = 0; row < B * T; row++) {
            int t = row % T;
            starts[row] = t < 70 ? 0 : 70; // the second document of each sequence starts at position 70
        }
        return starts;
    }

    @Test
    void forwardMatchesEachQueryRowSoftmaxedDirectly() {
        AttentionShape s = new AttentionShape(B, T, NH, NKV, HS, 40);
        float[] qkv = uniform(new SplittableRandom(4), B * T * s.qkvWidth());
        int[] starts = documentStarts();
        float[] out = new float[B * T * NH * HS], lse = new float[B * NH * T];
        CpuAttention.forward(out, 0, lse, 0, qkv, 0, starts, s);
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                int kvh = h / (NH / NKV);
                for (int t = 0; t < T; t++) {
                    int lo = CpuAttention.firstKey(t, 40, starts, b * T + t);
                    double[] score = new double[t + 1];
                    double max = Double.NEGATIVE_INFINITY, sum = 0;
                    for (int k = lo; k <= t; k++) {
                        for (int d = 0; d < HS; d++) {
                            score[k] += (double) qkv[(b * T + t) * s.qkvWidth() + s.queryColumn(h) + d]
                                    * qkv[(b * T + k) * s.qkvWidth() + s.keyColumn(kvh) + d];
                        }
                        score[k] *= s.scale();
                        max = Math.max(max, score[k]);
                    }
                    for (int k = lo; k <= t; k++) {
                        sum += Math.exp(score[k] - max);
                    }
                    assertThat((double) lse[(b * NH + h) * T + t]).isCloseTo(max + Math.log(sum),
                            org.assertj.core.data.Offset.offset(1e-5));
                    for (int d = 0; d < HS; d++) {
                        double o = 0;
                        for (int k = lo; k <= t; k++) {
                            o += Math.exp(score[k] - max) / sum * qkv[(b * T + k) * s.qkvWidth() + s.valueColumn(kvh) + d];
                        }
                        assertThat((double) out[(b * T + t) * NH * HS + h * HS + d]).as("b %d h %d t %d d %d", b, h, t, d)
                                .isCloseTo(o, org.assertj.core.data.Offset.offset(1e-5));
                    }
                }
            }
        }
    }

    @Test
    void sameBitsForAnyThreadCount() {
        AttentionShape s = new AttentionShape(B, T, NH, NKV, HS, 40);
        SplittableRandom r = new SplittableRandom(5);
        float[] qkv = uniform(r, B * T * s.qkvWidth()), dOut = uniform(r, B * T * NH * HS);
        int[] starts = documentStarts();
        float[][] first = null;
        for (int cores : new int[] {1, 2, 4}) {
            float[] out = new float[B * T * NH * HS], lse = new float[B * NH * T], dQkv = new float[qkv.length];
            java.util.Arrays.fill(dQkv, Float.NaN); // every element is written
            Parallel.withCores(cores, () -> {
                CpuAttention.forward(out, 0, lse, 0, qkv, 0, starts, s);
                CpuAttention.backward(dQkv, 0, dOut, 0, qkv, 0, out, 0, lse, 0, starts, s);
            });
            assertThat(dQkv).doesNotContain(Float.NaN);
            if (first == null) {
                first = new float[][] {out, lse, dQkv};
            } else {
                assertThat(out).as("out, %d cores", cores).containsExactly(first[0]);
                assertThat(lse).as("lse, %d cores", cores).containsExactly(first[1]);
                assertThat(dQkv).as("dQkv, %d cores", cores).containsExactly(first[2]);
            }
        }
    }
}
