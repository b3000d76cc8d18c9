package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The segments' launch of the GPU's AdamW (no GPU needed): each segment's blocks follow the one before from block 0, a
 * segment's share follows its length, and every segment, however short, gets a block of its own (adamw.cu gives each
 * block one segment: a segment without one would not be updated).
 */
class CudaAdamWLaunchTest {
    @Test
    void eachSegmentGetsBlocksInProportionToItsLengthAndAtLeastOne() {
        List<AdamWSegment> segments = List.of(new AdamWSegment(0, 3584, false),
                new AdamWSegment(3584, 12_845_056, true),
                new AdamWSegment(12_848_640, 512, false), new AdamWSegment(12_849_152, 67_895_296, true));
        CudaAdamW.Launch launch = CudaAdamW.launchOf(segments, 65_536);
        int[] t = launch.table();
        assertThat(t).hasSize(16);
        for (int s = 0; s < 4; s++) {
            assertThat(t[4 * s]).as("start %d", s).isEqualTo(segments.get(s).offset());
            assertThat(t[4 * s + 1]).as("length %d", s).isEqualTo(segments.get(s).length());
            assertThat(t[4 * s + 2]).as("decays %d", s).isEqualTo(segments.get(s).decays() ? 1 : 0);
        }
        int[] firsts = {t[3], t[7], t[11], t[15], launch.grid()};
        assertThat(firsts[0]).isZero();
        int[] blocks = new int[4];
        for (int s = 0; s < 4; s++) {
            blocks[s] = firsts[s + 1] - firsts[s];
            assertThat(blocks[s]).as("segment %d's blocks", s).isPositive();
        }
        assertThat(blocks[0]).isEqualTo(3); // 65536 x 3584 / 80.7M = 2.9, rounded up
        assertThat(blocks[2]).isEqualTo(1);
        assertThat((double) blocks[3] / blocks[1]).isCloseTo(67_895_296.0 / 12_845_056, within(0.01));
        assertThat(launch.grid()).isBetween(65_536, 65_536 + 4);
    }

    @Test
    void aGridSmallerThanTheSegmentsGivesEachOneBlock() {
        List<AdamWSegment> segments = List.of(new AdamWSegment(0, 5, true), new AdamWSegment(5, 3330, false),
                new AdamWSegment(3335, 4097, true), new AdamWSegment(7440, 2, false), new AdamWSegment(7445, 0, true));
        CudaAdamW.Launch launch = CudaAdamW.launchOf(segments, 1);
        assertThat(launch.grid()).isEqualTo(5);
        for (int s = 0; s < 5; s++) {
            assertThat(launch.table()[4 * s + 3]).isEqualTo(s);
        }
    }
}
