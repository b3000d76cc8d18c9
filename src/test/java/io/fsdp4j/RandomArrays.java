package io.fsdp4j;

import java.util.SplittableRandom;

/** Seeded random float arrays for the tests' inputs. */
public final class RandomArrays {
    private RandomArrays() {}

    /** {@code n} values of a normal distribution of standard deviation {@code scale}, each rounded to float. */
    public static float[] gaussian(SplittableRandom rng, int n, double scale) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) (rng.nextGaussian() * scale);
        }
        return a;
    }

    /** {@code n} values drawn uniformly from [-1, 1), each rounded to float. */
    public static float[] uniform(SplittableRandom rng, int n) {
        return uniform(rng, n, -1, 1);
    }

    /** {@code n} values drawn uniformly from [lo, hi), each rounded to float. */
    public static float[] uniform(SplittableRandom rng, int n, double lo, double hi) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) rng.nextDouble(lo, hi);
        }
        return a;
    }
}
