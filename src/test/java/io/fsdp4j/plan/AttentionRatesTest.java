package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;

class AttentionRatesTest {
    private static final AttentionRates TABLE = AttentionRates.load("/plan/attention-h200.txt");

    /** At the table's own points the rates are its measurements (forward, backward TFLOP/s of the sweep's lines). */
    @Test
    void atAMeasuredShapeTheRatesAreTheMeasuredOnes() {
        assertThat(TABLE.alone(128, 28, 2048)).containsExactly(211.4e12, 114.1e12);
        assertThat(TABLE.alone(128, 12, 2048)).containsExactly(118.3e12, 96.5e12);
        assertThat(TABLE.alone(64, 14, 4096)).containsExactly(204.0e12, 98.7e12);
    }

    /** Between points: in log(heads) and log(sequence), so 2896 tokens (2048 * sqrt 2) is the two rates' midpoint. */
    @Test
    void betweenPointsTheRatesAreInterpolatedInLogScale() {
        double[] mid = TABLE.alone(128, 28, Math.round(2048 * Math.sqrt(2)));
        assertThat(mid[0]).isCloseTo((211.4e12 + 238.5e12) / 2, within(0.01e12));
        double[] heads13 = TABLE.alone(128, 13, 2048); // between 12 (118.3) and 14 (129.8)
        assertThat(heads13[0]).isBetween(118.3e12, 129.8e12);
        double[] hs96 = TABLE.alone(96, 28, 2048); // halfway between head sizes 64 (191.6) and 128 (211.4)
        assertThat(hs96[0]).isCloseTo((191.6e12 + 211.4e12) / 2, within(0.01e12));
    }

    /** Outside the table the nearest edge holds: no extrapolation. */
    @Test
    void outsideTheTableTheEdgeHolds() {
        assertThat(TABLE.alone(128, 28, 32768)).containsExactly(TABLE.alone(128, 28, 8192));
        assertThat(TABLE.alone(128, 28, 128)).containsExactly(TABLE.alone(128, 28, 512));
        assertThat(TABLE.alone(128, 200, 2048)).containsExactly(TABLE.alone(128, 64, 2048));
        assertThat(TABLE.alone(256, 28, 2048)).containsExactly(TABLE.alone(128, 28, 2048));
        assertThat(TABLE.alone(32, 28, 2048)).containsExactly(TABLE.alone(64, 28, 2048));
    }

    /**
     * Fewer heads and shorter sequences run slower; a batch of B sequences fills the GPU as B times the heads do; in
     * a step the rates are the table's times the in-step factors (0.5B's profile: a little below 1).
     */
    @Test
    void theRatesInAStepFollowHeadsBatchAndSequence() {
        var qwen7b = AttentionRates.inStep(128, 28, 1, 2048);
        var qwen15b = AttentionRates.inStep(128, 12, 1, 2048);
        assertThat(qwen15b.forward()).isLessThan(0.6 * qwen7b.forward());
        assertThat(AttentionRates.inStep(128, 28, 1, 512).forward()).isLessThan(0.35 * qwen7b.forward());
        assertThat(AttentionRates.inStep(128, 12, 2, 2048).forward()).isCloseTo(
                TABLE.alone(128, 24, 2048)[0] * AttentionRates.IN_STEP_FORWARD, within(1e6));
        assertThat(AttentionRates.IN_STEP_FORWARD).isBetween(0.9, 1.0);
        assertThat(AttentionRates.IN_STEP_BACKWARD).isBetween(0.9, 1.0);
        assertThat(qwen7b.forward()).isCloseTo(211.4e12 * AttentionRates.IN_STEP_FORWARD, within(1e6));
    }
}
