package io.fsdp4j.backend;

import static io.fsdp4j.backend.GradCheck.assertGradient;
import static io.fsdp4j.backend.GradCheck.columns;
import static io.fsdp4j.backend.GradCheck.filled;
import static io.fsdp4j.RandomArrays.gaussian;
import static io.fsdp4j.backend.GradCheck.maxAbsDiff;
import static io.fsdp4j.backend.GradCheck.minus;
import static io.fsdp4j.backend.GradCheck.numericGradient;
import static io.fsdp4j.backend.GradCheck.relativeError;
import static io.fsdp4j.RandomArrays.uniform;
import static io.fsdp4j.backend.GradCheck.weightedSum;
import static io.fsdp4j.tensor.DType.BF16;
import static io.fsdp4j.tensor.DType.F32;
import static io.fsdp4j.tensor.DType.I32;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.UserError;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.util.SplittableRandom;
import java.util.function.ToDoubleFunction;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every backward op of the CPU backend against central finite differences of L = sum(out * R) for a fixed
 * random R, forwards against naive references, and the memory ops' basics. All inputs are seeded.
 */
class CpuBackendGradientTest {
    private static final Backend B = CpuBackend.INSTANCE;
    private static final float H = 1e-2f;

    // ---- embedding ------------------------------------------------------------------------------------

