package io.fsdp4j.tensor;

/**
 * Conversions between fp32 and the 16-bit float formats, rounding as the hardware does: round to nearest,
 * ties to even, NaN kept NaN.
 */
public final class Half {
    private Half() {}

    /** fp32 to bf16 bits (round to nearest even). */
    public static short toBf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        if ((bits & 0x7fffffff) > 0x7f800000) {
            return (short) ((bits >>> 16) | 0x0040); // quiet NaN, sign kept
        }
        int roundingBias = 0x7fff + ((bits >>> 16) & 1);
        return (short) ((bits + roundingBias) >>> 16);
    }

    public static float fromBf16(short h) {
        return Float.intBitsToFloat((h & 0xffff) << 16);
    }

    /** Rounds an fp32 value to the nearest bf16 value, returned as fp32. */
    public static float roundBf16(float f) {
        return fromBf16(toBf16(f));
    }

    /** fp32 to IEEE fp16 bits (round to nearest even). */
    public static short toF16(float f) {
        return Float.floatToFloat16(f);
    }

    public static float fromF16(short h) {
        return Float.float16ToFloat(h);
    }

    /** Rounds an fp32 value to the nearest fp16 value (infinite beyond 65504), returned as fp32. */
    public static float roundF16(float f) {
        return fromF16(toF16(f));
    }

    /** fp32 to the bits of a 16-bit float type ({@link DType#BF16} or {@link DType#F16}). */
    public static short toBits(DType dtype, float f) {
        return switch (dtype) {
            case BF16 -> toBf16(f);
            case F16 -> toF16(f);
            default -> throw new IllegalArgumentException("not a 16-bit float type: " + dtype);
        };
    }

    /** The value of the bits of a 16-bit float type ({@link DType#BF16} or {@link DType#F16}). */
    public static float fromBits(DType dtype, short h) {
        return switch (dtype) {
            case BF16 -> fromBf16(h);
            case F16 -> fromF16(h);
            default -> throw new IllegalArgumentException("not a 16-bit float type: " + dtype);
        };
    }
}
