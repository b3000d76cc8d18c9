package io.fsdp4j.gpu;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.fsdp4j.backend.CudaBackend;
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

    /** Milliseconds a call of {@code op} takes on {@code gpu}'s stream: one call to warm up, {@code reps} timed. */
    static double millisPerCall(CudaBackend gpu, int reps, Runnable op) {
        op.run();
        long start = Cuda.eventCreate(true), end = Cuda.eventCreate(true);
        try {
            Cuda.eventRecord(start, gpu.stream());
            for (int i = 0; i < reps; i++) {
                op.run();
            }
            Cuda.eventRecord(end, gpu.stream());
            Cuda.eventSynchronize(end);
            return Cuda.eventElapsedMs(start, end) / reps;
        } finally {
            Cuda.eventDestroy(start);
            Cuda.eventDestroy(end);
        }
    }
}
