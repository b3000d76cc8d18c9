package io.fsdp4j.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * How a timed product picks among cuBLASLt's candidates ({@code matmul.algorithm: timed}): the fastest, unless it is
 * within timing noise of the heuristic's first (candidate 0), which then stays. On the CPU: the rule alone; the GPU
 * side is {@code gpu.MatmulAlgorithmGpuTest}.
 */
class CublasLtChoiceTest {

    @Test
    void theFastestReplacesTheFirstOnlyWhenClearlyFaster() {
        assertThat(CublasLt.fastest(new float[] {1.00f, 1.05f, 0.90f, 0.95f}, 0.98)).isEqualTo(2);
        assertThat(CublasLt.fastest(new float[] {1.00f, 0.99f, 1.20f}, 0.98)).isEqualTo(0); // 1% faster: noise
        assertThat(CublasLt.fastest(new float[] {1.00f, 0.975f}, 0.98)).isEqualTo(1);
        assertThat(CublasLt.fastest(new float[] {1.00f, 0.985f}, 0.98)).isEqualTo(0);
        assertThat(CublasLt.fastest(new float[] {0.50f, 0.70f, 0.60f}, 0.98)).isEqualTo(0); // the first is fastest
        assertThat(CublasLt.fastest(new float[] {1.00f}, 0.98)).isEqualTo(0);
    }

    @Test
    void candidatesThatDidNotRunAreNeverPicked() {
        float inf = Float.POSITIVE_INFINITY;
        assertThat(CublasLt.fastest(new float[] {inf, 2.0f, 1.5f}, 0.98)).isEqualTo(2); // the first refused to run
        assertThat(CublasLt.fastest(new float[] {1.0f, inf, inf}, 0.98)).isEqualTo(0);
    }
}
