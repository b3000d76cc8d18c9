package io.fsdp4j.gpu;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.NativeLibraries;

/**
 * Shared by the GPU tests: they are tagged {@code gpu}, skip (counted as skipped) where no GPU is visible, and run
 * on the GPU machine through {@code tools/gpu/run.sh tests}.
 */
final class GpuTests {
    private GpuTests() {}

    static void requireGpus(int count) {
        assumeTrue(NativeLibraries.cudaAvailable(), () -> "no GPU: " + NativeLibraries.whyCudaUnavailable().orElse(""));
        assumeTrue(Cuda.deviceCount() >= count, () -> "needs " + count + " GPUs, " + Cuda.deviceCount() + " visible");
    }
}
