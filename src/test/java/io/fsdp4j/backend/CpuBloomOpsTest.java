package io.fsdp4j.backend;

import static io.fsdp4j.backend.GradCheck.assertGradient;
import static io.fsdp4j.backend.GradCheck.columns;
import static io.fsdp4j.backend.GradCheck.filled;
import static io.fsdp4j.RandomArrays.gaussian;
import static io.fsdp4j.backend.GradCheck.maxAbsDiff;
import static io.fsdp4j.backend.GradCheck.minus;
import static io.fsdp4j.backend.GradCheck.numericGradient;
import static io.fsdp4j.RandomArrays.uniform;
import static io.fsdp4j.backend.GradCheck.weightedSum;
import static io.fsdp4j.tensor.DType.F32;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.backend.AttentionShape.QkvLayout;
import io.fsdp4j.tensor.Tensor;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * BLOOM's ops on the CPU backend: LayerNorm with bias, tanh-GELU, and attention over the per-head qkv layout with
 * ALiBi. Forwards against naive double references, backwards against central finite differences of
 * L = sum(out * R) (as CpuBackendGradientTest), and ALiBi's slopes against BLOOM's formula.
 */
class CpuBloomOpsTest {
    private static final Backend B = CpuBackend.INSTANCE;
    private static final float H = 1e-2f;

    // ---- layernorm ------------------------------------------------------------------------------------

    @ParameterizedTest
    @CsvSource({"3, 8", "5, 70", "1, 1"})
    void layerNormMatchesReferenceAndFiniteDifferences(int rows, int c) {
        var rng = new SplittableRandom(200 + c);
        float eps = 1e-5f;
        float[] x = gaussian(rng, rows * c, 1.5);
        for (int i = 0; i < x.length; i++) {
            x[i] += 0.8f; // a mean far from 0
        }
        float[] w = uniform(rng, c, 0.5, 1.5), b = gaussian(rng, c, 0.3);
        float[] r = gaussian(rng, rows * c, 1);
        Tensor out = B.allocate(F32, rows, c), mean = B.allocate(F32, rows), rstd = B.allocate(F32, rows);
        Tensor xT = B.upload(x, rows, c), wT = B.upload(w, c), bT = B.upload(b, c);
        B.layerNormForward(out, mean, rstd, xT, wT, bT, eps);
        float[] o = B.toFloats(out), ms = B.toFloats(mean), rs = B.toFloats(rstd);
        double[] expectOut = new double[rows * c];
        for (int i = 0; i < rows; i++) {
            double mu = 0, var = 0;
            for (int j = 0; j < c; j++) {
                mu += x[i * c + j];
            }
            mu /= c;
            for (int j = 0; j < c; j++) {
                var += (x[i * c + j] - mu) * (x[i * c + j] - mu);
            }
            double inv = 1 / Math.sqrt(var / c + eps);
            assertThat((double) ms[i]).isCloseTo(mu, within(1e-6 * (1 + Math.abs(mu))));
            assertThat((double) rs[i]).isCloseTo(inv, within(1e-6 * inv));
            for (int j = 0; j < c; j++) {
                expectOut[i * c + j] = (x[i * c + j] - mu) * inv * w[j] + b[j];
            }
        }
        assertThat(maxAbsDiff(o, expectOut)).isLessThan(1e-5);
        if (c == 1) {
            return; // a single column normalises to 0: nothing to differentiate
        }

        Tensor dx = B.upload(filled(rows * c, 123f), rows, c); // written
        float[] baseW = gaussian(rng, c, 1), baseB = gaussian(rng, c, 1);
        Tensor dw = B.upload(baseW, c), db = B.upload(baseB, c); // accumulated
        B.layerNormBackward(dx, dw, db, B.upload(r, rows, c), xT, wT, mean, rstd);
        assertGradient("layerNorm dx " + rows + "x" + c, B.toFloats(dx), numericGradient(x.clone(), H, xv -> {
            Tensor y = B.allocate(F32, rows, c);
            B.layerNormForward(y, B.allocate(F32, rows), B.allocate(F32, rows), B.upload(xv, rows, c), wT, bT, eps);
            return weightedSum(B.toFloats(y), r);
        }));
        assertGradient("layerNorm dWeight " + rows + "x" + c, minus(B.toFloats(dw), baseW),
                numericGradient(w.clone(), H, wv -> {
                    Tensor y = B.allocate(F32, rows, c);
                    B.layerNormForward(y, B.allocate(F32, rows), B.allocate(F32, rows), xT, B.upload(wv, c), bT, eps);
                    return weightedSum(B.toFloats(y), r);
                }));
        assertGradient("layerNorm dBias " + rows + "x" + c, minus(B.toFloats(db), baseB),
                numericGradient(b.clone(), H, bv -> {
                    Tensor y = B.allocate(F32, rows, c);
                    B.layerNormForward(y, B.allocate(F32, rows), B.allocate(F32, rows), xT, wT, B.upload(bv, c), eps);
                    return weightedSum(B.toFloats(y), r);
                }));
    }

