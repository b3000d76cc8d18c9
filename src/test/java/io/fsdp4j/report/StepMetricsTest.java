package io.fsdp4j.report;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class StepMetricsTest {
    @Test
    void recordHasTheDocumentedKeysInOrder() {
        var m = StepMetrics.of(7, 2.5, 0.75, 1e-3, 4096, 4000, 2.0, 4, Double.NaN, 1.5);
        assertThat(m.toMap()).containsExactly(
                org.assertj.core.api.Assertions.entry("step", 7),
                org.assertj.core.api.Assertions.entry("loss", 2.5),
                org.assertj.core.api.Assertions.entry("grad_norm", 0.75),
                org.assertj.core.api.Assertions.entry("lr", 1e-3),
                org.assertj.core.api.Assertions.entry("tokens", 4096L),
                org.assertj.core.api.Assertions.entry("loss_tokens", 4000L),
                org.assertj.core.api.Assertions.entry("step_s", 2.0),
                org.assertj.core.api.Assertions.entry("tok_s", 2048.0),
                org.assertj.core.api.Assertions.entry("tok_s_gpu", 512.0),
                org.assertj.core.api.Assertions.entry("mfu", null),
                org.assertj.core.api.Assertions.entry("peak_reserved_gib", 1.5));
        assertThat(m.peakMemoryBytes()).isEqualTo(3L << 29);
    }

    @Test
    void aDefinedMfuIsWritten() {
        var m = StepMetrics.of(1, 1, 1, 1, 10, 10, 1, 1, 0.42, 0);
        assertThat(m.toMap()).containsEntry("mfu", 0.42);
    }
}
