package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The sweep's arguments and lines (the GPU part runs on the GPU machine: {@link AttentionRates}). */
class AttentionRatesSweepTest {

    @Test
    void withoutOptionsTheSweepIsThePlansGrid() {
        var grid = AttentionRates.parseSweep(List.of());
        assertThat(grid.headSizes()).containsExactly(64, 128);
        assertThat(grid.heads()).containsExactly(4, 8, 12, 14, 16, 24, 28, 32, 40, 64);
        assertThat(grid.lengths()).containsExactly(512, 1024, 2048, 4096, 8192, 16384);
        assertThat(AttentionRates.Grid.kvHeads(14)).isEqualTo(2);
        assertThat(AttentionRates.Grid.kvHeads(28)).isEqualTo(4);
    }

    @Test
    void aWindowCountsOnlyThePairsWithinIt() {
        assertThat(AttentionRates.pairs(4, 0)).isEqualTo(10); // 1 + 2 + 3 + 4
        assertThat(AttentionRates.pairs(4, 4)).isEqualTo(10);
        assertThat(AttentionRates.pairs(5, 2)).isEqualTo(9); // 1 + 2 + 2 + 2 + 2
        assertThat(AttentionRates.pairs(8192, 4096)).isEqualTo(4096.0 * 4097 / 2 + 4096.0 * 4096);
    }

    @Test
    void optionsNarrowTheGrid() {
        var grid = AttentionRates.parseSweep(List.of("--seq", "2048,8192", "--heads", "28", "--head-sizes", "128"));
        assertThat(grid).isEqualTo(new AttentionRates.Grid(List.of(128), List.of(28), List.of(2048, 8192)));
    }

    @Test
    void badArgumentsSayWhatIsWrong() {
        assertThatThrownBy(() -> AttentionRates.parseSweep(List.of("--seq")))
                .hasMessageContaining("--seq needs a value");
        assertThatThrownBy(() -> AttentionRates.parseSweep(List.of("--seq", "2048,x")))
                .hasMessageContaining("'x' is not an integer");
        assertThatThrownBy(() -> AttentionRates.parseSweep(List.of("--seq", "0"))).hasMessageContaining("not positive");
        assertThatThrownBy(() -> AttentionRates.parseSweep(List.of("--head-sizes", "96")))
                .hasMessageContaining("64 and 128");
        assertThatThrownBy(() -> AttentionRates.parseSweep(List.of("--heads", "18")))
                .hasMessageContaining("18 query heads do not group over 4");
        assertThatThrownBy(() -> AttentionRates.parseSweep(List.of("--batch", "2")))
                .hasMessageContaining("unknown option '--batch'");
        assertThat(AttentionRates.parseLengths(List.of())).containsExactly(2048, 4096, 8192, 16384);
        assertThat(AttentionRates.parseLengths(List.of("512", "1024,2048"))).containsExactly(512, 1024, 2048);
    }

    /**
     * A line: both engines' times, auto's pick per direction (the faster; fsdp4j's kernels on a tie or where cuDNN did
     * not run) and the picked engine's TFLOP/s; the preamble ends in the header naming those columns.
     */
    @Test
    void aLineNamesEachDirectionsFasterEngineAndItsRate() {
        // 28 heads of 128 at 2048 tokens: 4 * 28 * 128 * 2048 * 2049 / 2 FLOPs forward = 30.08 GFLOP
        var timed = new AttentionRates.Timed(128, 28, 4, 2048, 0.0800, 0.5750, 0.2420, 0.2850, false);
        double flops = 4.0 * 28 * 128 * 2048 * 2049 / 2;
        assertThat(timed.line()).isEqualTo(String.format(java.util.Locale.ROOT,
                "sweep 128 28 4 2048 0.0800 0.5750 0.2420 0.2850 fsdp4j cudnn %.1f %.1f",
                flops / 0.08 / 1e9, 2.5 * flops / 0.285 / 1e9));
        var noCudnn = new AttentionRates.Timed(64, 4, 2, 512, 0.0100, 0.0300, Double.NaN, Double.NaN, true);
        assertThat(noCudnn.line()).startsWith("sweep 64 4 2 512 0.0100 0.0300 - - fsdp4j fsdp4j ").endsWith(" host");
        var tie = new AttentionRates.Timed(64, 4, 2, 512, 0.0100, 0.0300, 0.0100, 0.0300, false);
        assertThat(tie.line()).contains(" fsdp4j fsdp4j ");
        var preamble = AttentionRates.preamble("NVIDIA H200 (sm_90)", "cuDNN 9.14.0", true,
                AttentionRates.parseSweep(List.of()));
        assertThat(preamble.getLast()).isEqualTo(AttentionRates.HEADER);
        assertThat(preamble.subList(0, preamble.size() - 1)).allMatch(l -> l.startsWith("# "));
        assertThat(String.join("\n", preamble)).contains("--seq 512,1024,2048,4096,8192,16384", "Hopper's forward");
        assertThat(AttentionRates.HEADER.split(" ")).hasSize(timed.line().split(" ").length);
    }

    @Test
    void repetitionsFillAboutTwentyMilliseconds() {
        assertThat(AttentionRates.repsFor(0.01)).isEqualTo(50);
        assertThat(AttentionRates.repsFor(0.5)).isEqualTo(40);
        assertThat(AttentionRates.repsFor(9)).isEqualTo(3);
        assertThat(AttentionRates.repsFor(100)).isEqualTo(3);
    }
}
