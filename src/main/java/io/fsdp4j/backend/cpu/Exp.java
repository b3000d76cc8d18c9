package io.fsdp4j.backend.cpu;

/**
 * e^x in fp32 from float operations only (fused multiply-adds, products, bit moves), so that the scalar form here
 * and the vector form ({@link VectorExp}) give the same bits for every input, and the CPU backend's results stay
 * independent of which elements a vector covers. Cody and Waite's reduction x = n ln 2 + r (|r| <= ln 2 / 2, ln 2
 * in two parts), Cephes' degree-7 polynomial for e^r, then 2^n as two factors of 2^(n/2) so that results from
 * the smallest subnormals to overflow come out right. Within 2 ulp of {@code (float) Math.exp(x)} (1 ulp almost
 * everywhere: {@code ExpTest}); +infinity above 88.72, 0 below -103.98, NaN for NaN.
 */
final class Exp {
    /** x is clamped to [LOW, HIGH]: e^LOW rounds to 0 and e^HIGH to infinity, and n stays within [-150, 129]. */
    static final float LOW = -104f, HIGH = 89f;
    static final float LOG2E = 1.44269504088896341f;
    /** 1.5 * 2^23: t + MAGIC rounds t to an integer held in the low bits of the sum (round to nearest even). */
    static final float MAGIC = 12582912f;
    static final int MAGIC_BITS = Float.floatToRawIntBits(MAGIC);
    /** ln 2 in two parts: n * LN2_HI is exact for |n| < 2^9. */
    static final float LN2_HI = 0.693359375f, LN2_LO = -2.12194440e-4f;
    static final float P0 = 1.9875691500e-4f, P1 = 1.3981999507e-3f, P2 = 8.3334519073e-3f, P3 = 4.1665795894e-2f,
            P4 = 1.6666665459e-1f, P5 = 5.0000001201e-1f;

    private Exp() {}

    static float exp(float x) {
        x = Math.min(Math.max(x, LOW), HIGH); // NaN stays NaN
        float shifted = Math.fma(x, LOG2E, MAGIC);
        int n = Float.floatToRawIntBits(shifted) - MAGIC_BITS;
        float nf = shifted - MAGIC;
        float r = Math.fma(nf, -LN2_HI, x);
        r = Math.fma(nf, -LN2_LO, r);
        float p = Math.fma(P0, r, P1);
        p = Math.fma(p, r, P2);
        p = Math.fma(p, r, P3);
        p = Math.fma(p, r, P4);
        p = Math.fma(p, r, P5);
        p = Math.fma(p, r * r, r) + 1f;
        int half = n >> 1;
        return p * Float.intBitsToFloat((half + 127) << 23) * Float.intBitsToFloat((n - half + 127) << 23);
    }
}
