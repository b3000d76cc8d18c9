package io.fsdp4j.backend.cpu;

import static io.fsdp4j.RandomArrays.uniform;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * RMSNorm's vectorised element loops against the scalar formulas written out, bit for bit (output, rstd, input and
 * weight gradients), at widths that leave a scalar tail or none and at offsets, with 1, 2 and 4 threads.
 */
class CpuNormsTest {
    @Test
    void rmsNormIsTheScalarFormulaBitForBit() {
        SplittableRandom r = new SplittableRandom(7);
        float eps = 1e-5f;
        for (int c : new int[] {1, 7, 8, 19, 64, 70, 128, 130}) {
            int rows = 23, off = 3;
            float[] x = uniform(r, off + rows * c, -3, 3), w = uniform(r, off + c, -2, 2);
            float[] g = uniform(r, off + rows * c, -1, 1);
            float[] dw0 = uniform(r, off + c, -1, 1);
            float[] out = new float[off + rows * c], rstd = new float[off + rows], dx = new float[off + rows * c];
            float[] dw = dw0.clone();
            for (int i = 0; i < rows; i++) {
                double ss = 0;
                for (int j = 0; j < c; j++) {
                    float v = x[off + i * c + j];
                    ss += v * v;
                }
                float inv = (float) (1.0 / Math.sqrt(ss / c + eps));
                rstd[off + i] = inv;
                double dot = 0;
                for (int j = 0; j < c; j++) {
                    out[off + i * c + j] = x[off + i * c + j] * inv * w[off + j];
                    dot += (double) g[off + i * c + j] * w[off + j] * x[off + i * c + j] * inv;
                }
                float mean = (float) (dot / c);
                for (int j = 0; j < c; j++) {
                    float xhat = x[off + i * c + j] * inv;
                    dx[off + i * c + j] = inv * (g[off + i * c + j] * w[off + j] - xhat * mean);
                }
            }
            for (int j = 0; j < c; j++) {
                for (int i = 0; i < rows; i++) {
                    dw[off + j] += g[off + i * c + j] * x[off + i * c + j] * rstd[off + i];
                }
            }
            for (int cores : new int[] {1, 2, 4}) {
                float[] o = new float[off + rows * c], rs = new float[off + rows], d = new float[off + rows * c];
                float[] dWeight = dw0.clone();
                Parallel.withCores(cores, () -> {
                    CpuNorms.rmsForward(o, off, rs, off, x, off, w, off, rows, c, eps);
                    CpuNorms.rmsBackward(d, off, dWeight, off, g, off, x, off, w, off, rs, off, rows, c);
                });
                assertThat(o).as("output, c=%d, %d cores", c, cores).isEqualTo(out);
                assertThat(rs).as("rstd, c=%d", c).isEqualTo(rstd);
                assertThat(d).as("input gradient, c=%d, %d cores", c, cores).isEqualTo(dx);
                assertThat(dWeight).as("weight gradient, c=%d, %d cores", c, cores).isEqualTo(dw);
            }
        }
    }
}
