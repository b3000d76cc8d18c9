package io.fsdp4j.backend.cpu;

import static io.fsdp4j.RandomArrays.uniform;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The blocked products against their definition: every element the chain c = fma(a_k, b_k, c) over k in order from
 * its initial value, compared bit for bit, at shapes that cut the register tile, the task blocks and the k panels
 * at odd places, and with 1, 2 and 4 threads. (Arrays are compared with isEqualTo, Arrays.equals: bit for bit and in
 * linear time; containsExactly's diff is quadratic in the length.)
 */
class CpuMatmulTest {
    /**
     * (rows N, in I, out O): tile edges in every dimension, several k panels, several tasks, tasks of several column
     * blocks packed as one span of B ({70, 300, 2600}), and a task whose columns span more than one packing of B
     * ({9, 300, 4200} on one core: its rows of A packed once for both spans, the second span cut mid-tile).
     */
    private static final int[][] SHAPES = {{1, 1, 1}, {7, 13, 5}, {8, 32, 32}, {67, 300, 45}, {260, 270, 70},
        {64, 256, 256}, {3, 600, 33}, {70, 300, 2600}, {9, 300, 4200}};

    @Test
    void forwardIsTheFmaChainFromTheBias() {
        SplittableRandom r = new SplittableRandom(1);
        for (int[] s : SHAPES) {
            int n = s[0], in = s[1], out = s[2];
            float[] x = uniform(r, n * in + 3), w = uniform(r, out * in + 5), bias = uniform(r, out + 2);
            for (boolean withBias : new boolean[] {true, false}) {
                float[] expected = new float[n * out];
                for (int i = 0; i < n; i++) {
                    for (int o = 0; o < out; o++) {
                        float acc = withBias ? bias[2 + o] : 0f;
                        for (int k = 0; k < in; k++) {
                            acc = Math.fma(x[3 + i * in + k], w[5 + o * in + k], acc);
                        }
                        expected[i * out + o] = acc;
                    }
                }
                for (int cores : new int[] {1, 2, 4}) {
                    float[] y = new float[n * out + 1];
                    java.util.Arrays.fill(y, Float.NaN);
                    Parallel.withCores(cores, () -> CpuMatmul.forward(y, 1, x, 3, w, 5, withBias ? bias : null, 2,
                            n, in, out));
                    assertThat(java.util.Arrays.copyOfRange(y, 1, y.length))
                            .as("forward %dx%dx%d, %d cores", n, in, out, cores).isEqualTo(expected);
                    assertThat(y[0]).isNaN(); // nothing written before the output
                }
            }
        }
    }

    @Test
    void inputGradientIsTheFmaChainFromZero() {
        SplittableRandom r = new SplittableRandom(2);
        for (int[] s : SHAPES) {
            int n = s[0], in = s[1], out = s[2];
            float[] dy = uniform(r, n * out), w = uniform(r, out * in);
            float[] expected = new float[n * in];
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < in; j++) {
                    float acc = 0f;
                    for (int o = 0; o < out; o++) {
                        acc = Math.fma(dy[i * out + o], w[o * in + j], acc);
                    }
                    expected[i * in + j] = acc;
                }
            }
            for (int cores : new int[] {1, 2, 4}) {
                float[] dx = new float[n * in];
                java.util.Arrays.fill(dx, Float.NaN);
                Parallel.withCores(cores, () -> CpuMatmul.backwardInput(dx, 0, dy, 0, w, 0, n, in, out));
                assertThat(dx).as("input gradient %dx%dx%d, %d cores", n, in, out, cores).isEqualTo(expected);
            }
        }
    }

    @Test
    void weightGradientAccumulatesTheFmaChainOverRowsInOrder() {
        SplittableRandom r = new SplittableRandom(3);
        for (int[] s : SHAPES) {
            int n = s[0], in = s[1], out = s[2];
            float[] dy = uniform(r, n * out), x = uniform(r, n * in), dw0 = uniform(r, out * in), db0 = uniform(r, out);
            float[] expected = new float[out * in], expectedBias = db0.clone();
            for (int o = 0; o < out; o++) {
                for (int j = 0; j < in; j++) {
                    float acc = dw0[o * in + j];
                    for (int k = 0; k < n; k++) {
                        acc = Math.fma(dy[k * out + o], x[k * in + j], acc);
                    }
                    expected[o * in + j] = acc;
                }
                for (int k = 0; k < n; k++) {
                    expectedBias[o] += dy[k * out + o];
                }
            }
            for (int cores : new int[] {1, 2, 4}) {
                float[] dw = dw0.clone(), db = db0.clone();
                Parallel.withCores(cores, () -> CpuMatmul.backwardWeight(dw, 0, db, 0, dy, 0, x, 0, n, in, out));
                assertThat(dw).as("weight gradient %dx%dx%d, %d cores", n, in, out, cores).isEqualTo(expected);
                assertThat(db).as("bias gradient %dx%dx%d, %d cores", n, in, out, cores).isEqualTo(expectedBias);
            }
        }
    }

    /**
     * The causal forms of productHere (attention's) against the whole product, bit for bit: scores on and below the
     * diagonal (tiles wholly above it left at zero), and chains that stop or start at the diagonal where A is zero
     * beyond it, over tiles cut at the edges and two k-panels.
     */
    @Test
    void causalProductsAreTheWholeProductsWhereTheMaskLeavesThem() {
        SplittableRandom r = new SplittableRandom(9);
        int m = 70, n = 45, k = 300;
        for (int diag : new int[] {0, 5, 64, 250}) {
            float[] a = uniform(r, m * k), b = uniform(r, k * n);
            // scores: C(i, j) kept for j <= i + diag
            float[] whole = new float[m * n], causal = new float[m * n];
            CpuMatmul.productHere(whole, 0, n, a, 0, k, 1, b, 0, n, 1, m, n, k, true);
            CpuMatmul.productHere(causal, 0, n, a, 0, k, 1, b, 0, n, 1, m, n, k, true, CpuMatmul.COLUMNS_TO_ROW, diag);
            int skipped = 0;
            for (int i = 0; i < m; i++) {
                for (int j = 0; j < n; j++) {
                    if (j <= i + diag) {
                        assertThat(causal[i * n + j]).as("score (%d, %d), diag %d", i, j, diag)
                                .isEqualTo(whole[i * n + j]);
                    } else if (causal[i * n + j] == 0f) {
                        skipped++; // above the diagonal: left at zero where its whole tile is, else computed
                    } else {
                        assertThat(causal[i * n + j]).isEqualTo(whole[i * n + j]);
                    }
                }
            }
            if (diag < n) {
                assertThat(skipped).as("tiles above the diagonal skipped, diag %d", diag).isPositive();
            }
            // probabilities by query row: A(i, p) = 0 for p > i + diag
            float[] masked = a.clone();
            for (int i = 0; i < m; i++) {
                for (int q = i + diag + 1; q < k; q++) {
                    masked[i * k + q] = 0f;
                }
            }
            float[] wholeTo = new float[m * n], to = new float[m * n];
            CpuMatmul.productHere(wholeTo, 0, n, masked, 0, k, 1, b, 0, n, 1, m, n, k, true);
            CpuMatmul.productHere(to, 0, n, masked, 0, k, 1, b, 0, n, 1, m, n, k, true, CpuMatmul.K_TO_ROW, diag);
            assertThat(to).as("chains that stop at the diagonal, diag %d", diag).isEqualTo(wholeTo);
            // by key row, accumulated into C: A(i, p) = 0 for p < i - diag
            float[] maskedFrom = a.clone();
            for (int i = 0; i < m; i++) {
                for (int q = 0; q < Math.min(k, i - diag); q++) {
                    maskedFrom[i * k + q] = 0f;
                }
            }
            float[] c0 = uniform(r, m * n), wholeFrom = c0.clone(), from = c0.clone();
            CpuMatmul.productHere(wholeFrom, 0, n, maskedFrom, 0, k, 1, b, 0, n, 1, m, n, k, false);
            CpuMatmul.productHere(from, 0, n, maskedFrom, 0, k, 1, b, 0, n, 1, m, n, k, false, CpuMatmul.K_FROM_ROW,
                    diag);
            assertThat(from).as("chains that start at the diagonal, diag %d", diag).isEqualTo(wholeFrom);
        }
    }
}
