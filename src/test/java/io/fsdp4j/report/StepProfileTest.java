package io.fsdp4j.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.report.StepProfile.Span;
import io.fsdp4j.report.StepProfile.Stream;
import java.util.List;
import org.junit.jupiter.api.Test;

class StepProfileTest {
    private static Span compute(String op, double from, double to) {
        return new Span(op, Stream.COMPUTE, from, to);
    }

    private static Span comm(String op, double from, double to) {
        return new Span(op, Stream.COMMUNICATION, from, to);
    }

    @Test
    void splitsTheStepIntoComputeExposedCommunicationAndHostGaps() {
        // compute 0-10 and 20-30 and 35-40; a gather 5-25 (hidden 5-10 and 20-25, exposed 10-20);
        // idle 30-35 with nothing communicating: a host gap
        var p = new StepProfile(40, List.of(
                compute("gemm", 0, 10), compute("gemm", 20, 30), compute("attention", 35, 40),
                comm("nccl all-gather", 5, 25)));
        assertThat(p.computeMs()).isCloseTo(25, within(1e-9));
        assertThat(p.communicationMs()).isCloseTo(20, within(1e-9));
        assertThat(p.exposedCommunicationMs()).isCloseTo(10, within(1e-9));
        assertThat(p.hostGapMs()).isCloseTo(5, within(1e-9));
        assertThat(p.computeMs() + p.exposedCommunicationMs() + p.hostGapMs()).isCloseTo(p.stepMs(), within(1e-9));
    }

    @Test
    void overlappingOperationsOnAStreamCountOnce() {
        var p = new StepProfile(10, List.of(comm("a", 0, 6), comm("b", 4, 8), compute("k", 0, 2)));
        assertThat(p.communicationMs()).isCloseTo(8, within(1e-9));
        // compute idle 2-10, communication 0-8: exposed 2-8
        assertThat(p.exposedCommunicationMs()).isCloseTo(6, within(1e-9));
        assertThat(p.hostGapMs()).isCloseTo(2, within(1e-9));
    }

    @Test
    void totalsGroupByOperationLargestFirst() {
        var p = new StepProfile(10, List.of(compute("gemm", 0, 1), compute("norm", 1, 5), compute("gemm", 5, 7)));
        assertThat(p.totals()).extracting(StepProfile.OpTotal::op).containsExactly("norm", "gemm");
        assertThat(p.totals().get(1).count()).isEqualTo(2);
        assertThat(p.totals().get(1).ms()).isCloseTo(3, within(1e-9));
        String table = p.table(1);
        assertThat(table).contains("compute (compute stream busy)", "norm", "(other operations)")
                .doesNotContain(" gemm ");
        assertThat(p.table(0)).contains(" norm ", " gemm ").doesNotContain("(other operations)"); // 0: every one
    }

    @Test
    void hostGapsAreNamedByTheOperationsAroundThemLongestFirst() {
        // idle 2-3 (between gemm and norm), 6-10 of which a reduce-scatter covers 6-7 (gap 7-10, before attention),
        // and 12-13 at the end
        var p = new StepProfile(13, List.of(compute("gemm", 0, 2), compute("norm", 3, 6),
                comm("nccl reduce-scatter", 6, 7), compute("attention", 10, 12)));
        assertThat(p.hostGaps()).extracting(StepProfile.HostGap::ms).containsExactly(3.0, 1.0, 1.0);
        var longest = p.hostGaps().getFirst();
        assertThat(longest.startMs()).isEqualTo(7);
        assertThat(longest.after()).isEqualTo("norm");
        assertThat(longest.before()).isEqualTo("attention");
        assertThat(p.hostGaps().stream().mapToDouble(StepProfile.HostGap::ms).sum()).isCloseTo(p.hostGapMs(), within(1e-9));
        assertThat(p.hostGaps()).anySatisfy(g -> {
            assertThat(g.after()).isEqualTo("attention");
            assertThat(g.before()).isNull(); // the step's end
        });
        assertThat(p.table(0)).contains("host gaps: 3", "after norm, before attention", "before (the step's end)");
    }

    @Test
    void aSpanEndingBeforeItStartsIsRefused() {
        assertThatThrownBy(() -> compute("k", 3, 2)).isInstanceOf(IllegalArgumentException.class);
    }
}
