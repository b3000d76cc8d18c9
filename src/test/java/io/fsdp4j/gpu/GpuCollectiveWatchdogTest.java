package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.job.JobStart;
import io.fsdp4j.job.NcclWorld;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The collective watchdog on two GPUs of one process: a rank that stops calling collectives (as in a deadlock)
 * would leave the other waiting inside NCCL forever; after the timeout, the watchdog names it, aborts the
 * communicators, and the waiting rank is released and fails with the reason.
 */
@Tag("gpu")
@Timeout(120)
class GpuCollectiveWatchdogTest {

    @Test
    void aRankThatStopsCallingCollectivesIsNamedAndTheOtherIsReleased() {
        GpuTests.requireGpus(2);
        NcclWorld world = new NcclWorld(DeviceMesh.of(2, 2), Duration.ofSeconds(3));
        long start = System.nanoTime();
        assertThatThrownBy(() -> RankThreads.run(world, r -> {
            RankContext rank = world.open(r);
            try {
                var backend = rank.backend();
                Tensor t = backend.allocate(DType.F32, 1 << 20);
                backend.fill(t, 1);
                rank.world().allReduce(t); // collective 1, on both ranks
                assertThat(backend.toFloats(t)[0]).isEqualTo(2f);
                if (r == 1) { // hangs on the host, until the job is stopped
                    while (world.stoppedBecause().isEmpty()) {
                        Thread.sleep(10);
                    }
                    return;
                }
                rank.world().allReduce(t); // collective 2: rank 0 waits for rank 1 in it
                backend.toFloats(t);       // blocks until the abort releases the collective
                rank.world().barrier();    // refused: the job is stopping
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            } finally {
                world.close(rank);
            }
        })).isInstanceOf(CollectiveAbortedException.class)
                .hasMessageStartingWith("rank 1 has not progressed for ")
                .hasMessageContaining("(last at step 0, collective 1; it has not called collective 2); rank 0 waits for"
                        + " it in all-reduce of 1048576 f32 on group 'world' (collective 2) for ")
                .hasMessageEndingWith("(" + JobStart.COLLECTIVE_TIMEOUT_ENV + "=3)");
        assertThat((System.nanoTime() - start) / 1e9).as("released soon after the timeout").isLessThan(30);
    }
}
