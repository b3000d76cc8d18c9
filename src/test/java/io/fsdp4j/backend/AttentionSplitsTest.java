package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * How the CUDA backend splits grouped-query attention's dk/dv work ({@link CudaAttentionKernels#dkdvSplits}): a divisor of
 * the group, the smallest that gives enough blocks, and no split where there are blocks enough already or no group.
 * (The kernels' numbers, split or not, are checked against the CPU backend by the GPU tests, CudaOpsTest.)
 */
class AttentionSplitsTest {
    @Test
    void qwen7bAtSeq2048SplitsEveryHead() {
        // 28 query heads, 4 key heads, 32 key tiles: 128 blocks unsplit, 896 with one query head a block
        assertThat(CudaAttentionKernels.dkdvSplits(new AttentionShape(1, 2048, 28, 4, 128, 0))).isEqualTo(7);
    }

    @Test
    void aDivisorOfTheGroupIsEnough() {
        // Llama-3-8B shapes (group 4), 256 blocks unsplit: 2 splits give 512, 4 give 1024
        assertThat(CudaAttentionKernels.dkdvSplits(new AttentionShape(1, 2048, 32, 8, 128, 0))).isEqualTo(4);
        assertThat(CudaAttentionKernels.dkdvSplits(new AttentionShape(2, 2048, 32, 8, 128, 0))).isEqualTo(2);
        // group 6 at batch 6: 384 blocks unsplit, 2 splits fall short (768), 3 reach 1152
        assertThat(CudaAttentionKernels.dkdvSplits(new AttentionShape(6, 2048, 12, 2, 128, 0))).isEqualTo(3);
    }

    @Test
    void theHalvesOfWideHeadsCountAsBlocks() {
        // head size 256, group 4, 64 key tiles x 8 key heads: 512 blocks, 1024 in two halves of the columns
        assertThat(CudaAttentionKernels.dkdvSplits(new AttentionShape(1, 4096, 32, 8, 256, 0))).isEqualTo(2);
        assertThat(CudaAttentionKernels.dkdvSplits(new AttentionShape(1, 4096, 32, 8, 256, 0), 2)).isEqualTo(1);
    }

    @Test
    void noSplitWithBlocksEnoughOrWithoutGroups() {
        assertThat(CudaAttentionKernels.dkdvSplits(new AttentionShape(8, 4096, 28, 4, 128, 0))).isEqualTo(1);
        assertThat(CudaAttentionKernels.dkdvSplits(new AttentionShape(1, 2048, 16, 16, 64, 0))).isEqualTo(1);
    }
}
