package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * When Hopper's attention backward runs as one kernel ({@link CudaAttentionKernels#fusedBackward}): head size 128,
 * a span of at least 4096 keys (the sequence, or the window if shorter), one sequence a call or sequences of at least
 * 16384 tokens, no packed documents. The kernel's numbers are HopperAttentionGpuTest's (on a GPU); its speed by shape
 * is in docs/benchmarks.md.
 */
class HopperFusedBackwardTest {
    @Test
    void longSequencesAtHeadSize128RunOneKernel() {
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(1, 16384, 28, 4, 128, 0), false)).isTrue();
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(1, 4096, 32, 8, 128, 0), false)).isTrue();
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(2, 16384, 28, 4, 128, 0), false)).isTrue();
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(1, 4150, 4, 1, 128, 0), false)).isTrue();
    }

    @Test
    void shortSequencesRunTheTwoKernels() {
        // 2048 tokens at 8 sequences: the one kernel measured 0.94x (zeroing and reading its fp32 sums)
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(8, 2048, 28, 4, 128, 0), false)).isFalse();
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(1, 4095, 28, 4, 128, 0), false)).isFalse();
    }

    @Test
    void severalSequencesOfUnder16384TokensRunTheTwoKernels() {
        // an H100: 0.59-0.98x for 2 to 4 sequences of 4096 or 8192 tokens
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(2, 8192, 28, 4, 128, 0), false)).isFalse();
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(4, 4096, 12, 2, 128, 0), false)).isFalse();
    }

    @Test
    void aWindowShorterThan4096KeysIsAShortSpan() {
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(1, 16384, 32, 8, 128, 4096), false)).isTrue();
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(1, 4200, 4, 2, 128, 4096), false)).isTrue();
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(1, 16384, 32, 8, 128, 2048), false)).isFalse();
    }

    @Test
    void packedDocumentsAndOtherHeadSizesRunTheTwoKernels() {
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(1, 16384, 28, 4, 128, 0), true)).isFalse();
        assertThat(CudaAttentionKernels.fusedBackward(new AttentionShape(1, 16384, 14, 2, 64, 0), false)).isFalse();
    }
}