    // ---- gelu -----------------------------------------------------------------------------------------

    @Test
    void geluMatchesTheTanhFormulaAndFiniteDifferences() {
        var rng = new SplittableRandom(31);
        int n = 200;
        float[] x = gaussian(rng, n, 3), r = gaussian(rng, n, 1);
        Tensor out = B.allocate(F32, n);
        B.geluForward(out, B.upload(x, n));
        double[] expect = new double[n];
        for (int i = 0; i < n; i++) {
            double v = x[i];
            expect[i] = 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v * v * v)));
        }
        assertThat(maxAbsDiff(B.toFloats(out), expect)).isLessThan(2e-6);
        float[] known = B.toFloats(geluOf(new float[] {0f, 1f, -1f, 10f, -10f}));
        assertThat(known[0]).isZero();
        assertThat(known[1]).isCloseTo(0.841192f, within(1e-6f)); // gelu_new(1), tanh approximation
        assertThat(known[2]).isCloseTo(-0.158808f, within(1e-6f));
        assertThat(known[3]).isEqualTo(10f);
        assertThat(known[4]).isCloseTo(0f, within(1e-6f));

        Tensor dx = B.upload(filled(n, 7f), n); // written
        B.geluBackward(dx, B.upload(r, n), B.upload(x, n));
        assertGradient("gelu dx", B.toFloats(dx), numericGradient(x.clone(), 1e-3f,
                xv -> weightedSum(B.toFloats(geluOf(xv)), r)));
    }

    private static Tensor geluOf(float[] x) {
        Tensor y = B.allocate(F32, x.length);
        B.geluForward(y, B.upload(x, x.length));
        return y;
    }

    // ---- alibi ----------------------------------------------------------------------------------------

    @Test
    void alibiSlopesAreBlooms() {
        // a power of two: 2^(-8(h+1)/n)
        assertThat(slopes(8)).containsExactly(0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f, 0.00390625f);
        // 6 heads (as transformers' build_alibi_tensor gives for the bloom fixture): the 4-head slopes, then
        // every other slope of the 8-head sequence
        assertThat(slopes(6)).containsExactly(0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f);
        assertThat(slopes(1)).containsExactly(0.00390625f);
        float[] s16 = slopes(16), s12 = slopes(12);
        assertThat(s16[0]).isCloseTo((float) Math.pow(2, -0.5), within(1e-7f));
        assertThat(s12[8]).isCloseTo((float) Math.pow(2, -0.5), within(1e-7f)); // first extra of 12 = 16-head slope 0
        assertThat(s12[9]).isCloseTo((float) Math.pow(2, -1.5), within(1e-7f));
        var plain = new AttentionShape(1, 4, 6, 6, 8, 0);
        assertThat(plain.slope(3)).isZero();
    }

    private static float[] slopes(int n) {
        float[] s = new float[n];
        for (int h = 0; h < n; h++) {
            s[h] = AttentionShape.alibiSlope(h, n);
        }
        return s;
    }

    @Test
    void perHeadLayoutNeedsOneKvHeadPerQueryHead() {
        assertThatThrownBy(() -> new AttentionShape(1, 4, 4, 2, 8, 0, QkvLayout.PER_HEAD, true))
                .isInstanceOf(IllegalArgumentException.class);
    }

    static Stream<Arguments> bloomShapes() {
        return Stream.of(
                Arguments.of(new AttentionShape(2, 6, 3, 3, 4, 0, QkvLayout.PER_HEAD, true)),
                Arguments.of(new AttentionShape(1, 7, 4, 4, 6, 0, QkvLayout.PER_HEAD, false)),
                Arguments.of(new AttentionShape(2, 6, 4, 2, 4, 0, QkvLayout.GROUPED, true)),
                Arguments.of(new AttentionShape(1, 6, 2, 2, 4, 3, QkvLayout.PER_HEAD, true)));
    }

    /** Column of qkv (layout of s) that holds the given column of the grouped layout. */
    private static int perHeadColumn(AttentionShape s, int groupedColumn) {
        int HS = s.headDim(), NH = s.heads(), NKV = s.kvHeads(), head = groupedColumn / HS, d = groupedColumn % HS;
        if (head < NH) {
            return s.queryColumn(head) + d;
        }
        return head < NH + NKV ? s.keyColumn(head - NH) + d : s.valueColumn(head - NH - NKV) + d;
    }

    @ParameterizedTest
    @MethodSource("bloomShapes")
    void alibiAttentionMatchesNaiveReference(AttentionShape s) {
        var rng = new SplittableRandom(500 + s.heads() * 10L + s.seqLen());
        int T = s.seqLen(), NH = s.heads(), NKV = s.kvHeads(), HS = s.headDim(), w = s.qkvWidth(), n = s.batch() * T;
        float[] qkv = gaussian(rng, n * w, 1);
        Tensor out = B.allocate(F32, n, NH * HS), lse = B.allocate(F32, s.batch(), NH, T);
        B.attentionForward(out, lse, B.upload(qkv, n, w), null, s);
        double[] expect = new double[n * NH * HS], expectLse = new double[s.batch() * NH * T];
        for (int b = 0; b < s.batch(); b++) {
            for (int h = 0; h < NH; h++) {
                int kvh = h / (NH / NKV);
                double slope = s.alibi() ? AttentionShape.alibiSlope(h, NH) : 0;
                for (int t = 0; t < T; t++) {
                    double[] score = new double[T];
                    double sumExp = 0;
                    int lo = s.slidingWindow() > 0 ? Math.max(0, t - s.slidingWindow() + 1) : 0;
                    for (int k = lo; k <= t; k++) {
                        double dot = 0;
                        for (int d = 0; d < HS; d++) {
                            dot += (double) qkv[(b * T + t) * w + s.queryColumn(h) + d] * qkv[(b * T + k) * w + s.keyColumn(kvh) + d];
                        }
                        score[k] = dot / Math.sqrt(HS) + slope * k; // transformers' form: slope * key position
                        sumExp += Math.exp(score[k]);
                    }
                    expectLse[(b * NH + h) * T + t] = Math.log(sumExp) - slope * t; // ours is relative to the query
                    for (int k = lo; k <= t; k++) {
                        double p = Math.exp(score[k]) / sumExp;
                        for (int d = 0; d < HS; d++) {
                            expect[(b * T + t) * NH * HS + h * HS + d] += p * qkv[(b * T + k) * w + s.valueColumn(kvh) + d];
                        }
                    }
                }
            }
        }
        assertThat(maxAbsDiff(B.toFloats(out), expect)).isLessThan(1e-5);
        assertThat(maxAbsDiff(B.toFloats(lse), expectLse)).isLessThan(1e-5);
    }

    @ParameterizedTest
    @MethodSource("bloomShapes")
    void perHeadLayoutIsTheGroupedLayoutPermuted(AttentionShape s) {
        var rng = new SplittableRandom(600 + s.headDim());
        int n = s.batch() * s.seqLen(), w = s.qkvWidth(), o = s.heads() * s.headDim();
        var grouped = new AttentionShape(s.batch(), s.seqLen(), s.heads(), s.kvHeads(), s.headDim(), s.slidingWindow(),
                QkvLayout.GROUPED, s.alibi());
        float[] qkv = gaussian(rng, n * w, 1), permuted = new float[n * w];
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < w; c++) {
                permuted[r * w + perHeadColumn(s, c)] = qkv[r * w + c];
            }
        }
        float[] dOut = gaussian(rng, n * o, 1);
        float[][] a = forwardBackward(qkv, dOut, grouped), b = forwardBackward(permuted, dOut, s);
        assertThat(b[0]).containsExactly(a[0]);
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < w; c++) {
                assertThat(b[1][r * w + perHeadColumn(s, c)]).isEqualTo(a[1][r * w + c]);
            }
        }
    }

    /** {out, dQkv}. */
    private static float[][] forwardBackward(float[] qkv, float[] dOut, AttentionShape s) {
        int n = s.batch() * s.seqLen(), w = s.qkvWidth(), o = s.heads() * s.headDim();
        Tensor q = B.upload(qkv, n, w), out = B.allocate(F32, n, o), lse = B.allocate(F32, s.batch(), s.heads(), s.seqLen());
        B.attentionForward(out, lse, q, null, s);
        Tensor dq = B.upload(filled(n * w, 9f), n, w);
        B.attentionBackward(dq, B.upload(dOut, n, o), q, out, lse, null, s);
        return new float[][] {B.toFloats(out), B.toFloats(dq)};
    }

    @ParameterizedTest
    @MethodSource("bloomShapes")
    void alibiAttentionBackwardMatchesFiniteDifferences(AttentionShape s) {
        var rng = new SplittableRandom(700 + s.seqLen());
        int n = s.batch() * s.seqLen(), w = s.qkvWidth(), o = s.heads() * s.headDim();
        float[] qkv = gaussian(rng, n * w, 1), r = gaussian(rng, n * o, 1);
        float[] analytic = forwardBackward(qkv, r, s)[1];
        float[] numeric = numericGradient(qkv.clone(), H, x -> {
            Tensor out = B.allocate(F32, n, o);
            B.attentionForward(out, B.allocate(F32, s.batch(), s.heads(), s.seqLen()), B.upload(x, n, w), null, s);
            return weightedSum(B.toFloats(out), r);
        });
        // each kind of column on its own, so that a wrong key or value gradient cannot hide behind the others
        for (String part : new String[] {"q", "k", "v"}) {
            int which = switch (part) {
                case "q" -> 0;
                case "k" -> 1;
                default -> 2;
            };
            float[] a = select(analytic, s, which), f = select(numeric, s, which);
            assertGradient("attention d" + part + " " + s, a, f);
        }
    }

    /** The q (0), k (1) or v (2) columns of every row, in head order. */
    private static float[] select(float[] qkv, AttentionShape s, int which) {
        int n = qkv.length / s.qkvWidth(), heads = which == 0 ? s.heads() : s.kvHeads(), HS = s.headDim();
        float[] out = new float[n * heads * HS];
        for (int h = 0; h < heads; h++) {
            int col = switch (which) {
                case 0 -> s.queryColumn(h);
                case 1 -> s.keyColumn(h);
                default -> s.valueColumn(h);
            };
            float[] part = columns(qkv, n, s.qkvWidth(), col, col + HS);
            for (int r = 0; r < n; r++) {
                System.arraycopy(part, r * HS, out, (r * heads + h) * HS, HS);
            }
        }
        return out;
    }

    @Test
    void cachedAlibiAttentionMatchesTheFullForward() {
        var s = new AttentionShape(1, 9, 3, 3, 4, 0, QkvLayout.PER_HEAD, true);
        var rng = new SplittableRandom(800);
        int T = s.seqLen(), w = s.qkvWidth(), o = s.heads() * s.headDim(), kv = s.kvHeads() * s.headDim();
        float[] qkv = gaussian(rng, T * w, 1);
        float[] full = forwardBackward(qkv, new float[T * o], s)[0];
        Tensor keys = B.allocate(F32, 1, T, kv), values = B.allocate(F32, 1, T, kv);
        int split = 5;
        Tensor first = B.upload(java.util.Arrays.copyOf(qkv, split * w), split, w);
        Tensor rest = B.upload(java.util.Arrays.copyOfRange(qkv, split * w, T * w), T - split, w);
        var firstShape = new AttentionShape(1, split, 3, 3, 4, 0, QkvLayout.PER_HEAD, true);
        var restShape = new AttentionShape(1, T - split, 3, 3, 4, 0, QkvLayout.PER_HEAD, true);
        B.kvCacheAppend(keys, values, first, positions(0, split), firstShape);
        B.kvCacheAppend(keys, values, rest, positions(split, T), restShape);
        Tensor out = B.allocate(F32, T - split, o);
        B.attentionCached(out, rest, keys, values, positions(split, T), restShape);
        float[] got = B.toFloats(out);
        for (int i = 0; i < got.length; i++) {
            assertThat(got[i]).isCloseTo(full[split * o + i], within(1e-5f));
        }
    }

    private static Tensor positions(int from, int to) {
        return B.uploadInts(java.util.stream.IntStream.range(from, to).toArray(), to - from);
    }
}
