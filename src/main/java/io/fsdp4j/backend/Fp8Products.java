package io.fsdp4j.backend;

import static io.fsdp4j.backend.CpuBackend.f32;
import static io.fsdp4j.backend.CpuBackend.off;

import io.fsdp4j.backend.cpu.CpuMatmul;
import io.fsdp4j.tensor.Fp8;
import io.fsdp4j.tensor.Fp8Scaling;
import io.fsdp4j.tensor.Tensor;

/**
 * The fp8 linear products ({@link Backend#fp8LinearForward}, {@link Backend#fp8LinearBackward}): which shapes take
 * them ({@link #applies}, the same rule on every backend), and the CPU backend's emulation of Hopper's, step by step as
 * the GPU computes: each operand's amax, its scale, its elements rounded to e4m3 or e5m2 ({@link Fp8#cast}), the
 * product of the rounded values accumulated in fp32 (exact products: 4 x 4 significant bits fit fp32's 24), times
 * the two scales' inverses (fp32 reciprocals, as the scales cuBLASLt is handed), the bias after. CUDA's products
 * differ from these only in the order of the fp32 sums. Rowwise ({@link Fp8Scaling#ROW}): each row of an operand along
 * the product's kept dimension has its own amax and scale ({@link RowCast}), and each element of the product is
 * multiplied by the inverses of its row's and its column's scales (cuBLASLt's outer-vector scaling).
 */
final class Fp8Products {
    /** What the fp8 tensor cores take: every dimension of a product a multiple of this. */
    static final int MULTIPLE = 16;

    private Fp8Products() {}

    /** Whether a linear over {@code n} rows, {@code in} inputs and {@code out} outputs runs in fp8. */
    static boolean applies(long n, int in, int out) {
        return n % MULTIPLE == 0 && in % MULTIPLE == 0 && out % MULTIPLE == 0 && n > 0;
    }

    /** A tensor cast to fp8: its elements rounded (as fp32 values) and the inverse of the scale they were cast with. */
    record Cast(float[] values, float inverseScale) {
        static Cast of(Tensor t, Fp8 format) {
            float[] src = f32(t);
            int o = off(t), n = Math.toIntExact(t.numel());
            float amax = 0f;
            for (int i = 0; i < n; i++) {
                amax = Math.max(amax, Math.abs(src[o + i])); // Math.max: a NaN element makes amax NaN, as on the GPU
            }
            float scale = format.scale(amax);
            float[] values = new float[n];
            for (int i = 0; i < n; i++) {
                values[i] = format.cast(src[o + i], scale);
            }
            return new Cast(values, 1f / scale);
        }
    }

    /**
     * {@code t} cast to {@code format}: taken from {@code casts} if an earlier product kept it there, else cast (and,
     * {@code keep}, kept for later products); counted in {@code casts} either way. Without a store (null), cast.
     */
    private static Cast cast(Tensor t, Fp8 format, Fp8Casts casts, boolean keep) {
        if (casts == null) {
            return Cast.of(t, format);
        }
        Cast found = casts.find(t, format, Cast.class, c -> true); // one cast serves both layouts on the CPU
        if (found != null) {
            return found;
        }
        Cast made = Cast.of(t, format);
        casts.made();
        if (keep) {
            casts.keep(t, format, made);
        }
        return made;
    }

    /**
     * A (rows, cols) row-major tensor cast to fp8 with a scale per row ({@code perColumn} false) or per column: the
     * rounded values (fp32, row-major as t) and the inverse of each row's or column's scale.
     */
    record RowCast(float[] values, float[] inverse) {
        static RowCast of(Tensor t, int rows, int cols, Fp8 format, boolean perColumn) {
            float[] src = f32(t);
            int o = off(t);
            int groups = perColumn ? cols : rows;
            float[] amax = new float[groups];
            for (int r = 0; r < rows; r++) {
                for (int c = 0; c < cols; c++) {
                    int g = perColumn ? c : r;
                    amax[g] = Math.max(amax[g], Math.abs(src[o + r * cols + c])); // a NaN makes its group's NaN
                }
            }
            float[] scale = new float[groups], inverse = new float[groups];
            for (int g = 0; g < groups; g++) {
                scale[g] = format.scale(amax[g]);
                inverse[g] = 1f / scale[g];
            }
            float[] values = new float[rows * cols];
            for (int r = 0; r < rows; r++) {
                for (int c = 0; c < cols; c++) {
                    values[r * cols + c] = format.cast(src[o + r * cols + c], scale[perColumn ? c : r]);
                }
            }
            return new RowCast(values, inverse);
        }
    }

