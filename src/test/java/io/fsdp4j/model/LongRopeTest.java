package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.Golden;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * longrope (Phi-3, the golden phi3 config: original length 8, 64 positions): the short factors for sequences of at
 * most 8 tokens and the long ones beyond, as transformers chooses them; cos and sin times sqrt(1 + ln 8 / ln 8).
 */
class LongRopeTest {

    @Test
    void shortFactorsUpToTheOriginalLengthLongOnesBeyondAndTheAttentionFactor() {
        ModelConfig c = Golden.config("phi3");
        List<Double> shortF = c.ropeScaling().shortFactor(), longF = c.ropeScaling().longFactor();
        double[] atOriginal = RopeTable.inverseFrequencies(c, 8), beyond = RopeTable.inverseFrequencies(c, 9);
        for (int j = 0; j < 4; j++) {
            double base = 1 / Math.pow(10000.0, 2.0 * j / 8);
            assertThat(atOriginal[j]).isCloseTo(base / shortF.get(j), within(1e-15));
            assertThat(beyond[j]).isCloseTo(base / longF.get(j), within(1e-15));
        }
        RopeTable table = RopeTable.of(c, 16, 9);
        double angle = 5 * beyond[1];
        assertThat(table.cos()[5 * 4 + 1]).isCloseTo((float) (Math.cos(angle) * Math.sqrt(2)), within(1e-6f));
        assertThat(table.sin()[5 * 4 + 1]).isCloseTo((float) (Math.sin(angle) * Math.sqrt(2)), within(1e-6f));
    }
}
