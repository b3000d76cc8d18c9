package io.fsdp4j.backend.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The cross-entropy's row maximum (vectorised when the JVM can) against the scalar chain of {@link Math#max}, bit for
 * bit: at every length and offset around the vector width, with NaN, both zeros and infinities among the values.
 */
class CpuLossTest {
    private static float scalarMax(float[] z, int from, int to) {
        float max = Float.NEGATIVE_INFINITY;
        for (int j = from; j < to; j++) {
            max = Math.max(max, z[j]);
        }
        return max;
    }

    @Test
    void rowMaximumIsTheScalarChainsBits() {
        SplittableRandom r = new SplittableRandom(28);
        float[] specials = {Float.NaN, -0f, 0f, Float.NEGATIVE_INFINITY, Float.POSITIVE_INFINITY};
        for (int length = 0; length <= 70; length++) {
            for (int from = 0; from < 3; from++) {
                for (int trial = 0; trial < 20; trial++) {
                    float[] z = new float[from + length + 2];
                    for (int i = 0; i < z.length; i++) {
                        // mostly one sign of zero or negatives, so that -0 against +0 and -inf decide some rows
                        z[i] = r.nextInt(4) == 0 ? specials[r.nextInt(trial < 10 ? 4 : 5)]
                                : trial % 3 == 0 ? -(float) r.nextDouble() : (float) (r.nextDouble() * 8 - 4);
                    }
                    int to = from + length;
                    assertThat(Float.floatToRawIntBits(CpuLoss.max(z, from, to)))
                            .as("length %d from %d trial %d", length, from, trial)
                            .isEqualTo(Float.floatToRawIntBits(scalarMax(z, from, to)));
                }
            }
        }
    }
}
