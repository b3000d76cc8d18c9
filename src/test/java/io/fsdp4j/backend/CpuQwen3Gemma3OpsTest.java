package io.fsdp4j.backend;

import static io.fsdp4j.backend.GradCheck.assertGradient;
import static io.fsdp4j.RandomArrays.gaussian;
import static io.fsdp4j.backend.GradCheck.numericGradient;
import static io.fsdp4j.RandomArrays.uniform;
import static io.fsdp4j.backend.GradCheck.weightedSum;
import static io.fsdp4j.tensor.DType.F32;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.tensor.Tensor;
import java.util.SplittableRandom;
import java.util.function.ToDoubleFunction;
import org.junit.jupiter.api.Test;

/**
 * The CPU ops of Qwen3 and Gemma 3. The per-head RMSNorm (q_norm, k_norm): the forward against a naive reference in
 * double, columns outside the named heads untouched, in place equal to out of place, and the backward against
 * central finite differences of L = sum(out * R), accumulating or writing the weight gradient. GeGLU: the forward
 * against gelu(gate) * up, the backward against finite differences.
 */
class CpuQwen3Gemma3OpsTest {
    private static final Backend B = CpuBackend.INSTANCE;
    private static final float EPS = 1e-6f;
    // rows of 2 q heads, 1 k head, 1 v head, each of HS = 6 columns; the k head is normalised (first head 2)
    private static final int N = 5, HS = 6, WIDTH = 4 * HS, FIRST = 2, HEADS = 1;

    @Test
    void forwardNormalisesOnlyTheNamedHeads() {
        var rng = new SplittableRandom(7);
        float[] x = gaussian(rng, N * WIDTH, 2), w = uniform(rng, HS, 0.5, 1.5);
        Tensor out = B.upload(new float[N * WIDTH], N, WIDTH), rstd = B.allocate(F32, N, 2);
        B.headRmsNormForward(out, rstd, B.upload(x, N, WIDTH), B.upload(w, HS), 1, EPS); // heads 1 and 2
        float[] o = B.toFloats(out), r = B.toFloats(rstd);
        for (int n = 0; n < N; n++) {
            for (int h = 0; h < 4; h++) {
                double ss = 0;
                for (int j = 0; j < HS; j++) {
                    ss += (double) x[n * WIDTH + h * HS + j] * x[n * WIDTH + h * HS + j];
                }
                double inv = 1 / Math.sqrt(ss / HS + EPS);
                for (int j = 0; j < HS; j++) {
                    float got = o[n * WIDTH + h * HS + j];
                    if (h == 1 || h == 2) {
                        assertThat(got).isCloseTo((float) (x[n * WIDTH + h * HS + j] * inv * w[j]), within(1e-5f));
                    } else {
                        assertThat(got).as("row %d head %d untouched", n, h).isZero();
                    }
                }
                if (h == 1 || h == 2) {
                    assertThat(r[n * 2 + h - 1]).isCloseTo((float) inv, within(1e-6f * (float) inv));
                }
            }
        }
        Tensor inPlace = B.upload(x, N, WIDTH);
        B.headRmsNormForward(inPlace, B.allocate(F32, N, 2), inPlace, B.upload(w, HS), 1, EPS);
        float[] p = B.toFloats(inPlace);
        for (int i = 0; i < p.length; i++) {
            int h = (i % WIDTH) / HS;
            assertThat(p[i]).isEqualTo(h == 1 || h == 2 ? o[i] : x[i]);
        }
    }

    @Test
    void backwardMatchesFiniteDifferencesInPlaceAndAccumulates() {
        var rng = new SplittableRandom(8);
        float[] x = gaussian(rng, N * WIDTH, 1.5), w = uniform(rng, HS, 0.5, 1.5), r = gaussian(rng, N * WIDTH, 1);
        ToDoubleFunction<float[]> byX = xs -> loss(xs, w, r);
        ToDoubleFunction<float[]> byW = ws -> loss(x, ws, r);
        Tensor rstd = B.allocate(F32, N, HEADS), xT = B.upload(x, N, WIDTH), wT = B.upload(w, HS);
        B.headRmsNormForward(B.allocate(F32, N, WIDTH), rstd, xT, wT, FIRST, EPS);

        Tensor grad = B.upload(r, N, WIDTH); // dOut, becoming dx in place
        Tensor dW = B.upload(new float[] {9, 9, 9, 9, 9, 9}, HS);
        B.headRmsNormBackward(grad, dW, grad, xT, wT, rstd, FIRST, false); // written: the 9s ignored
        float[] dx = B.toFloats(grad), numericDx = numericGradient(x, 1e-2f, byX);
        // columns outside the head pass through: their gradient is dOut, which the in-place backward leaves there
        assertGradient("head rmsnorm dx", dx, numericDx);
        float[] once = B.toFloats(dW).clone();
        assertGradient("head rmsnorm dWeight", once, numericGradient(w, 1e-2f, byW));

        B.headRmsNormBackward(B.allocate(F32, N, WIDTH), dW, B.upload(r, N, WIDTH), xT, wT, rstd, FIRST, true);
        float[] twice = B.toFloats(dW);
        for (int j = 0; j < HS; j++) {
            assertThat(twice[j]).isCloseTo(2 * once[j], within(1e-5f * (1 + Math.abs(once[j]))));
        }
    }

    /** L = sum(out * R) where out is x with head FIRST normalised and every other column passed through. */
    private static double loss(float[] xs, float[] ws, float[] r) {
        Tensor out = B.upload(xs, N, WIDTH);
        B.headRmsNormForward(out, B.allocate(F32, N, HEADS), out, B.upload(ws, HS), FIRST, EPS);
        return weightedSum(B.toFloats(out), r);
    }

    @Test
    void gegluForwardAndBackward() {
        var rng = new SplittableRandom(10);
        int n = 3, f = 5;
        float[] gateUp = gaussian(rng, n * 2 * f, 2), r = gaussian(rng, n * f, 1);
        Tensor out = B.allocate(F32, n, f);
        B.gegluForward(out, B.upload(gateUp, n, 2 * f));
        float[] o = B.toFloats(out);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < f; j++) {
                double g = gateUp[i * 2 * f + j], u = gateUp[i * 2 * f + f + j];
                double gelu = 0.5 * g * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (g + 0.044715 * g * g * g)));
                assertThat(o[i * f + j]).isCloseTo((float) (gelu * u), within(1e-5f));
            }
        }
        ToDoubleFunction<float[]> loss = gu -> {
            Tensor y = B.allocate(F32, n, f);
            B.gegluForward(y, B.upload(gu, n, 2 * f));
            return weightedSum(B.toFloats(y), r);
        };
        Tensor dGateUp = B.allocate(F32, n, 2 * f);
        B.gegluBackward(dGateUp, B.upload(r, n, f), B.upload(gateUp, n, 2 * f));
        assertGradient("geglu dGateUp", B.toFloats(dGateUp), numericGradient(gateUp, 1e-2f, loss));
    }
}
