package io.fsdp4j.backend.cpu;

/**
 * RMSNorm, LayerNorm and the per-head RMSNorm (Qwen3's and Gemma 3's q/k norms), forward and backward, over rows of
 * {@code c} values. A row's statistics are summed in double in column order; the weight's (and bias's) gradients
 * are summed over rows in row order, a block of columns per parallel item: a fixed order for any thread count.
 * RMSNorm's element loops run vectorised ({@link VectorNorms}) where the JVM has jdk.incubator.vector, with the same
 * bits as the scalar loops that finish each row.
 */
public final class CpuNorms {
    private static final boolean VECTORISED = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent();

    private CpuNorms() {}

    /** out (rows, c) = x * rstd * w, rstd (rows) = 1 / sqrt(mean(x^2) + eps). */
    public static void rmsForward(float[] o, int oo, float[] rs, int ro, float[] xs, int xo, float[] w, int wo,
                                  int rows, int c, float eps) {
        Parallel.forEach(rows, 3L * c, r -> {
            double ss = 0;
            for (int j = 0; j < c; j++) {
                float v = xs[xo + r * c + j];
                ss += v * v;
            }
            float inv = (float) (1.0 / Math.sqrt(ss / c + eps));
            rs[ro + r] = inv;
            int j = VECTORISED ? VectorNorms.scaled(o, oo + r * c, xs, xo + r * c, inv, w, wo, c) : 0;
            for (; j < c; j++) {
                o[oo + r * c + j] = xs[xo + r * c + j] * inv * w[wo + j];
            }
        });
    }

    /** dx (rows, c) from dOut; dw (c) += the weight's gradient. */
    public static void rmsBackward(float[] dxs, int dxo, float[] dw, int dwo, float[] g, int go, float[] xs, int xo,
                                   float[] w, int wo, float[] rs, int ro, int rows, int c) {
        Parallel.forEach(rows, 4L * c, r -> {
            float inv = rs[ro + r];
            // y = x * inv * w ; dx = inv * (g*w - xhat * mean(g*w*xhat)), xhat = x * inv
            double dot = 0;
            for (int j = 0; j < c; j++) {
                dot += (double) g[go + r * c + j] * w[wo + j] * xs[xo + r * c + j] * inv;
            }
            float mean = (float) (dot / c);
            int j = VECTORISED ? VectorNorms.rmsInputGradient(dxs, dxo + r * c, g, go + r * c, w, wo, xs, xo + r * c,
                    inv, mean, c) : 0;
            for (; j < c; j++) {
                float xhat = xs[xo + r * c + j] * inv;
                dxs[dxo + r * c + j] = inv * (g[go + r * c + j] * w[wo + j] - xhat * mean);
            }
        });
        int chunk = 64, chunks = (c + chunk - 1) / chunk;
        Parallel.forEach(chunks, (long) rows * chunk, ch -> {
            int j0 = ch * chunk, j1 = Math.min(c, j0 + chunk);
            for (int r = 0; r < rows; r++) {
                float inv = rs[ro + r];
                int j = j0 + (VECTORISED ? VectorNorms.rmsWeightGradient(dw, dwo + j0, g, go + r * c + j0, xs,
                        xo + r * c + j0, inv, j1 - j0) : 0);
                for (; j < j1; j++) {
                    dw[dwo + j] += g[go + r * c + j] * xs[xo + r * c + j] * inv;
                }
            }
        });
    }

    /** out (rows, c) = (x - mean) * rstd * w + b, with each row's mean and rstd saved. */
    public static void layerForward(float[] o, int oo, float[] ms, int mo, float[] rs, int ro, float[] xs, int xo,
                                    float[] w, int wo, float[] b, int bo, int rows, int c, float eps) {
        Parallel.forEach(rows, 4L * c, r -> {
            int row = xo + r * c;
            double sum = 0;
            for (int j = 0; j < c; j++) {
                sum += xs[row + j];
            }
            double mu = sum / c, ss = 0;
            for (int j = 0; j < c; j++) {
                double d = xs[row + j] - mu;
                ss += d * d;
            }
            float m = (float) mu, inv = (float) (1.0 / Math.sqrt(ss / c + eps));
            ms[mo + r] = m;
            rs[ro + r] = inv;
            for (int j = 0; j < c; j++) {
                o[oo + r * c + j] = (xs[row + j] - m) * inv * w[wo + j] + b[bo + j];
            }
        });
    }

