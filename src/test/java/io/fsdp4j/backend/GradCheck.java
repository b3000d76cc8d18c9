package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import java.util.function.ToDoubleFunction;

/**
 * Finite-difference gradient checks for the backend tests: central differences of a scalar loss computed in
 * fp32 through the ops themselves, compared with an analytic gradient by the relative error over a whole
 * tensor, ||a - f|| / ||f||. Each comparison also checks that the criterion has teeth: the analytic gradient
 * scaled by 1.1, or with the sign of its largest element flipped, must fail it.
 *
 * <p>Run with {@code -Dgradcheck.verbose=true} to print every measured error.
 */
final class GradCheck {
    /** Tolerance on the relative error of a whole gradient tensor. */
    static final double TOLERANCE = 1e-2;

    private static final boolean VERBOSE = Boolean.getBoolean("gradcheck.verbose");

    private GradCheck() {}

    static float[] filled(int n, float value) {
        float[] a = new float[n];
        java.util.Arrays.fill(a, value);
        return a;
    }

    /** The loss L = sum(out * r), accumulated in double so that only the op's own fp32 rounding is noise. */
    static double weightedSum(float[] out, float[] r) {
        assertThat(out).hasSameSizeAs(r);
        double s = 0;
        for (int i = 0; i < out.length; i++) {
            s += (double) out[i] * r[i];
        }
        return s;
    }

    /**
     * Central differences of {@code loss} with respect to each element of {@code x}, which is perturbed in
     * place and restored; the divisor is the step actually taken in fp32.
     */
    static float[] numericGradient(float[] x, float h, ToDoubleFunction<float[]> loss) {
        float[] g = new float[x.length];
        for (int i = 0; i < x.length; i++) {
            float orig = x[i];
            float xp = orig + h, xm = orig - h;
            x[i] = xp;
            double lp = loss.applyAsDouble(x);
            x[i] = xm;
            double lm = loss.applyAsDouble(x);
            x[i] = orig;
            g[i] = (float) ((lp - lm) / ((double) xp - xm));
        }
        return g;
    }

    static double norm(float[] a) {
        double s = 0;
        for (float v : a) {
            s += (double) v * v;
        }
        return Math.sqrt(s);
    }

    /** ||a - f|| / ||f||. */
    static double relativeError(float[] a, float[] f) {
        assertThat(a).hasSameSizeAs(f);
        double d = 0;
        for (int i = 0; i < a.length; i++) {
            double e = (double) a[i] - f[i];
            d += e * e;
        }
        return Math.sqrt(d) / norm(f);
    }

    /** Asserts analytic ~ numeric within {@link #TOLERANCE}, and that a wrong gradient would not pass. */
    static double assertGradient(String what, float[] analytic, float[] numeric) {
        assertThat(norm(numeric)).as("%s: finite-difference gradient is all zeros, the check would be vacuous", what)
                .isGreaterThan(0.0);
        double err = relativeError(analytic, numeric);
        if (VERBOSE) {
            System.out.printf("gradcheck %-50s n=%5d rel.err=%.3e%n", what, analytic.length, err);
        }
        assertThat(err).as("%s: relative error of analytic vs finite-difference gradient", what)
                .isLessThan(TOLERANCE);

        float[] scaled = analytic.clone();
        for (int i = 0; i < scaled.length; i++) {
            scaled[i] *= 1.1f;
        }
        assertThat(relativeError(scaled, numeric)).as("%s: a gradient scaled by 1.1 must fail the check", what)
                .isGreaterThan(TOLERANCE);

        float[] flipped = analytic.clone();
        int largest = 0;
        for (int i = 1; i < flipped.length; i++) {
            if (Math.abs(flipped[i]) > Math.abs(flipped[largest])) {
                largest = i;
            }
        }
        flipped[largest] = -flipped[largest];
        assertThat(relativeError(flipped, numeric))
                .as("%s: a gradient with one sign flipped must fail the check", what)
                .isGreaterThan(TOLERANCE);
        return err;
    }

    /** Columns [from, to) of a row-major (rows, width) matrix. */
    static float[] columns(float[] a, int rows, int width, int from, int to) {
        float[] s = new float[rows * (to - from)];
        for (int r = 0; r < rows; r++) {
            System.arraycopy(a, r * width + from, s, r * (to - from), to - from);
        }
        return s;
    }

    static float[] minus(float[] a, float[] b) {
        float[] d = new float[a.length];
        for (int i = 0; i < a.length; i++) {
            d[i] = a[i] - b[i];
        }
        return d;
    }

    /** Max |a - e| over the elements. */
    static double maxAbsDiff(float[] a, double[] e) {
        assertThat(a.length).isEqualTo(e.length);
        double m = 0;
        for (int i = 0; i < a.length; i++) {
            m = Math.max(m, Math.abs(a[i] - e[i]));
        }
        return m;
    }
}
