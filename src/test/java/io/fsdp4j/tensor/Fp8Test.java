package io.fsdp4j.tensor;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * fp8 rounding against the formats' own code tables, decoded here bit by bit from the OCP definitions (not from
 * {@link Fp8}): every finite code is a fixed point, each midpoint between neighbours goes to the even code, anything
 * past the largest finite value saturates, and the scales are torchao's.
 */
class Fp8Test {

    /** The value of e4m3fn code {@code bits} (0..255): bias 7, no infinities, S.1111.111 NaN. */
    private static float e4m3(int bits) {
        int e = (bits >> 3) & 15, m = bits & 7;
        float magnitude = e == 15 && m == 7 ? Float.NaN
                : e == 0 ? Math.scalb((float) m, -9) : Math.scalb(1f + m / 8f, e - 7);
        return (bits & 0x80) != 0 ? -magnitude : magnitude;
    }

    /** The value of e5m2 code {@code bits}: bias 15, exponent 31 infinities and NaNs. */
    private static float e5m2(int bits) {
        int e = (bits >> 2) & 31, m = bits & 3;
        float magnitude = e == 31 ? (m == 0 ? Float.POSITIVE_INFINITY : Float.NaN)
                : e == 0 ? Math.scalb((float) m, -16) : Math.scalb(1f + m / 4f, e - 15);
        return (bits & 0x80) != 0 ? -magnitude : magnitude;
    }

    /** The positive finite values of a format, in code order (which is value order). */
    private static List<Float> positives(Fp8 format) {
        List<Float> values = new ArrayList<>();
        for (int code = 0; code < 128; code++) {
            float v = format == Fp8.E4M3 ? e4m3(code) : e5m2(code);
            if (Float.isFinite(v)) {
                values.add(v);
            }
        }
        return values;
    }

    @Test
    void theTablesEndWhereTheFormatsDo() {
        assertThat(positives(Fp8.E4M3)).hasSize(127).last().isEqualTo(448f);
        assertThat(positives(Fp8.E5M2)).hasSize(124).last().isEqualTo(57344f);
        assertThat(Fp8.E4M3.max()).isEqualTo(448f);
        assertThat(Fp8.E5M2.max()).isEqualTo(57344f);
    }

    @Test
    void everyCodeIsAFixedPointAndEachMidpointGoesToTheEvenCode() {
        for (Fp8 format : Fp8.values()) {
            List<Float> v = positives(format);
            for (int code = 0; code < v.size(); code++) {
                float x = v.get(code);
                assertThat(format.round(x)).as("%s code %d", format, code).isEqualTo(x);
                assertThat(format.round(-x)).isEqualTo(-x);
                if (code + 1 < v.size()) {
                    float next = v.get(code + 1), mid = (x + next) / 2; // exact: both are short binary fractions
                    float even = code % 2 == 0 ? x : next;
                    assertThat(format.round(mid)).as("%s midpoint of codes %d, %d", format, code, code + 1)
                            .isEqualTo(even);
                    assertThat(format.round(-mid)).isEqualTo(-even);
                    assertThat(format.round(Math.nextDown(mid))).isEqualTo(x);
                    assertThat(format.round(Math.nextUp(mid))).isEqualTo(next);
                }
            }
        }
    }

    @Test
    void knownRoundings() {
        assertThat(Fp8.E4M3.round(17f)).isEqualTo(16f); // spacing 2 from 16 on: 8.5 steps to the even 8
        assertThat(Fp8.E4M3.round(19f)).isEqualTo(20f);
        assertThat(Fp8.E4M3.round(232f)).isEqualTo(224f);
        assertThat(Fp8.E4M3.round(240f)).isEqualTo(240f);
        assertThat(Fp8.E4M3.round(0.1f)).isEqualTo(0.1015625f); // 13/128
        assertThat(Fp8.E4M3.round(0x1p-10f)).isEqualTo(0f); // half the smallest subnormal: to even, zero
        assertThat(Fp8.E4M3.round(0x1.8p-9f)).isEqualTo(0x1p-8f);
        assertThat(Fp8.E5M2.round(1.125f)).isEqualTo(1f);
        assertThat(Fp8.E5M2.round(1.375f)).isEqualTo(1.5f);
        assertThat(Fp8.E5M2.round(0x1p-17f)).isEqualTo(0f);
        assertThat(Fp8.E5M2.round(0x1.8p-16f)).isEqualTo(0x1p-15f);
        assertThat(Float.floatToRawIntBits(Fp8.E4M3.round(-0f))).isEqualTo(Float.floatToRawIntBits(-0f));
    }

    @Test
    void beyondTheLargestFiniteValueSaturatesAndNanStaysNan() {
        assertThat(Fp8.E4M3.round(449f)).isEqualTo(448f);
        assertThat(Fp8.E4M3.round(464f)).isEqualTo(448f); // the midpoint to 480, which e4m3fn lacks
        assertThat(Fp8.E4M3.round(1e9f)).isEqualTo(448f);
        assertThat(Fp8.E4M3.round(Float.POSITIVE_INFINITY)).isEqualTo(448f);
        assertThat(Fp8.E4M3.round(Float.NEGATIVE_INFINITY)).isEqualTo(-448f);
        assertThat(Fp8.E5M2.round(60000f)).isEqualTo(57344f);
        assertThat(Fp8.E5M2.round(Float.NEGATIVE_INFINITY)).isEqualTo(-57344f);
        assertThat(Fp8.E4M3.round(Float.NaN)).isNaN();
        assertThat(Fp8.E5M2.round(Float.NaN)).isNaN();
    }

    @Test
    void theScaleMapsTheLargestMagnitudeOntoTheLargestValue() {
        assertThat(Fp8.E4M3.scale(2f)).isEqualTo(224f);
        assertThat(Fp8.E5M2.scale(57344f)).isEqualTo(1f);
        assertThat(Fp8.E4M3.scale(0f)).isEqualTo((float) 4.48e14); // amax floored at 1e-12
        assertThat(Fp8.E4M3.scale(3f)).isEqualTo((float) (448.0 / 3.0)); // in double, then rounded once
        float amax = 0.3f, scale = Fp8.E4M3.scale(amax);
        assertThat(Fp8.E4M3.cast(amax, scale)).isEqualTo(448f);
        assertThat(Fp8.E4M3.cast(-amax, scale)).isEqualTo(-448f);
    }
}
