package io.fsdp4j.backend.cpu;

/**
 * Matrix products of a linear layer in fp32 on plain arrays, written as row updates (y += a * w) that the
 * JIT vectorises. Weights are (O,I) as in Hugging Face checkpoints. Four rows are updated per pass so that
 * each loaded weight row serves four outputs.
 */
public final class CpuMatmul {
    private CpuMatmul() {}

    /** y (N,O) = x (N,I) @ w (O,I)^T + bias (O, may be null). */
    public static void forward(float[] y, int yo, float[] x, int xo, float[] w, int wo, float[] bias, int bo,
                               int n, int in, int out) {
        float[] wt = new float[in * out]; // (I,O): rows of the transposed weight are contiguous
        Parallel.forEach(out, in, o -> {
            for (int i = 0; i < in; i++) {
                wt[i * out + o] = w[wo + o * in + i];
            }
        });
        int blocks = (n + 3) / 4;
        Parallel.forEach(blocks, 4L * in * out, blk -> {
            int n0 = blk * 4;
            int rows = Math.min(4, n - n0);
            for (int r = 0; r < rows; r++) {
                int yr = yo + (n0 + r) * out;
                if (bias != null) {
                    System.arraycopy(bias, bo, y, yr, out);
                } else {
                    java.util.Arrays.fill(y, yr, yr + out, 0f);
                }
            }
            if (rows == 4) {
                int y0 = yo + n0 * out, y1 = y0 + out, y2 = y1 + out, y3 = y2 + out;
                int x0 = xo + n0 * in, x1 = x0 + in, x2 = x1 + in, x3 = x2 + in;
                for (int i = 0; i < in; i++) {
                    float a0 = x[x0 + i], a1 = x[x1 + i], a2 = x[x2 + i], a3 = x[x3 + i];
                    int wr = i * out;
                    for (int o = 0; o < out; o++) {
                        float wv = wt[wr + o];
                        y[y0 + o] += a0 * wv;
                        y[y1 + o] += a1 * wv;
                        y[y2 + o] += a2 * wv;
                        y[y3 + o] += a3 * wv;
                    }
                }
            } else {
                for (int r = 0; r < rows; r++) {
                    int yr = yo + (n0 + r) * out;
                    int xr = xo + (n0 + r) * in;
                    for (int i = 0; i < in; i++) {
                        axpy(y, yr, x[xr + i], wt, i * out, out);
                    }
                }
            }
        });
    }

    /** dx (N,I) = dy (N,O) @ w (O,I). */
    public static void backwardInput(float[] dx, int dxo, float[] dy, int dyo, float[] w, int wo,
                                     int n, int in, int out) {
        Parallel.forEach(n, (long) in * out, r -> {
            int dxr = dxo + r * in;
            java.util.Arrays.fill(dx, dxr, dxr + in, 0f);
            int dyr = dyo + r * out;
            for (int o = 0; o < out; o++) {
                axpy(dx, dxr, dy[dyr + o], w, wo + o * in, in);
            }
        });
    }

    /** dw (O,I) += dy (N,O)^T @ x (N,I) ; dBias (O) += column sums of dy, if dBias is not null. */
    public static void backwardWeight(float[] dw, int dwo, float[] dBias, int dbo, float[] dy, int dyo,
                                      float[] x, int xo, int n, int in, int out) {
        Parallel.forEach(out, (long) n * in, o -> {
            int dwr = dwo + o * in;
            float biasSum = 0f;
            for (int r = 0; r < n; r++) {
                float g = dy[dyo + r * out + o];
                biasSum += g;
                axpy(dw, dwr, g, x, xo + r * in, in);
            }
            if (dBias != null) {
                dBias[dbo + o] += biasSum;
            }
        });
    }

    /** y[yo..yo+len) += a * x[xo..xo+len). */
    static void axpy(float[] y, int yo, float a, float[] x, int xo, int len) {
        for (int j = 0; j < len; j++) {
            y[yo + j] += a * x[xo + j];
        }
    }

    static float dot(float[] a, int ao, float[] b, int bo, int len) {
        float s0 = 0f, s1 = 0f, s2 = 0f, s3 = 0f;
        int j = 0;
        for (; j + 3 < len; j += 4) {
            s0 += a[ao + j] * b[bo + j];
            s1 += a[ao + j + 1] * b[bo + j + 1];
            s2 += a[ao + j + 2] * b[bo + j + 2];
            s3 += a[ao + j + 3] * b[bo + j + 3];
        }
        for (; j < len; j++) {
            s0 += a[ao + j] * b[bo + j];
        }
        return (s0 + s1) + (s2 + s3);
    }
}
