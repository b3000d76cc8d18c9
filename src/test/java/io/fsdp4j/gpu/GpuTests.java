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

    /** ms a call, and whether the host's launches fell behind the device (so the time may be the host's). */
    record Queued(double ms, boolean hostBound) {}

    /**
     * Milliseconds a call of {@code op} takes on the device alone (after its warm-up): the {@code reps} calls are
     * queued behind memsets of the scratch buffer {@code blocker} ({@code blockerBytes}), so the device runs them back
     * to back rather than at the pace the host launches them. Where launching them took the host longer than the
     * memsets kept the device busy, the run is repeated behind twice the memsets (up to 64); {@link Queued#hostBound}
     * says the last one still fell short.
     */
    static Queued millisPerCallQueued(CudaBackend gpu, int reps, Runnable op, long blocker, long blockerBytes) {
        long before = Cuda.eventCreate(true), start = Cuda.eventCreate(true), end = Cuda.eventCreate(true);
        try {
            for (int memsets = 2; ; memsets *= 2) {
                Cuda.eventRecord(before, gpu.stream());
                for (int i = 0; i < memsets; i++) {
                    Cuda.memsetAsync(blocker, i & 0xff, blockerBytes, gpu.stream());
                }
                Cuda.eventRecord(start, gpu.stream());
                long launchStart = System.nanoTime();
                for (int i = 0; i < reps; i++) {
                    op.run();
                }
                double launchMs = (System.nanoTime() - launchStart) / 1e6;
                Cuda.eventRecord(end, gpu.stream());
                Cuda.eventSynchronize(end);
                boolean hostBound = launchMs > Cuda.eventElapsedMs(before, start);
                if (!hostBound || memsets >= 64) {
                    return new Queued(Cuda.eventElapsedMs(start, end) / reps, hostBound);
                }
            }
        } finally {
            Cuda.eventDestroy(before);
            Cuda.eventDestroy(start);
            Cuda.eventDestroy(end);
        }
    }
}