    /** As {@link #forward(Tensor, Tensor, Tensor, Tensor, Fp8Casts)}, the operands scaled as {@code scaling} says. */
    static void forward(Tensor out, Tensor x, Tensor weight, Tensor bias, Fp8Casts casts, Fp8Scaling scaling) {
        if (scaling == Fp8Scaling.TENSOR) {
            forward(out, x, weight, bias, casts);
            return;
        }
        // rowwise: out[r, c] = (x8 @ w8^T)[r, c] * (1/sx[r] * 1/sw[c]) (+ bias[c]); every cast made anew
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        RowCast x8 = RowCast.of(x, n, in, Fp8.E4M3, false), w8 = RowCast.of(weight, o, in, Fp8.E4M3, false);
        float[] y = f32(out);
        int yo = off(out);
        CpuMatmul.forward(y, yo, x8.values(), 0, w8.values(), 0, null, 0, n, in, o);
        float[] b = bias == null ? null : f32(bias);
        int bo = bias == null ? 0 : off(bias);
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < o; c++) {
                int at = yo + r * o + c;
                float v = y[at] * (x8.inverse()[r] * w8.inverse()[c]);
                y[at] = b == null ? v : v + b[bo + c];
            }
        }
    }

    /**
     * As {@link #backward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, boolean, Fp8Casts)}, the operands scaled as
     * {@code scaling} says; rowwise: dx[r, i] = (g8 @ w8)[r, i] * (1/sg[r] * 1/sw[i]), dOut scaled by token and the
     * weight by input feature (its columns); dWeight[c, i] (+)= (g8^T @ x8)[c, i] * (1/sg[c] * 1/sx[i]), dOut and x
     * scaled by column over the tokens.
     */
    static void backward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                         boolean accumulate, Fp8Casts casts, Fp8Scaling scaling) {
        if (scaling == Fp8Scaling.TENSOR) {
            backward(dx, dWeight, dBias, dOut, x, weight, accumulate, casts);
            return;
        }
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        if (dx != null) {
            RowCast g8 = RowCast.of(dOut, n, o, Fp8.E5M2, false), w8 = RowCast.of(weight, o, in, Fp8.E4M3, true);
            float[] d = f32(dx);
            int dxo = off(dx);
            CpuMatmul.backwardInput(d, dxo, g8.values(), 0, w8.values(), 0, n, in, o);
            for (int r = 0; r < n; r++) {
                for (int i = 0; i < in; i++) {
                    d[dxo + r * in + i] *= g8.inverse()[r] * w8.inverse()[i];
                }
            }
        }
        if (dWeight == null) {
            return;
        }
        RowCast g8 = RowCast.of(dOut, n, o, Fp8.E5M2, true), x8 = RowCast.of(x, n, in, Fp8.E4M3, true);
        float[] product = new float[o * in];
        CpuMatmul.backwardWeight(product, 0, null, 0, g8.values(), 0, x8.values(), 0, n, in, o);
        float[] dw = f32(dWeight);
        int dwo = off(dWeight);
        for (int c = 0; c < o; c++) {
            for (int i = 0; i < in; i++) {
                float v = product[c * in + i] * (g8.inverse()[c] * x8.inverse()[i]);
                dw[dwo + c * in + i] = accumulate ? dw[dwo + c * in + i] + v : v;
            }
        }
        biasGradient(dBias, dOut, n, o, accumulate);
    }

    /** CPU: out (N,O) = (x8 @ w8^T) * (1/sx * 1/sw) + bias; x's and the weight's casts kept in {@code casts}. */
    static void forward(Tensor out, Tensor x, Tensor weight, Tensor bias, Fp8Casts casts) {
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        Cast x8 = cast(x, Fp8.E4M3, casts, true), w8 = cast(weight, Fp8.E4M3, casts, true);
        float[] y = f32(out);
        int yo = off(out);
        CpuMatmul.forward(y, yo, x8.values(), 0, w8.values(), 0, null, 0, n, in, o);
        float s = x8.inverseScale() * w8.inverseScale();
        float[] b = bias == null ? null : f32(bias);
        int bo = bias == null ? 0 : off(bias);
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < o; c++) {
                int at = yo + r * o + c;
                y[at] = b == null ? y[at] * s : y[at] * s + b[bo + c];
            }
        }
    }

    /**
     * CPU: dx (N,I) = (g8 @ w8) * (1/sg * 1/sw) (dx null: skipped); dWeight (O,I) (+)= (g8^T @ x8) * (1/sg * 1/sx) and
     * dBias (O) (+)= column sums of dOut, in row order (dWeight null: neither). The weight's and x's casts are taken
     * from {@code casts} where its forward kept them.
     */
    static void backward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                         boolean accumulate, Fp8Casts casts) {
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        Cast g8 = cast(dOut, Fp8.E5M2, casts, false);
        if (dx != null) {
            Cast w8 = cast(weight, Fp8.E4M3, casts, false);
            float[] d = f32(dx);
            int dxo = off(dx);
            CpuMatmul.backwardInput(d, dxo, g8.values(), 0, w8.values(), 0, n, in, o);
            scale(d, dxo, n * in, g8.inverseScale() * w8.inverseScale());
        }
        if (dWeight == null) {
            return;
        }
        Cast x8 = cast(x, Fp8.E4M3, casts, false);
        float[] product = new float[o * in];
        CpuMatmul.backwardWeight(product, 0, null, 0, g8.values(), 0, x8.values(), 0, n, in, o);
        float s = g8.inverseScale() * x8.inverseScale();
        float[] dw = f32(dWeight);
        int dwo = off(dWeight);
        for (int i = 0; i < product.length; i++) {
            dw[dwo + i] = accumulate ? dw[dwo + i] + product[i] * s : product[i] * s;
        }
        biasGradient(dBias, dOut, n, o, accumulate);
    }

    /** dBias (O) (+)= the column sums of dOut (N,O) itself (not cast), in row order; nothing for a null dBias. */
    private static void biasGradient(Tensor dBias, Tensor dOut, int n, int o, boolean accumulate) {
        if (dBias != null) {
            float[] g = f32(dOut), db = f32(dBias);
            int go = off(dOut), dbo = off(dBias);
            for (int c = 0; c < o; c++) {
                float sum = 0f;
                for (int r = 0; r < n; r++) {
                    sum += g[go + r * o + c];
                }
                db[dbo + c] = accumulate ? db[dbo + c] + sum : sum;
            }
        }
    }

    private static void scale(float[] a, int from, int count, float s) {
        for (int i = from; i < from + count; i++) {
            a[i] *= s;
        }
    }
}
