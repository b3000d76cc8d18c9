package io.fsdp4j.backend.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class CpuWarmupTest {
    /** A round runs every kernel on its made-up inputs; what it computes is finite and the same from round to round. */
    @Test
    void aRoundRunsEveryKernelToFiniteValues() {
        CpuWarmup.Round first = new CpuWarmup.Round(), second = new CpuWarmup.Round();
        first.run(0);
        second.run(0);
        for (float[] out : new float[][] {first.attn, first.y, first.dQkv, first.dTable, first.dWQkv, first.genOut}) {
            for (float v : out) {
                assertThat(Float.isFinite(v)).isTrue();
            }
        }
        assertThat(first.attn).containsExactly(second.attn);
        assertThat(first.dTable).containsExactly(second.dTable);
        assertThat(first.genOut).containsExactly(second.genOut);
        assertThat(first.rowLoss).containsExactly(second.rowLoss);
        assertThat(first.rowLoss[1]).isPositive(); // a position with a label has its loss
        assertThat(first.rowLoss[0]).isZero(); // one without (-100) has none
    }

    /** The thread stops once a rank holds a core, whatever rounds are left. */
    @Test
    void stopsOnceARankHoldsACore() throws InterruptedException {
        CpuWarmup.start();
        CpuWarmup.start(); // once per process
        Parallel.holdingCore(() -> { });
        assertThat(CpuWarmup.awaitEnd(60_000)).isTrue();
    }
}
