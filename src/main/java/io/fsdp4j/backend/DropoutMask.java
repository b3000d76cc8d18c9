package io.fsdp4j.backend;

/**
 * Which elements dropout keeps: a counter-based draw, a pure function of (seed, element index), so that every
 * backend, every rank and every recompute of a forward draws the same mask for the same element without state or
 * communication. The CUDA kernel ({@code kernels/dropout.cu}) computes the same bits.
 *
 * <p>Element {@code index} of the mask of seed {@code s} ({@link #seed} of its keys) is kept when the top 24 bits of
 * splitmix64's output at position {@code index} of the sequence seeded with {@code s} (mix(s + index * golden),
 * golden = 0x9E3779B97F4A7C15) are at least {@link #threshold}(p) = round(p * 2^24): kept with probability 1 - p to
 * 2^-25. A kept element is scaled by
 * {@link #scale}(p) = 1 / (1 - p) (in fp32, as torch's dropout), so the expectation is unchanged.
 */
public final class DropoutMask {
    private static final long GOLDEN = 0x9E3779B97F4A7C15L;

    private DropoutMask() {}

    /** splitmix64's output function (Steele, Lea, Flood 2014). */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** A mask's seed of its own for each tuple of keys (a run's seed, a step, a layer, a module...), mixed in turn. */
    public static long seed(long... keys) {
        long s = 0x6A09E667F3BCC909L;
        for (long k : keys) {
            s = mix(s + GOLDEN + mix(k));
        }
        return s;
    }

    /** The draw below which an element is dropped, of 2^24: round(p * 2^24); p in [0, 1). */
    public static int threshold(double p) {
        if (!(p >= 0 && p < 1)) {
            throw new IllegalArgumentException("dropout probability " + p + " is not in [0, 1)");
        }
        return (int) Math.round(p * (1 << 24));
    }

    /** What a kept element is multiplied by: 1 / (1 - p), rounded to fp32. */
    public static float scale(double p) {
        return (float) (1.0 / (1.0 - p));
    }

    /** Whether element {@code index} of the mask of seed {@code seed} is kept at threshold {@code threshold}. */
    public static boolean keeps(long seed, long index, int threshold) {
        return mix(seed + index * GOLDEN) >>> 40 >= threshold;
    }
}
