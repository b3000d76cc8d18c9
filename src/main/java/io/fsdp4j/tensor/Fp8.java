package io.fsdp4j.tensor;

/**
 * The two 8-bit float formats of fp8 training (OCP's, Hopper's tensor cores'), and the scaling that maps a tensor
 * into one of them, as torchao's float8 training does:
 * <ul>
 *   <li>{@link #E4M3} (float8_e4m3fn): 4 exponent bits (bias 7), 3 mantissa bits, no infinities, largest 448,
 *   smallest normal 2^-6, subnormals in steps of 2^-9; weights and inputs.</li>
 *   <li>{@link #E5M2}: 5 exponent bits (bias 15), 2 mantissa bits, largest finite 57344, smallest normal 2^-14,
 *   subnormals in steps of 2^-16; output gradients (more range, less precision).</li>
 * </ul>
 * A value is rounded as PTX's {@code cvt.rn.satfinite} does: to nearest, ties to even, a magnitude beyond the largest
 * finite value (infinity included) saturated to it, NaN kept NaN. A tensor is cast with a scale of its own (the
 * "tensorwise" recipe): {@code scale = max / amax} ({@link #scale}), each element stored as {@code round(x * scale)},
 * and a product of two cast tensors multiplied back by both scales' inverses.
 */
public enum Fp8 {
    E4M3(3, -6, 448f),
    E5M2(2, -14, 57344f);

    /** torchao's floor under a tensor's amax before the scale is taken (an all-zero tensor gets a finite scale). */
    public static final double AMAX_FLOOR = 1e-12;

    private final int mantissaBits;
    private final int minNormalExponent;
    private final float max;

    Fp8(int mantissaBits, int minNormalExponent, float max) {
        this.mantissaBits = mantissaBits;
        this.minNormalExponent = minNormalExponent;
        this.max = max;
    }

    /** The largest finite value. */
    public float max() {
        return max;
    }

    /** {@code x} rounded to this format (nearest, ties to even; saturated at {@link #max}; NaN stays NaN), as fp32. */
    public float round(float x) {
        if (Float.isNaN(x)) {
            return x;
        }
        float a = Math.abs(x);
        if (a >= max) { // beyond the largest finite value (infinity too): saturated
            return Math.copySign(max, x);
        }
        // the spacing of representable values at |x|: 2^(e - mantissa bits), subnormals keep the smallest normal's
        int exponent = Math.max(Math.getExponent(a), minNormalExponent);
        float quantum = Math.scalb(1f, exponent - mantissaBits);
        float rounded = (float) Math.rint(a / quantum) * quantum; // a / quantum is exact: a power-of-two scaling
        return Math.copySign(Math.min(rounded, max), x);
    }

    /**
     * The scale of a tensor whose largest magnitude is {@code amax}: max / max(amax, 1e-12), computed in double and
     * rounded to fp32 (torchao's amax_to_scale), so that the largest element lands on the format's largest value.
     */
    public float scale(float amax) {
        return (float) (max / Math.max((double) amax, AMAX_FLOOR));
    }

    /** {@code x * scale} (an fp32 product) rounded to this format: an element of a cast tensor. */
    public float cast(float x, float scale) {
        return round(x * scale);
    }
}
