package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.TestThreads;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** How the processes of a GPU job hear that one stopped: through the rendezvous store, not their collectives. */
@Timeout(30)
class JobWatchTest {
    private static final String TOKEN = "job-watch-test";

    private record Job(RendezvousServer server, JobWatch first, JobWatch second, CompletableFuture<String> firstHeard,
                       CompletableFuture<String> secondHeard) {}

    private static Job start() {
        var server = RendezvousServer.start(0, TOKEN, 0);
        var settings = new JobSettings(TOKEN, 0, Duration.ofSeconds(5), Duration.ofSeconds(5), null);
        JobWatch[] watches = new JobWatch[2];
        @SuppressWarnings("unchecked")
        CompletableFuture<String>[] heard = new CompletableFuture[] {new CompletableFuture<>(), new CompletableFuture<>()};
        for (int p = 0; p < 2; p++) {
            watches[p] = JobWatch.start(new JobLayout(2, p, 1, 0, 2, "127.0.0.1", server.port(), "test"), settings);
            watches[p].onStop(heard[p]::complete);
        }
        return new Job(server, watches[0], watches[1], heard[0], heard[1]);
    }

    @Test
    void aProcessWhoseConnectionDropsIsReportedToTheOthers() throws Exception {
        Job job = start();
        try {
            job.second().close(); // as if process 1 died: its connection ends without a word
            assertThat(job.firstHeard().get(5, TimeUnit.SECONDS)).isEqualTo("node 1 (ranks 2-3) lost its connection to "
                    + "the rendezvous store (it died, was killed, or its node went away)");
        } finally {
            job.first().close();
            job.server().close();
        }
    }

    @Test
    void aPostedReasonReachesEveryProcess() throws Exception {
        Job job = start();
        try {
            job.second().post("node 1 (ranks 2-3): rank 3 failed: boom");
            assertThat(job.firstHeard().get(5, TimeUnit.SECONDS)).isEqualTo("node 1 (ranks 2-3): rank 3 failed: boom");
            assertThat(job.secondHeard().get(5, TimeUnit.SECONDS)).isEqualTo("node 1 (ranks 2-3): rank 3 failed: boom");
            assertThat(job.first().reason()).isEqualTo("node 1 (ranks 2-3): rank 3 failed: boom");
        } finally {
            job.first().close();
            job.second().close();
            job.server().close();
        }
    }

    @Test
    void theStoreGoingAwayStopsTheOthers() throws Exception {
        Job job = start();
        try {
            job.server().close(); // node 0 died
            assertThat(job.secondHeard().get(5, TimeUnit.SECONDS)).startsWith("lost the rendezvous store at 127.0.0.1:");
        } finally {
            job.first().close();
            job.second().close();
        }
    }

    @Test
    void processesThatFinishAsPlannedStopNobody() throws Exception {
        Job job = start();
        var second = CompletableFuture.runAsync(() -> job.second().finish(true), TestThreads.OWN_THREAD);
        job.first().finish(true); // waits for process 1 to finish before the store may close
        second.get(5, TimeUnit.SECONDS);
        job.server().close();
        Thread.sleep(700); // longer than a watch's poll
        assertThat(job.firstHeard()).isNotDone();
        assertThat(job.secondHeard()).isNotDone();
    }

    @Test
    void aProcessThatFailedDoesNotWaitForTheOthers() {
        Job job = start();
        try {
            long start = System.nanoTime();
            job.first().finish(false); // process 1 never finishes
            assertThat((System.nanoTime() - start) / 1e9).isLessThan(3);
        } finally {
            job.second().close();
            job.server().close();
        }
    }
}
