package io.fsdp4j.model;

import static io.fsdp4j.RandomArrays.gaussian;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.DropoutMask;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * LoRA's dropout (PEFT's lora_dropout): an adapter's forward and backward with dropout on its input equal the explicit
 * masked computation, written out here in double from {@link DropoutMask}'s mask: y += s * (m x / (1-p)) A^T B^T,
 * dB = dy^T u, dA = s (dy B)^T (m x / (1-p)), dx += s (dy B) A * m / (1-p). Outside training nothing is dropped.
 */
class LoraDropoutTest {
    private static final CpuBackend B = CpuBackend.INSTANCE;

    private static double[] matmulT(double[] a, double[] b, int n, int k, int m) { // (n,k) x (m,k)^T -> (n,m)
        double[] c = new double[n * m];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < m; j++) {
                double s = 0;
                for (int l = 0; l < k; l++) {
                    s += a[i * k + l] * b[j * k + l];
                }
                c[i * m + j] = s;
            }
        }
        return c;
    }

    private static double[] transpose(double[] a, int rows, int cols) {
        double[] t = new double[a.length];
        for (int i = 0; i < rows; i++) {
            for (int j = 0; j < cols; j++) {
                t[j * rows + i] = a[i * cols + j];
            }
        }
        return t;
    }

    private static double[] doubles(float[] f) {
        double[] d = new double[f.length];
        for (int i = 0; i < f.length; i++) {
            d[i] = f[i];
        }
        return d;
    }

    private static void assertClose(float[] got, double[] want, String what) {
        double scale = Arrays.stream(want).map(Math::abs).max().orElse(1);
        assertThat(got).hasSameSizeAs(want);
        for (int i = 0; i < got.length; i++) {
            assertThat((double) got[i]).as("%s[%d]", what, i).isCloseTo(want[i], within(2e-6 * scale));
        }
    }

    @ParameterizedTest(name = "{0} rows, in {1}, out {2} at row {3} of {4}, rank {5}, p {6}")
    @CsvSource({"6,8,5,0,5,3,0.3", "9,7,4,3,10,2,0.5", "16,12,12,0,12,4,0.1"})
    void forwardAndBackwardEqualTheExplicitMaskedComputation(int n, int in, int out, int row, int width, int r,
                                                             double p) {
        var rng = new SplittableRandom(n * 7L + in);
        float scaling = 1.75f;
        LoraLinear adapter = new LoraLinear(0, (long) r * in, in, out, row, width, r, scaling);
        float[] x = gaussian(rng, n * in, 1), block = gaussian(rng, r * in + out * r, 1);
        float[] y0 = gaussian(rng, n * width, 1), dy = gaussian(rng, n * width, 1);
        long seed = DropoutMask.seed(11, 3, 1, 42), first = 5L * in;
        LoraLinear.Dropout dropout = new LoraLinear.Dropout(p, seed, first);

        // the explicit computation
        int threshold = DropoutMask.threshold(p);
        float keepScale = DropoutMask.scale(p);
        double[] mask = new double[n * in], xd = new double[n * in];
        for (int e = 0; e < n * in; e++) {
            mask[e] = DropoutMask.keeps(seed, first + e, threshold) ? keepScale : 0;
            xd[e] = x[e] * mask[e];
        }
        double[] a = doubles(Arrays.copyOfRange(block, 0, r * in));
        double[] b = doubles(Arrays.copyOfRange(block, r * in, block.length));
        double[] u = matmulT(xd, a, n, in, r);
        for (int i = 0; i < u.length; i++) {
            u[i] *= scaling;
        }
        double[] delta = matmulT(u, b, n, r, out);
        double[] yWant = doubles(y0), dyOut = new double[n * out];
        for (int i = 0; i < n; i++) {
            for (int o = 0; o < out; o++) {
                yWant[i * width + row + o] += delta[i * out + o];
                dyOut[i * out + o] = dy[i * width + row + o];
            }
        }
        double[] du = matmulT(dyOut, transpose(b, out, r), n, out, r); // dy B
        double[] dB = matmulT(transpose(dyOut, n, out), transpose(u, n, r), out, n, r);
        double[] dt = Arrays.stream(du).map(v -> v * scaling).toArray();
        double[] dA = matmulT(transpose(dt, n, r), transpose(xd, n, in), r, n, in);
        double[] dx = matmulT(dt, transpose(a, r, in), n, r, in);
        for (int e = 0; e < dx.length; e++) {
            dx[e] *= mask[e];
        }

        Tensor w = B.upload(block, block.length), xt = B.upload(x, n, in), y = B.upload(y0, n, width);
        adapter.forward(B, w, y, xt, dropout);
        assertClose(B.toFloats(y), yWant, "y");
        Tensor g = B.allocate(DType.F32, block.length), dxt = B.allocate(DType.F32, n, in);
        adapter.backward(B, w, g, 0, dxt, B.upload(dy, n, width), xt, false, dropout);
        float[] grads = B.toFloats(g);
        assertClose(Arrays.copyOfRange(grads, 0, r * in), dA, "dA");
        assertClose(Arrays.copyOfRange(grads, r * in, grads.length), dB, "dB");
        assertClose(B.toFloats(dxt), dx, "dx");

        Tensor yPlain = B.upload(y0, n, width); // and without dropout the output is another
        adapter.forward(B, w, yPlain, xt, null);
        assertThat(B.toFloats(yPlain)).isNotEqualTo(B.toFloats(y));
    }

    /** Outside training (no TokenBatch.Training: evaluation, scoring, generation) an adapter's input is not dropped. */
    @Test
    void outsideTrainingNothingIsDropped() {
        ModelConfig config = Golden.config("qwen2");
        List<String> linears = LoraSpec.linears(config.architecture());
        CausalLM withDropout = CausalLMs.create(config, B, new LoraSpec(4, 2.0, linears, 0.5));
        CausalLM without = CausalLMs.create(config, B, new LoraSpec(4, 2.0, linears));
        var rng = new SplittableRandom(8);
        List<Tensor> params = new ArrayList<>();
        for (UnitLayout u : withDropout.units()) {
            int n = Math.toIntExact(u.numel());
            params.add(B.upload(gaussian(rng, n, 0.05), n));
        }
        int[][] ids = {{1, 5, 9, 2, 7, 3}};
        TokenBatch batch = TokenBatch.of(B, ids, ids);
        double plain = new SingleDeviceModel(without, B, params).loss(batch, null);
        assertThat(new SingleDeviceModel(withDropout, B, params).loss(batch, null)).isEqualTo(plain);
        double training = new SingleDeviceModel(withDropout, B, params).loss(
                batch.inTraining(new TokenBatch.Training(1, 1, 0)), null);
        assertThat(training).as("in training the adapters' input is dropped").isNotEqualTo(plain);
    }
}
