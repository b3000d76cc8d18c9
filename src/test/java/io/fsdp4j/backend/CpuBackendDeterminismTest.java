package io.fsdp4j.backend;

import static io.fsdp4j.RandomArrays.gaussian;
import static io.fsdp4j.backend.GradCheck.maxAbsDiff;
import static io.fsdp4j.tensor.DType.F32;
import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ForkJoinPool;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The CPU backend's ops on sizes large enough to run in parallel give bit-identical results on repeated runs,
 * and the same bits when the parallel loops run in a one-thread pool; the parallel paths also agree with naive
 * references.
 */
class CpuBackendDeterminismTest {
    private static final Backend B = CpuBackend.INSTANCE;
    private static final int RUNS = 3;

    /** Runs {@code op} RUNS times in the common pool and once in a one-thread pool; all results bit-identical. */
    private static List<float[]> assertDeterministic(String what, Supplier<List<float[]>> op) {
        List<float[]> first = op.get();
        for (int run = 1; run < RUNS; run++) {
            assertBitIdentical(what + " run " + run, first, op.get());
        }
        try (ForkJoinPool single = new ForkJoinPool(1)) {
            assertBitIdentical(what + " on one thread", first, single.submit(op::get).get());
        } catch (InterruptedException | ExecutionException e) {
            throw new AssertionError(e);
        }
        return first;
    }

    private static void assertBitIdentical(String what, List<float[]> expected, List<float[]> actual) {
        assertThat(actual).hasSameSizeAs(expected);
        for (int t = 0; t < expected.size(); t++) {
            float[] e = expected.get(t), a = actual.get(t);
            assertThat(a).as("%s, output %d size", what, t).hasSameSizeAs(e);
            for (int i = 0; i < e.length; i++) {
                if (Float.floatToRawIntBits(a[i]) != Float.floatToRawIntBits(e[i])) {
                    throw new AssertionError(what + ", output " + t + " element " + i + ": " + a[i] + " vs " + e[i]);
                }
            }
        }
    }

    @Test
    void linearForwardAndBackwardAreBitIdentical() {
        var rng = new SplittableRandom(1);
        int n = 64, in = 128, o = 128;
        float[] x = gaussian(rng, n * in, 1), w = gaussian(rng, o * in, 0.1), bias = gaussian(rng, o, 1);
        float[] dy = gaussian(rng, n * o, 1), dwBase = gaussian(rng, o * in, 1), dbBase = gaussian(rng, o, 1);

        List<float[]> r = assertDeterministic("linear", () -> {
            Tensor xT = B.upload(x, n, in), wT = B.upload(w, o, in);
            Tensor out = B.allocate(F32, n, o), dx = B.allocate(F32, n, in);
            Tensor dw = B.upload(dwBase, o, in), db = B.upload(dbBase, o);
            B.linearForward(out, xT, wT, B.upload(bias, o));
            B.linearBackward(dx, dw, db, B.upload(dy, n, o), xT, wT);
            return List.of(B.toFloats(out), B.toFloats(dx), B.toFloats(dw), B.toFloats(db));
        });

        double[] out = new double[n * o], dx = new double[n * in], dw = new double[o * in], db = new double[o];
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < o; k++) {
                double s = bias[k];
                for (int j = 0; j < in; j++) {
                    s += (double) x[i * in + j] * w[k * in + j];
                    dx[i * in + j] += (double) dy[i * o + k] * w[k * in + j];
                    dw[k * in + j] += (double) dy[i * o + k] * x[i * in + j];
                }
                out[i * o + k] = s;
                db[k] += dy[i * o + k];
            }
        }
        for (int i = 0; i < dw.length; i++) {
            dw[i] += dwBase[i];
        }
        for (int k = 0; k < o; k++) {
            db[k] += dbBase[k];
        }
        assertThat(maxAbsDiff(r.get(0), out)).isLessThan(1e-4);
        assertThat(maxAbsDiff(r.get(1), dx)).isLessThan(1e-4);
        assertThat(maxAbsDiff(r.get(2), dw)).isLessThan(1e-4);
        assertThat(maxAbsDiff(r.get(3), db)).isLessThan(1e-4);
    }

    @Test
    void attentionForwardAndBackwardAreBitIdentical() {
        for (int window : new int[] {0, 8}) {
            var shape = new AttentionShape(2, 32, 4, 2, 16, window);
            var rng = new SplittableRandom(2 + window);
            int n = shape.batch() * shape.seqLen(), w = shape.qkvWidth(), ow = shape.heads() * shape.headDim();
            float[] qkv = gaussian(rng, n * w, 1), dOut = gaussian(rng, n * ow, 1);
            assertDeterministic("attention window " + window, () -> {
                Tensor qkvT = B.upload(qkv, n, w);
                Tensor out = B.allocate(F32, n, ow), lse = B.allocate(F32, shape.batch(), shape.heads(), shape.seqLen());
                Tensor dQkv = B.allocate(F32, n, w);
                B.attentionForward(out, lse, qkvT, null, shape);
                B.attentionBackward(dQkv, B.upload(dOut, n, ow), qkvT, out, lse, null, shape);
                return List.of(B.toFloats(out), B.toFloats(lse), B.toFloats(dQkv));
            });
        }
    }

    @Test
    void normActivationLossAndOptimizerAreBitIdentical() {
        var rng = new SplittableRandom(3);
        int n = 64, c = 256, vocab = 512;
        float[] x = gaussian(rng, n * c, 1), weight = gaussian(rng, c, 1), dy = gaussian(rng, n * c, 1);
        float[] logits = gaussian(rng, n * vocab, 3);
        int[] targets = new int[n];
        for (int i = 0; i < n; i++) {
            targets[i] = i % 5 == 0 ? -100 : rng.nextInt(vocab);
        }
        float[] g = gaussian(rng, n * c, 0.1);
        List<Double> losses = new ArrayList<>();
        assertDeterministic("rmsNorm, swiglu, crossEntropy, adamw", () -> {
            Tensor xT = B.upload(x, n, c), wT = B.upload(weight, c);
            Tensor out = B.allocate(F32, n, c), rstd = B.allocate(F32, n), dx = B.allocate(F32, n, c);
            Tensor dw = B.allocate(F32, c);
            B.rmsNormForward(out, rstd, xT, wT, 1e-6f);
            B.rmsNormBackward(dx, dw, B.upload(dy, n, c), xT, wT, rstd);
            Tensor act = B.allocate(F32, n, c / 2), dGu = B.allocate(F32, n, c);
            B.swigluForward(act, xT);
            B.swigluBackward(dGu, B.upload(dy, n * c).view(0, n, c / 2), xT);
            Tensor z = B.upload(logits, n, vocab), perRow = B.allocate(F32, n);
            losses.add(B.crossEntropy(z, B.uploadInts(targets, n), 1f / n, perRow));
            Tensor p = B.upload(x, n * c), m = B.allocate(F32, n * c), v = B.allocate(F32, n * c);
            for (int step = 1; step <= 2; step++) {
                B.adamw(p, B.upload(g, n * c), m, v, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
            }
            return List.of(B.toFloats(out), B.toFloats(rstd), B.toFloats(dx), B.toFloats(dw), B.toFloats(act),
                    B.toFloats(dGu), B.toFloats(z), B.toFloats(perRow), B.toFloats(p), B.toFloats(m), B.toFloats(v));
        });
        assertThat(losses).hasSize(RUNS + 1).allMatch(l -> Double.doubleToRawLongBits(l)
                == Double.doubleToRawLongBits(losses.getFirst()));
    }
}
