package io.fsdp4j.backend;

import static io.fsdp4j.RandomArrays.gaussian;
import static io.fsdp4j.tensor.DType.F32;
import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.tensor.Fp8;
import io.fsdp4j.tensor.Fp8Scaling;
import io.fsdp4j.tensor.Tensor;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The CPU backend's fp8 linear products ({@link Backend#fp8LinearForward}, {@link Backend#fp8LinearBackward}): the
 * products of the operands each cast with its own scale, recomputed here in double from {@link Fp8#cast} one element
 * at a time; within fp8's error of the fp32 products and not equal to them; the bias and its gradient unquantized;
 * shapes that are not multiples of 16 computed as {@link Backend#linearForward} does.
 */
class Fp8ProductsTest {
    private static final CpuBackend BE = CpuBackend.INSTANCE;

    /** values cast to {@code format} with the scale of their amax, and that scale's fp32 inverse. */
    private record Reference(double[] values, float inverse) {
        static Reference of(float[] v, Fp8 format) {
            float amax = 0;
            for (float f : v) {
                amax = Math.max(amax, Math.abs(f));
            }
            float scale = format.scale(amax);
            double[] cast = new double[v.length];
            for (int i = 0; i < v.length; i++) {
                cast[i] = format.cast(v[i], scale);
            }
            return new Reference(cast, 1f / scale);
        }
    }

    /** ||a - b|| / ||b||. */
    private static double relative(float[] a, double[] b) {
        double num = 0, den = 0;
        for (int i = 0; i < a.length; i++) {
            num += (a[i] - b[i]) * (a[i] - b[i]);
            den += b[i] * b[i];
        }
        return Math.sqrt(num / den);
    }

    /** Element-wise: |a - b| within 1e-5 of the sum of the magnitudes of b's terms (fp32 sums in another order). */
    private static void assertSums(float[] a, double[] b, double[] termMagnitudes) {
        for (int i = 0; i < a.length; i++) {
            assertThat((double) a[i]).as("element %d", i).isCloseTo(b[i],
                    org.assertj.core.data.Offset.offset(1e-5 * termMagnitudes[i] + 1e-30));
        }
    }

    @ParameterizedTest(name = "{0} rows, {1} in, {2} out")
    @CsvSource({"16,32,48", "64,96,32", "32,16,16"})
    void theForwardIsTheProductOfTheCastOperands(int n, int in, int out) {
        var rng = new SplittableRandom(n * 7L + in);
        float[] xv = gaussian(rng, n * in, 3), wv = gaussian(rng, out * in, 0.05), bv = gaussian(rng, out, 1);
        Tensor y = BE.allocate(F32, n, out);
        BE.fp8LinearForward(y, BE.upload(xv, n, in), BE.upload(wv, out, in), BE.upload(bv, out));

        Reference x8 = Reference.of(xv, Fp8.E4M3), w8 = Reference.of(wv, Fp8.E4M3);
        double s = x8.inverse() * w8.inverse();
        double[] expected = new double[n * out], exact = new double[n * out], terms = new double[n * out];
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < out; c++) {
                double acc = 0, full = 0, mag = 0;
                for (int k = 0; k < in; k++) {
                    acc += x8.values()[r * in + k] * w8.values()[c * in + k];
                    mag += Math.abs(x8.values()[r * in + k] * w8.values()[c * in + k]) * s;
                    full += (double) xv[r * in + k] * wv[c * in + k];
                }
                expected[r * out + c] = acc * s + bv[c];
                exact[r * out + c] = full + bv[c];
                terms[r * out + c] = mag + Math.abs(bv[c]);
            }
        }
        float[] got = BE.toFloats(y);
        assertSums(got, expected, terms);
        // e4m3 keeps 4 significant bits: within a few percent of the exact product, but really not the exact one
        assertThat(relative(got, exact)).isBetween(1e-3, 0.05);
    }

    @ParameterizedTest(name = "{0} rows, {1} in, {2} out, accumulate {3}")
    @CsvSource({"16,32,48,true", "64,96,32,false", "32,16,16,true"})
    void theBackwardCastsTheOutputGradientToE5m2(int n, int in, int out, boolean accumulate) {
        var rng = new SplittableRandom(n * 13L + out);
        float[] xv = gaussian(rng, n * in, 2), wv = gaussian(rng, out * in, 0.05), gv = gaussian(rng, n * out, 1e-4);
        float[] dw0 = gaussian(rng, out * in, 1e-3), db0 = gaussian(rng, out, 1e-3);
        Tensor dx = BE.allocate(F32, n, in), dW = BE.upload(dw0, out, in), dB = BE.upload(db0, out);
        BE.fp8LinearBackward(dx, dW, dB, BE.upload(gv, n, out), BE.upload(xv, n, in), BE.upload(wv, out, in),
                accumulate);

        Reference g8 = Reference.of(gv, Fp8.E5M2), x8 = Reference.of(xv, Fp8.E4M3), w8 = Reference.of(wv, Fp8.E4M3);
        double sx = g8.inverse() * w8.inverse(), sw = g8.inverse() * x8.inverse();
        double[] dxExpected = new double[n * in], dxExact = new double[n * in], dxTerms = new double[n * in];
        for (int r = 0; r < n; r++) {
            for (int k = 0; k < in; k++) {
                double acc = 0, full = 0, mag = 0;
                for (int c = 0; c < out; c++) {
                    double t = g8.values()[r * out + c] * w8.values()[c * in + k];
                    acc += t;
                    mag += Math.abs(t) * sx;
                    full += (double) gv[r * out + c] * wv[c * in + k];
                }
                dxExpected[r * in + k] = acc * sx;
                dxExact[r * in + k] = full;
                dxTerms[r * in + k] = mag;
            }
        }
        double[] dwExpected = new double[out * in], dwExact = new double[out * in], dwTerms = new double[out * in];
        double[] dbExpected = new double[out];
        for (int c = 0; c < out; c++) {
            for (int k = 0; k < in; k++) {
                double acc = 0, full = 0, mag = 0;
                for (int r = 0; r < n; r++) {
                    double t = g8.values()[r * out + c] * x8.values()[r * in + k];
                    acc += t;
                    mag += Math.abs(t) * sw;
                    full += (double) gv[r * out + c] * xv[r * in + k];
                }
                double before = accumulate ? dw0[c * in + k] : 0;
                dwExpected[c * in + k] = before + acc * sw;
                dwExact[c * in + k] = full; // the product alone, to measure fp8's error on it
                dwTerms[c * in + k] = mag + Math.abs(before);
            }
            double sum = 0;
            for (int r = 0; r < n; r++) {
                sum += gv[r * out + c];
            }
            dbExpected[c] = (accumulate ? db0[c] : 0) + sum;
        }
        float[] gotDx = BE.toFloats(dx), gotDw = BE.toFloats(dW), gotDb = BE.toFloats(dB);
        assertSums(gotDx, dxExpected, dxTerms);
        assertSums(gotDw, dwExpected, dwTerms);
        double[] dbTerms = new double[out];
        java.util.Arrays.fill(dbTerms, 1e-4 * n);
        assertSums(gotDb, dbExpected, dbTerms); // the bias's gradient from dOut itself, not its e5m2 cast
        assertThat(relative(gotDx, dxExact)).isBetween(1e-3, 0.1); // e5m2: 3 significant bits
        float[] dwProduct = gotDw.clone();
        for (int i = 0; i < dwProduct.length; i++) {
            dwProduct[i] -= accumulate ? dw0[i] : 0;
        }
        assertThat(relative(dwProduct, dwExact)).isBetween(1e-3, 0.1);
    }

    @Test
    void aFrozenWeightGetsItsInputGradientAndNoProduct() {
        CpuBackend be = CpuBackend.counting();
        var rng = new SplittableRandom(5);
        Tensor x = be.upload(gaussian(rng, 32 * 16, 1), 32, 16), w = be.upload(gaussian(rng, 48 * 16, 1), 48, 16);
        Tensor g = be.upload(gaussian(rng, 32 * 48, 1), 32, 48);
        Tensor with = be.allocate(F32, 32, 16), without = be.allocate(F32, 32, 16);
        be.fp8LinearBackward(with, be.allocate(F32, 48, 16), null, g, x, w, false);
        be.fp8LinearBackward(without, null, null, g, x, w, false);
        assertThat(be.weightGradients()).isEqualTo(1);
        assertThat(be.toFloats(without)).containsExactly(be.toFloats(with));
    }

    /**
     * A forward given a store ({@link Fp8Casts}) keeps its weight's and input's casts; its backward given the store
     * takes them from there, casting only the output gradient: three casts where there were five, and the same bits
     * as the products without a store. A tensor of the same shape in other memory, or another view of the same array,
     * is cast anew.
     */
    @ParameterizedTest(name = "{0} rows, {1} in, {2} out")
    @CsvSource({"16,32,48", "64,96,32"})
    void aStoreGivesTheBackwardTheForwardsCasts(int n, int in, int out) {
        var rng = new SplittableRandom(n * 31L + out);
        float[] xv = gaussian(rng, n * in, 2), wv = gaussian(rng, out * in, 0.05), gv = gaussian(rng, n * out, 1e-3);
        Tensor x = BE.upload(xv, n, in), w = BE.upload(wv, out, in), g = BE.upload(gv, n, out);
        Tensor y = BE.allocate(F32, n, out), dx = BE.allocate(F32, n, in), dW = BE.allocate(F32, out, in);
        BE.fp8LinearForward(y, x, w, null);
        BE.fp8LinearBackward(dx, dW, null, g, x, w, false);

        Fp8Casts casts = new Fp8Casts(true);
        Tensor yKept = BE.allocate(F32, n, out), dxKept = BE.allocate(F32, n, in), dWKept = BE.allocate(F32, out, in);
        BE.fp8LinearForward(yKept, x, w, null, casts);
        assertThat(casts.castsMade()).isEqualTo(2);
        BE.fp8LinearBackward(dxKept, dWKept, null, g, x, w.view(0, out, in), false, casts); // a new view: the same weight
        assertThat(casts.castsMade()).as("the output gradient's cast alone").isEqualTo(3);
        assertThat(casts.castsReused()).as("the weight's and the input's").isEqualTo(2);
        assertThat(BE.toFloats(yKept)).containsExactly(BE.toFloats(y));
        assertThat(BE.toFloats(dxKept)).containsExactly(BE.toFloats(dx));
        assertThat(BE.toFloats(dWKept)).containsExactly(BE.toFloats(dW));

        // the same shape in other memory, and another view of x's array: not the kept casts
        float[] other = xv.clone();
        other[0] *= 100f; // another amax: a reused cast of x would give other numbers
        Tensor x2 = BE.upload(other, n, in), dW2 = BE.allocate(F32, out, in), dW2Kept = BE.allocate(F32, out, in);
        BE.fp8LinearBackward(null, dW2, null, g, x2, w, false);
        BE.fp8LinearBackward(null, dW2Kept, null, g, x2, w, false, casts);
        assertThat(BE.toFloats(dW2Kept)).containsExactly(BE.toFloats(dW2));
        float[] twice = new float[2 * n * in];
        System.arraycopy(xv, 0, twice, 0, n * in);
        System.arraycopy(other, 0, twice, n * in, n * in);
        Tensor both = BE.upload(twice, 2 * n * in), first = both.view(0, n, in), second = both.view(n * in, n, in);
        BE.fp8LinearForward(BE.allocate(F32, n, out), first, w, null, casts);
        Tensor dW3 = BE.allocate(F32, out, in);
        BE.fp8LinearBackward(null, dW3, null, g, second, w, false, casts);
        assertThat(BE.toFloats(dW3)).containsExactly(BE.toFloats(dW2));
        assertThat(casts.castsReused()).as("the weight once more, in the last forward").isEqualTo(3);
    }

    /** Scaling an operand by a power of two scales its amax and scale alike: the same fp8 codes, the product scaled. */
    @Test
    void aPowerOfTwoOnTheInputScalesTheOutputExactly() {
        var rng = new SplittableRandom(9);
        float[] xv = gaussian(rng, 16 * 32, 1), wv = gaussian(rng, 16 * 32, 1), x8v = xv.clone();
        for (int i = 0; i < x8v.length; i++) {
            x8v[i] *= 8f;
        }
        Tensor y = BE.allocate(F32, 16, 16), y8 = BE.allocate(F32, 16, 16);
        BE.fp8LinearForward(y, BE.upload(xv, 16, 32), BE.upload(wv, 16, 32), null);
        BE.fp8LinearForward(y8, BE.upload(x8v, 16, 32), BE.upload(wv, 16, 32), null);
        float[] a = BE.toFloats(y), b = BE.toFloats(y8);
        for (int i = 0; i < a.length; i++) {
            assertThat(b[i]).isEqualTo(a[i] * 8f);
        }
    }

    /** A GPU whose cuBLASLt refuses an fp8 product ends the job in one line that names the product and bf16. */
    @Test
    void aRefusedFp8ProductIsOneLineNamingBf16() {
        assertThat(CudaLinear.refused(130100, 4608, 2048, 3584)).isInstanceOf(io.fsdp4j.UserError.class)
                .hasMessage("fsdp.param_dtype=fp8: cuBLASLt 130100 has no fp8 product of 4608 x 2048 x 3584 on this GPU"
                        + " (CUBLAS_STATUS_NOT_SUPPORTED); set fsdp.param_dtype=bf16");
    }

    @ParameterizedTest(name = "{0} rows, {1} in, {2} out")
    @CsvSource({"15,32,48", "16,24,48", "16,32,40"})
    void shapesNotOfSixteensTakeTheParametersProduct(int n, int in, int out) {
        var rng = new SplittableRandom(n + in + out);
        Tensor x = BE.upload(gaussian(rng, n * in, 1), n, in), w = BE.upload(gaussian(rng, out * in, 1), out, in);
        Tensor g = BE.upload(gaussian(rng, n * out, 1), n, out);
        Tensor y = BE.allocate(F32, n, out), yRef = BE.allocate(F32, n, out);
        BE.fp8LinearForward(y, x, w, null);
        BE.linearForward(yRef, x, w, null);
        assertThat(BE.toFloats(y)).containsExactly(BE.toFloats(yRef));
        Tensor dx = BE.allocate(F32, n, in), dxRef = BE.allocate(F32, n, in);
        Tensor dW = BE.allocate(F32, out, in), dWRef = BE.allocate(F32, out, in);
        BE.fp8LinearBackward(dx, dW, null, g, x, w, false);
        BE.linearBackward(dxRef, dWRef, null, g, x, w, false);
        assertThat(BE.toFloats(dx)).containsExactly(BE.toFloats(dxRef));
        assertThat(BE.toFloats(dW)).containsExactly(BE.toFloats(dWRef));
    }

    /**
     * (rows, cols) row-major values cast to {@code format} rowwise: a scale per row ({@code perColumn} false) or per
     * column from that group's amax ({@link Fp8#scale}), each element rounded by {@link Fp8#cast}; the inverses.
     */
    private record RowReference(double[] values, float[] inverse) {
        static RowReference of(float[] v, int rows, int cols, Fp8 format, boolean perColumn) {
            float[] amax = new float[perColumn ? cols : rows];
            for (int r = 0; r < rows; r++) {
                for (int c = 0; c < cols; c++) {
                    int g = perColumn ? c : r;
                    amax[g] = Math.max(amax[g], Math.abs(v[r * cols + c]));
                }
            }
            double[] cast = new double[v.length];
            float[] inverse = new float[amax.length];
            for (int g = 0; g < amax.length; g++) {
                inverse[g] = 1f / format.scale(amax[g]);
            }
            for (int r = 0; r < rows; r++) {
                for (int c = 0; c < cols; c++) {
                    cast[r * cols + c] = format.cast(v[r * cols + c], format.scale(amax[perColumn ? c : r]));
                }
            }
            return new RowReference(cast, inverse);
        }
    }

    /**
     * Rowwise: each token of x and each output feature of the weight has its own scale; the forward is the product of
     * the cast values times the two rows' inverse scales, the bias after; the input gradient scales dOut by token and
     * the weight by input feature; the weight gradient scales dOut and x by column over the tokens; the bias gradient
     * is dOut's own column sums.
     */
    @ParameterizedTest(name = "{0} rows, {1} in, {2} out")
    @CsvSource({"16,32,48", "64,96,32"})
    void rowwiseScalesEachRowAlongTheKeptDimension(int n, int in, int out) {
        var rng = new SplittableRandom(n * 11L + out);
        float[] xv = gaussian(rng, n * in, 3), wv = gaussian(rng, out * in, 0.05), bv = gaussian(rng, out, 1);
        float[] gv = gaussian(rng, n * out, 0.01);
        for (int k = 0; k < in; k++) {
            xv[3 * in + k] *= 1000f; // an outlier token
        }
        Tensor x = BE.upload(xv, n, in), w = BE.upload(wv, out, in), b = BE.upload(bv, out), g = BE.upload(gv, n, out);
        Tensor y = BE.allocate(F32, n, out);
        BE.fp8LinearForward(y, x, w, b, null, Fp8Scaling.ROW);
        RowReference x8 = RowReference.of(xv, n, in, Fp8.E4M3, false), w8 = RowReference.of(wv, out, in, Fp8.E4M3, false);
        double[] expected = new double[n * out], terms = new double[n * out];
        for (int r = 0; r < n; r++) {
            for (int c = 0; c < out; c++) {
                double acc = 0, mag = 0, s = (double) (x8.inverse()[r] * w8.inverse()[c]);
                for (int k = 0; k < in; k++) {
                    acc += x8.values()[r * in + k] * w8.values()[c * in + k];
                    mag += Math.abs(x8.values()[r * in + k] * w8.values()[c * in + k]) * s;
                }
                expected[r * out + c] = acc * s + bv[c];
                terms[r * out + c] = mag + Math.abs(bv[c]);
            }
        }
        assertSums(BE.toFloats(y), expected, terms);

        Tensor dx = BE.allocate(F32, n, in), dW = BE.allocate(F32, out, in), db = BE.allocate(F32, out);
        BE.fp8LinearBackward(dx, dW, db, g, x, w, false, null, Fp8Scaling.ROW);
        RowReference gRows = RowReference.of(gv, n, out, Fp8.E5M2, false);
        RowReference wColumns = RowReference.of(wv, out, in, Fp8.E4M3, true);
        double[] dxExpected = new double[n * in], dxTerms = new double[n * in];
        for (int r = 0; r < n; r++) {
            for (int i = 0; i < in; i++) {
                double acc = 0, mag = 0, s = (double) (gRows.inverse()[r] * wColumns.inverse()[i]);
                for (int c = 0; c < out; c++) {
                    acc += gRows.values()[r * out + c] * wColumns.values()[c * in + i];
                    mag += Math.abs(gRows.values()[r * out + c] * wColumns.values()[c * in + i]) * s;
                }
                dxExpected[r * in + i] = acc * s;
                dxTerms[r * in + i] = mag;
            }
        }
        assertSums(BE.toFloats(dx), dxExpected, dxTerms);
        RowReference gColumns = RowReference.of(gv, n, out, Fp8.E5M2, true);
        RowReference xColumns = RowReference.of(xv, n, in, Fp8.E4M3, true);
        double[] dwExpected = new double[out * in], dwTerms = new double[out * in];
        for (int c = 0; c < out; c++) {
            for (int i = 0; i < in; i++) {
                double acc = 0, mag = 0, s = (double) (gColumns.inverse()[c] * xColumns.inverse()[i]);
                for (int r = 0; r < n; r++) {
                    acc += gColumns.values()[r * out + c] * xColumns.values()[r * in + i];
                    mag += Math.abs(gColumns.values()[r * out + c] * xColumns.values()[r * in + i]) * s;
                }
                dwExpected[c * in + i] = acc * s;
                dwTerms[c * in + i] = mag;
            }
        }
        assertSums(BE.toFloats(dW), dwExpected, dwTerms);
        float[] dbGot = BE.toFloats(db);
        for (int c = 0; c < out; c++) {
            float sum = 0f;
            for (int r = 0; r < n; r++) {
                sum += gv[r * out + c];
            }
            assertThat(dbGot[c]).isEqualTo(sum);
        }
    }

    /**
     * Why rowwise: one token 100,000 times larger than the rest sets a tensorwise scale that leaves the other
     * tokens' values at or under e4m3's smallest steps; rowwise, their outputs keep fp8's own error.
     */
    @Test
    void rowwiseKeepsTheOtherTokensPreciseBesideAnOutlier() {
        int n = 32, in = 64, out = 48;
        var rng = new SplittableRandom(9);
        float[] xv = gaussian(rng, n * in, 1), wv = gaussian(rng, out * in, 0.05);
        for (int k = 0; k < in; k++) {
            xv[k] *= 1e5f; // token 0
        }
        Tensor x = BE.upload(xv, n, in), w = BE.upload(wv, out, in);
        Tensor tensorwise = BE.allocate(F32, n, out), rowwise = BE.allocate(F32, n, out);
        Tensor exact = BE.allocate(F32, n, out);
        BE.fp8LinearForward(tensorwise, x, w, null, null, Fp8Scaling.TENSOR);
        BE.fp8LinearForward(rowwise, x, w, null, null, Fp8Scaling.ROW);
        BE.linearForward(exact, x, w, null);
        float[] t = BE.toFloats(tensorwise), r = BE.toFloats(rowwise), e = BE.toFloats(exact);
        double[] others = new double[(n - 1) * out];
        float[] tOthers = new float[others.length], rOthers = new float[others.length];
        for (int i = out; i < n * out; i++) { // the other tokens' outputs
            others[i - out] = e[i];
            tOthers[i - out] = t[i];
            rOthers[i - out] = r[i];
        }
        double tensorwiseError = relative(tOthers, others), rowwiseError = relative(rOthers, others);
        assertThat(rowwiseError).as("rowwise").isLessThan(0.1);
        assertThat(tensorwiseError).as("tensorwise").isGreaterThan(10 * rowwiseError);
    }
}