    @Test
    void embeddingBackwardMatchesFiniteDifferencesAndAccumulates() {
        var rng = new SplittableRandom(11);
        int vocab = 6, c = 4;
        int[] ids = {3, 1, 3, 0, 5, 3, 1}; // 3 three times, 1 twice, 2 and 4 never
        int n = ids.length;
        float[] table = gaussian(rng, vocab * c, 1);
        float[] r = gaussian(rng, n * c, 1);
        Tensor idT = B.uploadInts(ids, n);

        Tensor out = B.allocate(F32, n, c);
        B.embeddingForward(out, idT, B.upload(table, vocab, c));
        float[] o = B.toFloats(out);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < c; j++) {
                assertThat(o[i * c + j]).isEqualTo(table[ids[i] * c + j]);
            }
        }

        ToDoubleFunction<float[]> loss = w -> {
            Tensor y = B.allocate(F32, n, c);
            B.embeddingForward(y, idT, B.upload(w, vocab, c));
            return weightedSum(B.toFloats(y), r);
        };
        Tensor dTable = B.allocate(F32, vocab, c);
        Tensor dOut = B.upload(r, n, c);
        B.embeddingBackward(dTable, idT, dOut);
        float[] once = B.toFloats(dTable);
        assertGradient("embedding dTable", once, numericGradient(table, H, loss));
        for (int j = 0; j < c; j++) { // rows never looked up get nothing
            assertThat(once[2 * c + j]).isZero();
            assertThat(once[4 * c + j]).isZero();
        }

        B.embeddingBackward(dTable, idT, dOut);
        float[] twice = B.toFloats(dTable);
        for (int i = 0; i < once.length; i++) {
            assertThat(twice[i]).isCloseTo(2 * once[i], within(1e-6f * (1 + Math.abs(once[i]))));
        }
    }

    @Test
    void embeddingRejectsIdsOutsideTheVocabulary() {
        Tensor table = B.allocate(F32, 4, 2);
        Tensor out = B.allocate(F32, 1, 2);
        assertThatThrownBy(() -> B.embeddingForward(out, B.uploadInts(new int[] {4}, 1), table))
                .isInstanceOf(UserError.class);
        assertThatThrownBy(() -> B.embeddingForward(out, B.uploadInts(new int[] {-1}, 1), table))
                .isInstanceOf(UserError.class);
    }

    // ---- rms norm -------------------------------------------------------------------------------------

    @ParameterizedTest(name = "rows={0} width={1}")
    @CsvSource({"5,7", "3,70"}) // 70 columns: two chunks in the dWeight reduction
    void rmsNormBackwardMatchesFiniteDifferences(int rows, int c) {
        var rng = new SplittableRandom(100 + c);
        float eps = 1e-5f;
        float[] x = gaussian(rng, rows * c, 1);
        float[] w = uniform(rng, c, 0.5, 1.5);
        float[] r = gaussian(rng, rows * c, 1);

        Tensor out = B.allocate(F32, rows, c), rstd = B.allocate(F32, rows);
        Tensor xT = B.upload(x, rows, c), wT = B.upload(w, c);
        B.rmsNormForward(out, rstd, xT, wT, eps);
        float[] o = B.toFloats(out), rs = B.toFloats(rstd);
        double[] expectOut = new double[rows * c];
        for (int i = 0; i < rows; i++) {
            double ss = 0;
            for (int j = 0; j < c; j++) {
                ss += (double) x[i * c + j] * x[i * c + j];
            }
            double inv = 1 / Math.sqrt(ss / c + eps);
            assertThat((double) rs[i]).isCloseTo(inv, within(1e-6 * inv));
            for (int j = 0; j < c; j++) {
                expectOut[i * c + j] = x[i * c + j] * inv * w[j];
            }
        }
        assertThat(maxAbsDiff(o, expectOut)).isLessThan(1e-5);

        Tensor dx = B.upload(filled(rows * c, 123f), rows, c); // written
        float[] base = gaussian(rng, c, 1);
        Tensor dw = B.upload(base, c); // accumulated
        B.rmsNormBackward(dx, dw, B.upload(r, rows, c), xT, wT, rstd);

        float[] xs = x.clone();
        assertGradient("rmsNorm dx " + rows + "x" + c, B.toFloats(dx), numericGradient(xs, H, xv -> {
            Tensor y = B.allocate(F32, rows, c);
            B.rmsNormForward(y, B.allocate(F32, rows), B.upload(xv, rows, c), wT, eps);
            return weightedSum(B.toFloats(y), r);
        }));
        float[] ws = w.clone();
        assertGradient("rmsNorm dWeight " + rows + "x" + c, minus(B.toFloats(dw), base),
                numericGradient(ws, H, wv -> {
                    Tensor y = B.allocate(F32, rows, c);
                    B.rmsNormForward(y, B.allocate(F32, rows), xT, B.upload(wv, c), eps);
                    return weightedSum(B.toFloats(y), r);
                }));
    }

    // ---- linear ---------------------------------------------------------------------------------------

    @ParameterizedTest(name = "rows={0} bias={1}")
    @CsvSource({"7,true", "7,false", "8,true", "8,false", "1,true", "3,false"})
    void linearBackwardMatchesFiniteDifferences(int rows, boolean withBias) {
        var rng = new SplittableRandom(200 + rows * 2 + (withBias ? 1 : 0));
        int in = 5, o = 6;
        float[] x = gaussian(rng, rows * in, 1);
        float[] w = gaussian(rng, o * in, 1);
        float[] bias = withBias ? gaussian(rng, o, 1) : null;
        float[] r = gaussian(rng, rows * o, 1);
        Tensor xT = B.upload(x, rows, in), wT = B.upload(w, o, in), bT = withBias ? B.upload(bias, o) : null;

        Tensor out = B.upload(filled(rows * o, -7f), rows, o);
        B.linearForward(out, xT, wT, bT);
        double[] expect = new double[rows * o];
        for (int i = 0; i < rows; i++) {
            for (int k = 0; k < o; k++) {
                double s = withBias ? bias[k] : 0;
                for (int j = 0; j < in; j++) {
                    s += (double) x[i * in + j] * w[k * in + j];
                }
                expect[i * o + k] = s;
            }
        }
        assertThat(maxAbsDiff(B.toFloats(out), expect)).isLessThan(1e-5);

        Tensor dOut = B.upload(r, rows, o);
        Tensor dx = B.upload(filled(rows * in, 99f), rows, in);
        float[] wBase = gaussian(rng, o * in, 1), bBase = gaussian(rng, o, 1);
        Tensor dw = B.upload(wBase, o, in), db = withBias ? B.upload(bBase, o) : null;
        B.linearBackward(dx, dw, db, dOut, xT, wT);

        String tag = " rows=" + rows + " bias=" + withBias;
        assertGradient("linear dx" + tag, B.toFloats(dx), numericGradient(x.clone(), H, xv -> {
            Tensor y = B.allocate(F32, rows, o);
            B.linearForward(y, B.upload(xv, rows, in), wT, bT);
            return weightedSum(B.toFloats(y), r);
        }));
        assertGradient("linear dWeight" + tag, minus(B.toFloats(dw), wBase), numericGradient(w.clone(), H, wv -> {
            Tensor y = B.allocate(F32, rows, o);
            B.linearForward(y, xT, B.upload(wv, o, in), bT);
            return weightedSum(B.toFloats(y), r);
        }));
        if (withBias) {
            assertGradient("linear dBias" + tag, minus(B.toFloats(db), bBase), numericGradient(bias.clone(), H, bv -> {
                Tensor y = B.allocate(F32, rows, o);
                B.linearForward(y, xT, wT, B.upload(bv, o));
                return weightedSum(B.toFloats(y), r);
            }));
        }

        // dx == null: no input gradient, the same parameter gradients
        Tensor dw2 = B.upload(wBase, o, in), db2 = withBias ? B.upload(bBase, o) : null;
        B.linearBackward(null, dw2, db2, dOut, xT, wT);
        assertThat(B.toFloats(dw2)).containsExactly(B.toFloats(dw));
        if (withBias) {
            assertThat(B.toFloats(db2)).containsExactly(B.toFloats(db));
        }
    }

    // ---- rope -----------------------------------------------------------------------------------------

    @Test
    void ropeBackwardMatchesFiniteDifferencesAndInvertsForward() {
        var rng = new SplittableRandom(300);
        int rows = 5, heads = 3, rotated = 2, hs = 8, half = hs / 2, maxPos = 10, width = heads * hs;
        float[] cos = new float[maxPos * half], sin = new float[maxPos * half];
        for (int p = 0; p < maxPos; p++) {
            for (int j = 0; j < half; j++) {
                double angle = p * Math.pow(10000, -2.0 * j / hs);
                cos[p * half + j] = (float) Math.cos(angle);
                sin[p * half + j] = (float) Math.sin(angle);
            }
        }
        Tensor cosT = B.upload(cos, maxPos, half), sinT = B.upload(sin, maxPos, half);
        int[] positions = {0, 3, 9, 3, 7};
        Tensor posT = B.uploadInts(positions, rows);
        float[] x = gaussian(rng, rows * width, 1);
        float[] r = gaussian(rng, rows * width, 1);

        Tensor xT = B.upload(x, rows, width);
        B.ropeForward(xT, rotated, posT, cosT, sinT);
        float[] y = B.toFloats(xT);
        double[] expect = new double[rows * width];
        for (int i = 0; i < rows; i++) {
            for (int h = 0; h < heads; h++) {
                for (int j = 0; j < half; j++) {
                    int a = i * width + h * hs + j, b = a + half;
                    if (h < rotated) {
                        double cs = cos[positions[i] * half + j], sn = sin[positions[i] * half + j];
                        expect[a] = x[a] * cs - x[b] * sn;
                        expect[b] = x[b] * cs + x[a] * sn;
                    } else {
                        expect[a] = x[a];
                        expect[b] = x[b];
                    }
                }
            }
        }
        assertThat(maxAbsDiff(y, expect)).isLessThan(1e-6);

        // the inverse: backward undoes forward
        B.ropeBackward(xT, rotated, posT, cosT, sinT);
        float[] back = B.toFloats(xT);
        for (int i = 0; i < x.length; i++) {
            assertThat(back[i]).isCloseTo(x[i], within(1e-6f));
        }

        Tensor dx = B.upload(r, rows, width);
        B.ropeBackward(dx, rotated, posT, cosT, sinT);
        assertGradient("rope dx", B.toFloats(dx), numericGradient(x.clone(), H, xv -> {
            Tensor t = B.upload(xv, rows, width);
            B.ropeForward(t, rotated, posT, cosT, sinT);
            return weightedSum(B.toFloats(t), r);
        }));
    }

    // ---- attention ------------------------------------------------------------------------------------

    static Stream<Arguments> attentionShapes() {
        return Stream.of(
                Arguments.of(new AttentionShape(2, 6, 4, 2, 8, 0)),
                Arguments.of(new AttentionShape(2, 6, 4, 2, 8, 3)),
                Arguments.of(new AttentionShape(2, 6, 4, 4, 8, 0)),
                Arguments.of(new AttentionShape(2, 6, 4, 1, 8, 0)),
                Arguments.of(new AttentionShape(2, 6, 4, 1, 8, 3)),
                Arguments.of(new AttentionShape(1, 5, 2, 2, 6, 2)),
                // Gemma 2: its own scale and scores soft-capped (a cap of the order of the scores, so that it bends them)
                Arguments.of(new AttentionShape(2, 6, 4, 2, 8, 3).withScores(0.6f, 0.7f)),
                Arguments.of(new AttentionShape(1, 5, 2, 1, 6, 0).withScores(0.25f, 1.5f)));
    }

    static Stream<Arguments> attentionForwardShapes() {
        return Stream.concat(attentionShapes(), Stream.of(
                Arguments.of(new AttentionShape(2, 6, 4, 2, 8, 1)), // only itself
                Arguments.of(new AttentionShape(2, 6, 4, 2, 8, 6)), // window = T: no restriction
                Arguments.of(new AttentionShape(1, 7, 3, 1, 5, 4))));
    }

    private static long seed(AttentionShape s) {
        return 400 + 1000L * s.kvHeads() + 100L * s.slidingWindow() + 10L * s.seqLen() + s.headDim()
                + (long) (1000 * s.softcap());
    }

    private record AttentionResult(float[] out, float[] lse) {}

    private static AttentionResult attention(float[] qkv, AttentionShape s) {
        int n = s.batch() * s.seqLen();
        Tensor out = B.allocate(F32, n, s.heads() * s.headDim());
        Tensor lse = B.allocate(F32, s.batch(), s.heads(), s.seqLen());
        B.attentionForward(out, lse, B.upload(qkv, n, s.qkvWidth()), null, s);
        return new AttentionResult(B.toFloats(out), B.toFloats(lse));
    }

    @ParameterizedTest
    @MethodSource("attentionForwardShapes")
    void attentionForwardMatchesNaiveReference(AttentionShape s) {
        var rng = new SplittableRandom(seed(s));
        int T = s.seqLen(), NH = s.heads(), NKV = s.kvHeads(), HS = s.headDim(), w = s.qkvWidth();
        int n = s.batch() * T;
        float[] qkv = gaussian(rng, n * w, 1);
        AttentionResult got = attention(qkv, s);

        double scale = s.scale(), cap = s.softcap();
        double[] out = new double[n * NH * HS], lse = new double[s.batch() * NH * T];
        for (int b = 0; b < s.batch(); b++) {
            for (int h = 0; h < NH; h++) {
                int kvh = h / (NH / NKV);
                for (int t = 0; t < T; t++) {
                    double[] scores = new double[T];
                    boolean[] allowed = new boolean[T];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int k = 0; k < T; k++) {
                        allowed[k] = k <= t && (s.slidingWindow() == 0 || t - k < s.slidingWindow());
                        if (!allowed[k]) {
                            continue;
                        }
                        double dot = 0;
                        for (int d = 0; d < HS; d++) {
                            dot += (double) qkv[(b * T + t) * w + h * HS + d] * qkv[(b * T + k) * w + (NH + kvh) * HS + d];
                        }
                        scores[k] = cap > 0 ? cap * Math.tanh(dot * scale / cap) : dot * scale;
                        max = Math.max(max, scores[k]);
                    }
                    double sum = 0, sumExp = 0;
                    for (int k = 0; k < T; k++) {
                        if (allowed[k]) {
                            sum += Math.exp(scores[k] - max);
                            sumExp += Math.exp(scores[k]);
                        }
                    }
                    lse[(b * NH + h) * T + t] = Math.log(sumExp);
                    for (int k = 0; k < T; k++) {
                        if (allowed[k]) {
                            double p = Math.exp(scores[k] - max) / sum;
                            for (int d = 0; d < HS; d++) {
                                out[(b * T + t) * NH * HS + h * HS + d] +=
                                        p * qkv[(b * T + k) * w + (NH + NKV + kvh) * HS + d];
                            }
                        }
                    }
                }
            }
        }
        assertThat(maxAbsDiff(got.out(), out)).as("attention out vs naive reference").isLessThan(1e-5);
        assertThat(maxAbsDiff(got.lse(), lse)).as("lse vs log(sum(exp(scores)))").isLessThan(1e-5);
    }

    @ParameterizedTest
    @MethodSource("attentionShapes")
    void attentionBackwardMatchesFiniteDifferences(AttentionShape s) {
        var rng = new SplittableRandom(seed(s) + 1);
        int n = s.batch() * s.seqLen(), w = s.qkvWidth(), ow = s.heads() * s.headDim();
        float[] qkv = gaussian(rng, n * w, 1);
        float[] r = gaussian(rng, n * ow, 1);

        Tensor qkvT = B.upload(qkv, n, w);
        Tensor out = B.allocate(F32, n, ow), lse = B.allocate(F32, s.batch(), s.heads(), s.seqLen());
        B.attentionForward(out, lse, qkvT, null, s);
        Tensor dQkv = B.upload(filled(n * w, 55f), n, w); // written, not accumulated
        B.attentionBackward(dQkv, B.upload(r, n, ow), qkvT, out, lse, null, s);
        float[] analytic = B.toFloats(dQkv);
        float[] numeric = numericGradient(qkv.clone(), H, x -> weightedSum(attention(x, s).out(), r));

        int qEnd = s.heads() * s.headDim(), kEnd = qEnd + s.kvHeads() * s.headDim();
        assertGradient("attention dq " + s, columns(analytic, n, w, 0, qEnd), columns(numeric, n, w, 0, qEnd));
        assertGradient("attention dk " + s, columns(analytic, n, w, qEnd, kEnd), columns(numeric, n, w, qEnd, kEnd));
        assertGradient("attention dv " + s, columns(analytic, n, w, kEnd, w), columns(numeric, n, w, kEnd, w));
    }

    // ---- swiglu ---------------------------------------------------------------------------------------

    @Test
    void swigluBackwardMatchesFiniteDifferences() {
        var rng = new SplittableRandom(500);
        int rows = 4, f = 5;
        float[] gu = gaussian(rng, rows * 2 * f, 2);
        float[] r = gaussian(rng, rows * f, 1);
        Tensor out = B.allocate(F32, rows, f);
        B.swigluForward(out, B.upload(gu, rows, 2 * f));
        double[] expect = new double[rows * f];
        for (int i = 0; i < rows; i++) {
            for (int j = 0; j < f; j++) {
                double g = gu[i * 2 * f + j], u = gu[i * 2 * f + f + j];
                expect[i * f + j] = g / (1 + Math.exp(-g)) * u;
            }
        }
        assertThat(maxAbsDiff(B.toFloats(out), expect)).isLessThan(1e-5);

        Tensor d = B.upload(filled(rows * 2 * f, 31f), rows, 2 * f);
        B.swigluBackward(d, B.upload(r, rows, f), B.upload(gu, rows, 2 * f));
        float[] analytic = B.toFloats(d);
        float[] numeric = numericGradient(gu.clone(), H, x -> {
            Tensor y = B.allocate(F32, rows, f);
            B.swigluForward(y, B.upload(x, rows, 2 * f));
            return weightedSum(B.toFloats(y), r);
        });
        assertGradient("swiglu dGate", columns(analytic, rows, 2 * f, 0, f), columns(numeric, rows, 2 * f, 0, f));
        assertGradient("swiglu dUp", columns(analytic, rows, 2 * f, f, 2 * f), columns(numeric, rows, 2 * f, f, 2 * f));
    }

    // ---- cross entropy --------------------------------------------------------------------------------

    @Test
    void crossEntropyGradientLossesAndIgnoredRows() {
        var rng = new SplittableRandom(600);
        int rows = 6, vocab = 7;
        int[] targets = {2, -100, 6, 0, -100, 3};
        int count = 4;
        float gradScale = 1f / count;
        float[] z = gaussian(rng, rows * vocab, 2);
        Tensor tg = B.uploadInts(targets, rows);

        // naive log-softmax
        double[] expectLoss = new double[rows];
        double expectSum = 0;
        for (int i = 0; i < rows; i++) {
            if (targets[i] == -100) {
                continue;
            }
            double sum = 0;
            for (int j = 0; j < vocab; j++) {
                sum += Math.exp(z[i * vocab + j]);
            }
            expectLoss[i] = Math.log(sum) - z[i * vocab + targets[i]];
            expectSum += expectLoss[i];
        }

        // gradScale 0: losses only, logits untouched
        Tensor logits0 = B.upload(z, rows, vocab);
        Tensor perRow0 = B.upload(filled(rows, 9f), rows);
        double total0 = B.crossEntropy(logits0, tg, 0f, perRow0);
        assertThat(total0).isCloseTo(expectSum, within(1e-5));
        assertThat(B.toFloats(logits0)).containsExactly(z);
        assertThat(maxAbsDiff(B.toFloats(perRow0), expectLoss)).isLessThan(1e-5);

        Tensor logits = B.upload(z, rows, vocab);
        Tensor perRow = B.upload(filled(rows, 9f), rows);
        double total = B.crossEntropy(logits, tg, gradScale, perRow);
        assertThat(total).isCloseTo(expectSum, within(1e-5));
        float[] perRowValues = B.toFloats(perRow);
        assertThat(maxAbsDiff(perRowValues, expectLoss)).isLessThan(1e-5);
        assertThat(perRowValues[1]).isZero();
        assertThat(perRowValues[4]).isZero();
        assertThat(B.crossEntropy(B.upload(z, rows, vocab), tg, gradScale, null)).isEqualTo(total);

        float[] analytic = B.toFloats(logits);
        for (int j = 0; j < vocab; j++) {
            assertThat(analytic[vocab + j]).isZero();
            assertThat(analytic[4 * vocab + j]).isZero();
        }
        float[] numeric = numericGradient(z.clone(), H,
                x -> B.crossEntropy(B.upload(x, rows, vocab), tg, 0f, null) * gradScale);
        assertGradient("crossEntropy dLogits", analytic, numeric);
        // each counted row's gradient sums to 0 (softmax minus one-hot, scaled)
        for (int i = 0; i < rows; i++) {
            double s = 0;
            for (int j = 0; j < vocab; j++) {
                s += analytic[i * vocab + j];
            }
            assertThat(s).isCloseTo(0, within(1e-6));
        }
    }

    @Test
    void crossEntropyRejectsTargetsOutsideTheVocabulary() {
        int vocab = 5;
        for (int bad : new int[] {vocab, 17, -1, -99}) {
            Tensor logits = B.upload(new float[2 * vocab], 2, vocab);
            assertThatThrownBy(() -> B.crossEntropy(logits, B.uploadInts(new int[] {1, bad}, 2), 0.5f, null))
                    .as("target %d", bad)
                    .isInstanceOf(UserError.class);
        }
    }

    // ---- adamw ----------------------------------------------------------------------------------------

    /** PyTorch's AdamW in double, in place on the arrays. */
    private static void referenceAdamw(double[] p, double[] g, double[] m, double[] v, double lr, double b1,
                                       double b2, double eps, double wd, long step) {
        double bc1 = 1 - Math.pow(b1, step), bc2 = 1 - Math.pow(b2, step);
        for (int i = 0; i < p.length; i++) {
            p[i] *= 1 - lr * wd;
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            p[i] -= lr / bc1 * m[i] / (Math.sqrt(v[i]) / Math.sqrt(bc2) + eps);
        }
    }

    private static double[] widen(float[] a) {
        double[] d = new double[a.length];
        for (int i = 0; i < a.length; i++) {
            d[i] = a[i];
        }
        return d;
    }

    private static double relErr(float[] a, double[] e) {
        double d = 0, n = 0;
        for (int i = 0; i < a.length; i++) {
            d += (a[i] - e[i]) * (a[i] - e[i]);
            n += e[i] * e[i];
        }
        return Math.sqrt(d / n);
    }

    @ParameterizedTest(name = "wd={0} eps={1} step={2}")
    @CsvSource({"0,1e-8,1", "0,1e-8,5", "0.1,1e-8,1", "0.1,1e-8,5", "0.1,1e-3,5"})
    void adamwMatchesPyTorchFormula(float wd, float eps, long step) {
        var rng = new SplittableRandom(700 + step * 10 + (wd > 0 ? 1 : 0) + (eps > 1e-6f ? 2 : 0));
        int n = 50;
        float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f;
        float[] p = gaussian(rng, n, 1);
        float[] g = gaussian(rng, n, 0.01);
        float[] m = step == 1 ? new float[n] : gaussian(rng, n, 0.01);
        float[] v = step == 1 ? new float[n] : uniform(rng, n, 1e-6, 1e-4);

        Tensor pT = B.upload(p, n), mT = B.upload(m, n), vT = B.upload(v, n);
        B.adamw(pT, B.upload(g, n), mT, vT, lr, b1, b2, eps, wd, step);

        double[] ep = widen(p), em = widen(m), ev = widen(v);
        referenceAdamw(ep, widen(g), em, ev, lr, b1, b2, eps, wd, step);
        float[] gotP = B.toFloats(pT);
        assertThat(relErr(gotP, ep)).as("param").isLessThan(1e-6);
        assertThat(relErr(B.toFloats(mT), em)).as("m").isLessThan(1e-6);
        assertThat(relErr(B.toFloats(vT), ev)).as("v").isLessThan(1e-6);
        // the step moved the parameters well beyond the tolerance (so the comparison means something)
        assertThat(relErr(p, ep)).isGreaterThan(1e-4);

        // wrong formulas would have failed: no bias correction, decay after the update, eps inside the sqrt term
        double[] noBias = widen(p), m2 = widen(m), v2 = widen(v);
        referenceAdamw(noBias, widen(g), m2, v2, lr, b1, b2, eps, wd, 1_000_000);
        assertThat(relErr(gotP, noBias)).isGreaterThan(1e-6);
        if (wd > 0) {
            double[] noDecay = widen(p);
            referenceAdamw(noDecay, widen(g), widen(m), widen(v), lr, b1, b2, eps, 0, step);
            assertThat(relErr(gotP, noDecay)).isGreaterThan(1e-6);
        }
        if (eps > 1e-6f) {
            double[] epsInside = widen(p), m3 = widen(m), v3 = widen(v);
            double bc1 = 1 - Math.pow(b1, step), bc2 = 1 - Math.pow(b2, step);
            for (int i = 0; i < n; i++) {
                epsInside[i] *= 1 - lr * wd;
                m3[i] = b1 * m3[i] + (1 - b1) * g[i];
                v3[i] = b2 * v3[i] + (1 - b2) * g[i] * g[i];
                epsInside[i] -= lr / bc1 * m3[i] / ((Math.sqrt(v3[i]) + eps) / Math.sqrt(bc2));
            }
            assertThat(relErr(gotP, epsInside)).isGreaterThan(1e-6);
        }
    }

    @Test
    void adamwFiveStepsFromZeroStateTrackTheReference() {
        var rng = new SplittableRandom(777);
        int n = 40;
        float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
        float[] p = gaussian(rng, n, 1);
        Tensor pT = B.upload(p, n), mT = B.allocate(F32, n), vT = B.allocate(F32, n);
        double[] ep = widen(p), em = new double[n], ev = new double[n];
        for (long step = 1; step <= 5; step++) {
            float[] g = gaussian(rng, n, 0.1);
            B.adamw(pT, B.upload(g, n), mT, vT, lr, b1, b2, eps, wd, step);
            referenceAdamw(ep, widen(g), em, ev, lr, b1, b2, eps, wd, step);
            assertThat(relErr(B.toFloats(pT), ep)).as("param after step %d", step).isLessThan(1e-6);
            assertThat(relErr(B.toFloats(mT), em)).as("m after step %d", step).isLessThan(1e-6);
            assertThat(relErr(B.toFloats(vT), ev)).as("v after step %d", step).isLessThan(1e-6);
        }
    }

    // ---- memory ops -----------------------------------------------------------------------------------

    @Test
    void copyToBf16RoundsToNearestEven() {
        float one = 1f, half = 0x1p-8f, ulp = 0x1p-7f; // bf16 has 7 fraction bits: ulp(1) = 2^-7
        float[] src = {
            one + half,              // tie between 1 and 1+ulp: to even, 1
            one + 3 * half,          // tie between 1+ulp and 1+2ulp: to even, 1+2ulp
            one + 5 * half,          // tie between 1+2ulp and 1+3ulp: to even, 1+2ulp
            one + half + 0x1p-16f,   // just above a tie: up
            one + half - 0x1p-16f,   // just below a tie: down
            -(one + 3 * half),       // sign is kept
            Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 0f, -0f, Float.MAX_VALUE, 3.140625f,
        };
        float[] expect = {
            one, one + 2 * ulp, one + 2 * ulp, one + ulp, one, -(one + 2 * ulp),
            Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 0f, -0f, Float.POSITIVE_INFINITY, 3.140625f,
        };
        Tensor bf = B.allocate(BF16, src.length);
        B.copy(B.upload(src, src.length), bf);
        float[] got = B.toFloats(bf);
        for (int i = 0; i < src.length; i++) {
            assertThat(Float.floatToRawIntBits(got[i])).as("bf16(%s)", src[i])
                    .isEqualTo(Float.floatToRawIntBits(expect[i]));
        }
        Tensor nan = B.allocate(BF16, 1);
        B.copy(B.upload(new float[] {Float.NaN}, 1), nan);
        assertThat(B.toFloats(nan)[0]).isNaN();

        // bf16 -> f32 is exact, bf16 -> bf16 and f32 -> f32 copy bits
        Tensor f = B.allocate(F32, src.length);
        B.copy(bf, f);
        assertThat(B.toFloats(f)).containsExactly(got);
        Tensor bf2 = B.allocate(BF16, src.length);
        B.copy(bf, bf2);
        assertThat(CpuBackend.bf16(bf2)).containsExactly(CpuBackend.bf16(bf));
        Tensor f2 = B.allocate(F32, src.length);
        B.copy(B.upload(src, src.length), f2);
        assertThat(B.toFloats(f2)).containsExactly(src);
        Tensor ints = B.allocate(I32, 3);
        B.copy(B.uploadInts(new int[] {4, -5, 6}, 3), ints);
        assertThat(B.toInts(ints)).containsExactly(4, -5, 6);

        assertThatThrownBy(() -> B.copy(B.allocate(F32, 3), B.allocate(F32, 4)))
                .isInstanceOf(IllegalArgumentException.class);
        assertThat(Half.roundBf16(one + 3 * half)).isEqualTo(one + 2 * ulp);
    }

    @Test
    void addScaleFillAndSumOfSquares() {
        // views at offsets into larger storages
        Tensor big = B.upload(new float[] {100, 1, 2, 3, 4, 200}, 6);
        Tensor dst = big.view(1, 4);
        Tensor srcBig = B.upload(new float[] {-1, -1, 0.5f, 0.25f, -2, 8}, 6);
        Tensor src = srcBig.view(2, 4);
        B.add(dst, src);
        assertThat(B.toFloats(big)).containsExactly(100, 1.5f, 2.25f, 1, 12, 200);
        B.scale(dst, -2f);
        assertThat(B.toFloats(big)).containsExactly(100, -3f, -4.5f, -2, -24, 200);
        assertThat(B.sumOfSquares(dst)).isEqualTo(9 + 20.25 + 4 + 576);
        B.fill(dst, 0.5f);
        assertThat(B.toFloats(big)).containsExactly(100, 0.5f, 0.5f, 0.5f, 0.5f, 200);

        // sumOfSquares accumulates in double: 2^48 + 1 is not representable in fp32
        assertThat(B.sumOfSquares(B.upload(new float[] {0x1p24f, 1f}, 2))).isEqualTo(0x1p48 + 1);
        Tensor bfSq = B.allocate(BF16, 3);
        B.copy(B.upload(new float[] {1, 2, 3}, 3), bfSq);
        assertThat(B.sumOfSquares(bfSq)).isEqualTo(14.0);

        // add into bf16 rounds the fp32 sum to nearest even
        Tensor bfDst = B.allocate(BF16, 3);
        B.fill(bfDst, 1f);
        B.add(bfDst, B.upload(new float[] {0x1p-8f, 3 * 0x1p-8f, 0x1p-8f + 0x1p-16f}, 3));
        assertThat(B.toFloats(bfDst)).containsExactly(1f, 1f + 2 * 0x1p-7f, 1f + 0x1p-7f);
        // bf16 source into an fp32 destination
        Tensor fDst = B.upload(new float[] {1, 2, 3}, 3);
        B.add(fDst, bfSq);
        assertThat(B.toFloats(fDst)).containsExactly(2, 4, 6);

        assertThatThrownBy(() -> B.add(B.allocate(F32, 2), B.allocate(F32, 3)))
                .isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void opsRespectViewOffsets() {
        var rng = new SplittableRandom(900);
        int rows = 7, in = 5, o = 6;
        float[] x = gaussian(rng, rows * in, 1), w = gaussian(rng, o * in, 1), bias = gaussian(rng, o, 1);
        float[] dy = gaussian(rng, rows * o, 1);

        Tensor out = B.allocate(F32, rows, o), dx = B.allocate(F32, rows, in);
        Tensor dw = B.allocate(F32, o, in), db = B.allocate(F32, o);
        Tensor xT = B.upload(x, rows, in), wT = B.upload(w, o, in), bT = B.upload(bias, o), dyT = B.upload(dy, rows, o);
        B.linearForward(out, xT, wT, bT);
        B.linearBackward(dx, dw, db, dyT, xT, wT);

        Tensor outV = offsetView(rows * o, 3, rows, o), dxV = offsetView(rows * in, 5, rows, in);
        Tensor dwV = offsetView(o * in, 2, o, in), dbV = offsetView(o, 9, o);
        Tensor xV = offsetCopy(x, 4, rows, in), wV = offsetCopy(w, 1, o, in), bV = offsetCopy(bias, 6, o);
        Tensor dyV = offsetCopy(dy, 8, rows, o);
        B.linearForward(outV, xV, wV, bV);
        B.linearBackward(dxV, dwV, dbV, dyV, xV, wV);
        assertThat(B.toFloats(outV)).containsExactly(B.toFloats(out));
        assertThat(B.toFloats(dxV)).containsExactly(B.toFloats(dx));
        assertThat(B.toFloats(dwV)).containsExactly(B.toFloats(dw));
        assertThat(B.toFloats(dbV)).containsExactly(B.toFloats(db));

        Tensor nOut = B.allocate(F32, rows, in), rstd = B.allocate(F32, rows), ndx = B.allocate(F32, rows, in);
        float[] nwv = java.util.Arrays.copyOf(bias, in), ndy = java.util.Arrays.copyOf(dy, rows * in);
        Tensor ndw = B.allocate(F32, in), nw = B.upload(nwv, in);
        B.rmsNormForward(nOut, rstd, xT, nw, 1e-5f);
        B.rmsNormBackward(ndx, ndw, B.upload(ndy, rows, in), xT, nw, rstd);
        Tensor nOutV = offsetView(rows * in, 2, rows, in), rstdV = offsetView(rows, 3, rows);
        Tensor ndxV = offsetView(rows * in, 1, rows, in), ndwV = offsetView(in, 4, in);
        Tensor nwV = offsetCopy(nwv, 5, in);
        B.rmsNormForward(nOutV, rstdV, xV, nwV, 1e-5f);
        B.rmsNormBackward(ndxV, ndwV, offsetCopy(ndy, 7, rows, in), xV, nwV, rstdV);
        assertThat(B.toFloats(nOutV)).containsExactly(B.toFloats(nOut));
        assertThat(B.toFloats(rstdV)).containsExactly(B.toFloats(rstd));
        assertThat(B.toFloats(ndxV)).containsExactly(B.toFloats(ndx));
        assertThat(B.toFloats(ndwV)).containsExactly(B.toFloats(ndw));

        float[] g = gaussian(rng, 10, 0.1);
        Tensor p = B.upload(x, rows * in).view(0, 10), m = B.allocate(F32, 10), v = B.allocate(F32, 10);
        B.adamw(p, B.upload(g, 10), m, v, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1);
        Tensor pV = offsetCopy(java.util.Arrays.copyOf(x, 10), 3, 10), mV = offsetView(10, 2, 10);
        Tensor vV = offsetView(10, 6, 10);
        B.adamw(pV, offsetCopy(g, 1, 10), mV, vV, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1);
        assertThat(B.toFloats(pV)).containsExactly(B.toFloats(p));
        assertThat(B.toFloats(mV)).containsExactly(B.toFloats(m));
        assertThat(B.toFloats(vV)).containsExactly(B.toFloats(v));
    }

    @Test
    void adamwWithAGradientScaleEqualsScalingTheGradientFirst() {
        SplittableRandom rng = new SplittableRandom(41);
        int n = 1000;
        float[] x = gaussian(rng, n, 1), g = gaussian(rng, n, 0.3);
        float clip = 0.3718f;
        Tensor scaled = B.upload(g, n);
        B.scale(scaled, clip); // what clipping did before: a pass over the gradient
        Tensor p1 = B.upload(x, n), m1 = B.allocate(F32, n), v1 = B.allocate(F32, n);
        Tensor p2 = B.upload(x, n), m2 = B.allocate(F32, n), v2 = B.allocate(F32, n);
        Tensor grad = B.upload(g, n);
        for (int step = 1; step <= 3; step++) {
            B.adamw(p1, scaled, m1, v1, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
            B.adamw(p2, grad, m2, v2, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, clip);
        }
        assertThat(B.toFloats(p2)).containsExactly(B.toFloats(p1));
        assertThat(B.toFloats(m2)).containsExactly(B.toFloats(m1));
        assertThat(B.toFloats(v2)).containsExactly(B.toFloats(v1));
        assertThat(B.toFloats(grad)).as("the gradient is left as it was").containsExactly(g);
    }

    /** A zeroed view at {@code offset} into a larger storage whose other elements are NaN. */
    private static Tensor offsetView(int n, int offset, int... shape) {
        float[] storage = filled(offset + n + 3, Float.NaN);
        java.util.Arrays.fill(storage, offset, offset + n, 0f);
        return B.upload(storage, storage.length).view(offset, shape);
    }

    private static Tensor offsetCopy(float[] values, int offset, int... shape) {
        float[] storage = filled(offset + values.length + 3, Float.NaN);
        System.arraycopy(values, 0, storage, offset, values.length);
        return B.upload(storage, storage.length).view(offset, shape);
    }

    @Test
    void checkerRejectsWrongGradients() {
        // the criterion itself: a gradient off by 10% fails, one within 0.1% passes
        float[] f = {1, -2, 3, 0.5f};
        float[] off10 = {1.1f, -2.2f, 3.3f, 0.55f};
        float[] off01 = {1.001f, -2.002f, 3.003f, 0.5005f};
        assertThat(relativeError(off10, f)).isGreaterThan(GradCheck.TOLERANCE);
        assertThat(relativeError(off01, f)).isLessThan(GradCheck.TOLERANCE);
    }
}