    /** dx (rows, c) from dOut; dw, db (c) += the weight's and the bias's gradients. */
    public static void layerBackward(float[] dxs, int dxo, float[] dw, int dwo, float[] db, int dbo, float[] g, int go,
                                     float[] xs, int xo, float[] w, int wo, float[] ms, int mo, float[] rs, int ro,
                                     int rows, int c) {
        Parallel.forEach(rows, 6L * c, r -> {
            float m = ms[mo + r], inv = rs[ro + r];
            // y = xhat * w + b, xhat = (x - mean) * inv ; dx = inv * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g*w
            double sumGw = 0, sumGwXhat = 0;
            for (int j = 0; j < c; j++) {
                float gw = g[go + r * c + j] * w[wo + j];
                sumGw += gw;
                sumGwXhat += (double) gw * ((xs[xo + r * c + j] - m) * inv);
            }
            float meanGw = (float) (sumGw / c), meanGwXhat = (float) (sumGwXhat / c);
            for (int j = 0; j < c; j++) {
                float xhat = (xs[xo + r * c + j] - m) * inv;
                dxs[dxo + r * c + j] = inv * (g[go + r * c + j] * w[wo + j] - meanGw - xhat * meanGwXhat);
            }
        });
        int chunk = 64, chunks = (c + chunk - 1) / chunk;
        Parallel.forEach(chunks, (long) rows * chunk * 2, ch -> {
            int j0 = ch * chunk, j1 = Math.min(c, j0 + chunk);
            for (int r = 0; r < rows; r++) {
                float m = ms[mo + r], inv = rs[ro + r];
                for (int j = j0; j < j1; j++) {
                    float gj = g[go + r * c + j];
                    dw[dwo + j] += gj * ((xs[xo + r * c + j] - m) * inv);
                    db[dbo + j] += gj;
                }
            }
        });
    }

    /**
     * RMSNorm of {@code heads} heads of {@code hs} values from head {@code firstHead} of each row ({@code width}
     * values a row); rstd (rows, heads).
     */
    public static void headRmsForward(float[] o, int oo, float[] rs, int ro, float[] xs, int xo, float[] w, int wo,
                                      int rows, int heads, int hs, int width, int firstHead, float eps) {
        Parallel.forEach(rows, 3L * heads * hs, r -> {
            for (int h = 0; h < heads; h++) {
                int col = r * width + (firstHead + h) * hs;
                double ss = 0;
                for (int j = 0; j < hs; j++) {
                    float v = xs[xo + col + j];
                    ss += v * v;
                }
                float inv = (float) (1.0 / Math.sqrt(ss / hs + eps));
                rs[ro + r * heads + h] = inv;
                for (int j = 0; j < hs; j++) {
                    o[oo + col + j] = xs[xo + col + j] * inv * w[wo + j];
                }
            }
        });
    }

    /** dWeight first (added to with {@code accumulate}), then dx: dx may be dOut, whose values the former needs. */
    public static void headRmsBackward(float[] dxs, int dxo, float[] dw, int dwo, float[] g, int go, float[] xs, int xo,
                                       float[] w, int wo, float[] rs, int ro, int rows, int heads, int hs, int width,
                                       int firstHead, boolean accumulate) {
        // dWeight[j] (+)= sum over rows, then heads, of dOut * x * rstd: one column per task, a fixed order
        Parallel.forEach(hs, 3L * rows * heads, j -> {
            float sum = accumulate ? dw[dwo + j] : 0f;
            for (int r = 0; r < rows; r++) {
                for (int h = 0; h < heads; h++) {
                    int col = r * width + (firstHead + h) * hs + j;
                    sum += g[go + col] * xs[xo + col] * rs[ro + r * heads + h];
                }
            }
            dw[dwo + j] = sum;
        });
        // dx = rstd * (g*w - xhat * mean(g*w*xhat)), xhat = x * rstd, head by head
        Parallel.forEach(rows, 4L * heads * hs, r -> {
            for (int h = 0; h < heads; h++) {
                int col = r * width + (firstHead + h) * hs;
                float inv = rs[ro + r * heads + h];
                double dot = 0;
                for (int j = 0; j < hs; j++) {
                    dot += (double) g[go + col + j] * w[wo + j] * xs[xo + col + j] * inv;
                }
                float mean = (float) (dot / hs);
                for (int j = 0; j < hs; j++) {
                    float xhat = xs[xo + col + j] * inv;
                    dxs[dxo + col + j] = inv * (g[go + col + j] * w[wo + j] - xhat * mean);
                }
            }
        });
    }
}
