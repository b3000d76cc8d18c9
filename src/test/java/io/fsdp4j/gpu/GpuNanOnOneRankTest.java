package io.fsdp4j.gpu;

import io.fsdp4j.cli.NanOnOneRankTest;
import java.io.IOException;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A NaN injected into one rank's gradient on the GPU (ranks sharing one GPU, {@code dist.share_gpu}): the step is
 * skipped on every rank and the run goes on, as {@link NanOnOneRankTest} checks on CPU ranks, on the CUDA kernels'
 * loss, gradient norm and collectives.
 */
@Tag("gpu")
class GpuNanOnOneRankTest {
    @Test
    void aNanOnOneRankSkipsTheStepOnEveryRank(@TempDir Path tmp) throws IOException {
        GpuTests.requireGpus(1);
        NanOnOneRankTest.check(tmp, "dist.device=cuda", "dist.share_gpu=true");
    }

    /** The same with each rank on a GPU of its own, where two are visible (NCCL's collectives). */
    @Test
    void aNanOnOneGpuSkipsTheStepOnEveryGpu(@TempDir Path tmp) throws IOException {
        GpuTests.requireGpus(2);
        NanOnOneRankTest.check(tmp, "dist.device=cuda");
    }
}
