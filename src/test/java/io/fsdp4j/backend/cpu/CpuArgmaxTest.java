package io.fsdp4j.backend.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Each row's argmax: the lowest index on ties, NaN never the largest, a row of NaN only gives 0. */
class CpuArgmaxTest {
    @Test
    void eachRowsLargestValueTheFirstOnTiesNeverNaN() {
        float nan = Float.NaN;
        float[] z = {
            9, // an offset the rows start after
            1, 5, 3, 5, // a tie: index 1
            nan, -2, -1, -3, // NaN first: index 2
            nan, nan, nan, nan, // NaN only: 0
            -4, -3, -2, 7, // the last
        };
        assertThat(CpuLoss.argmaxRows(z, 1, 4, 4)).containsExactly(1, 2, 0, 3);
        assertThat(CpuLoss.argmaxRows(z, 0, 1, 4)).containsExactly(0);
    }
}
