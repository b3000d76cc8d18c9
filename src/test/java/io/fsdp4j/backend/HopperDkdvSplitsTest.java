package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link HopperDkdvSplits} picks, at each shape measured on an H100 (132 multiprocessors, 2026-11-27, one sequence,
 * head size 128, `attention_sm90_harness --splits`; docs/benchmarks.md), the split count that ran fastest there.
 */
class HopperDkdvSplitsTest {
    @ParameterizedTest(name = "{0} tokens, {1} / {2} heads: {3} splits")
    @CsvSource({
        // tokens, query heads, key heads, the fastest measured split (its time and the others', ms)
        "2048, 28, 4, 7", // 0.138; 1: 0.318
        "2048, 12, 2, 6", // 0.063; 3: 0.101, 2: 0.142, 1: 0.268
        "2048, 32, 8, 2", // 0.130; 4: 0.157, 1: 0.191
        "2048, 14, 2, 7", // 0.067; 1: 0.309
        "4096, 28, 4, 7", // 0.422; 1: 0.625
        "4096, 12, 2, 6", // 0.194; 3: 0.200, 2: 0.279, 1: 0.520
        "4096, 32, 8, 1", // 0.387; 2: 0.433, 4: 0.484
        "4096, 14, 2, 7", // 0.215; 1: 0.608
        "8192, 28, 4, 1", // 1.302; 7: 1.454 (two waves of blocks would have wanted 7)
        "8192, 12, 2, 2", // 0.573; 6: 0.618, 3: 0.631, 1: 1.051
        "8192, 32, 8, 1", // 1.477; 2: 1.565, 4: 1.672
        "8192, 14, 2, 7", // 0.724; 1: 1.239
        "16384, 28, 4, 1", // 5.451; 7: 5.926
        "16384, 12, 2, 1", // 2.205; 2: 2.243 (two waves would have wanted 2), 3: 2.269, 6: 2.282
        "16384, 32, 8, 1", // 6.263; 2: 6.311, 4: 6.729
        "16384, 14, 2, 1", // 2.595; 7: 2.744
    })
    void picksTheFastestMeasuredSplit(int tokens, int heads, int kvHeads, int fastest) {
        assertThat(HopperDkdvSplits.choose(new AttentionShape(1, tokens, heads, kvHeads, 128, 0), 132))
                .isEqualTo(fastest);
    }

    @Test
    void moreSequencesOrMultiprocessorsMoveTheChoice() {
        // 8 sequences of 2048 fill the GPU as one of 16384 does
        assertThat(HopperDkdvSplits.choose(new AttentionShape(8, 2048, 28, 4, 128, 0), 132)).isEqualTo(1);
        // one multiprocessor: nothing to balance, so no partial sums
        assertThat(HopperDkdvSplits.choose(new AttentionShape(1, 2048, 28, 4, 128, 0), 1)).isEqualTo(1);
        // no group to split
        assertThat(HopperDkdvSplits.choose(new AttentionShape(1, 100, 4, 4, 64, 0), 132)).isEqualTo(1);
    }

    @Test
    void aWindowShortensTheBlocks() {
        var causal = new AttentionShape(1, 16384, 32, 8, 128, 0);
        var windowed = new AttentionShape(1, 16384, 32, 8, 128, 4096);
        assertThat(HopperDkdvSplits.predictedSeconds(windowed, 1, 132))
                .isLessThan(HopperDkdvSplits.predictedSeconds(causal, 1, 132) * 0.5);
    }

    @Test
    void theSumsCostMemoryTrafficThatOneSplitDoesNotHave() {
        var s = new AttentionShape(1, 16384, 28, 4, 128, 0);
        // same balance (3584 blocks or 512, both many waves), but 7 splits' fp32 sums are 0.47 GB read and written
        double one = HopperDkdvSplits.predictedSeconds(s, 1, 132), seven = HopperDkdvSplits.predictedSeconds(s, 7, 132);
        assertThat(seven - one).isBetween(0.1e-3, 0.5e-3);
    }
}
