package io.fsdp4j.backend.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import jdk.incubator.vector.FloatVector;
import org.junit.jupiter.api.Test;

/**
 * {@link Exp}: within 2 ulp of Math.exp over the whole range, the edges exact (0, infinity, NaN), and the vector form
 * the same bits as the scalar one lane by lane, so that which values a vector covers never shows in a result.
 */
class ExpTest {
    private static final float[] EDGES = {0f, -0f, 1f, -1f, 0.5f, -0.34657359f, 0.34657359f, 88.72f, 88.7228f, 88.73f,
        89f, 100f, -87.3f, -87.34f, -100f, -103.9f, -104f, -110f, Float.MAX_VALUE, -Float.MAX_VALUE,
        Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN, Float.MIN_VALUE, 1e-30f, -1e-30f};

    private static float[] inputs() {
        SplittableRandom r = new SplittableRandom(7);
        float[] x = new float[200_000 + EDGES.length];
        for (int i = 0; i < 200_000; i++) {
            x[i] = i % 2 == 0 ? (float) r.nextDouble(-110, 95) : (float) r.nextDouble(-12, 12);
        }
        System.arraycopy(EDGES, 0, x, 200_000, EDGES.length);
        return x;
    }

    @Test
    void isWithinTwoUlpOfMathExp() {
        for (float x : inputs()) {
            float expected = (float) Math.exp(x), got = Exp.exp(x);
            if (Float.isNaN(expected) || Float.isInfinite(expected) || expected == 0f) {
                assertThat(Float.valueOf(got)).as("e^%s", x).isEqualTo(Float.valueOf(expected)); // NaN equals NaN
            } else {
                assertThat(Math.abs(got - expected)).as("e^%s", x).isLessThanOrEqualTo(2 * Math.ulp(expected));
            }
        }
    }

    @Test
    void vectorGivesTheScalarBits() {
        float[] x = inputs();
        int l = FloatVector.SPECIES_PREFERRED.length();
        float[] got = new float[l];
        for (int i = 0; i + l <= x.length; i += l) {
            VectorExp.exp(FloatVector.fromArray(FloatVector.SPECIES_PREFERRED, x, i)).intoArray(got, 0);
            for (int k = 0; k < l; k++) {
                assertThat(Float.floatToRawIntBits(got[k])).as("e^%s", x[i + k])
                        .isEqualTo(Float.floatToRawIntBits(Exp.exp(x[i + k])));
            }
        }
    }
}
