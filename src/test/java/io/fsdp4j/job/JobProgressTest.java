package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.job.JobProgress.Progress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Which ranks or processes hold a hung job up, from the progress each reports. */
@Timeout(30)
class JobProgressTest {
    private static final JobLayout TWO = new JobLayout(1, 0, 2, 0, 2, "127.0.0.1", 29500, "test");
    private static final IntFunction<String> PROCESS = TWO::describeProcess;
    private static final Duration WAITED = Duration.ofSeconds(61);

    private static Progress at(int step, long issued, long started, long completed, long idleMillis) {
        return new Progress(step, issued, started, completed, idleMillis, 1, System.currentTimeMillis());
    }

    @Test
    void aRecordTravelsAsText() {
        Progress p = new Progress(12, 3401, 3400, 3399, 61000, 7, 1_700_000_000_000L);
        assertThat(Progress.decode(p.encode())).isEqualTo(p);
        assertThatThrownBy(() -> Progress.decode("12 3401")).hasMessageContaining("not a progress record");
    }

    @Test
    void aProcessReportsItsLeastAdvancedRank() {
        AtomicLong clock = new AtomicLong();
        var progress = new JobProgress(List.of(2, 3), clock::get);
        progress.beginStep(2, 5);
        progress.beginStep(3, 4);
        for (int i = 0; i < 3; i++) {
            progress.issue(2);
        }
        progress.issue(3);
        progress.complete(2, 2);
        clock.set(Duration.ofSeconds(9).toNanos());
        progress.complete(3, 1);
        clock.set(Duration.ofSeconds(10).toNanos());
        Progress summary = progress.summary(4);
        assertThat(summary.step()).isEqualTo(4);
        assertThat(summary.issued()).isEqualTo(1);
        assertThat(summary.started()).isEqualTo(1);
        assertThat(summary.completed()).isEqualTo(1);
        assertThat(summary.idleMillis()).as("since the last move of any rank").isEqualTo(1000);
        assertThat(summary.beat()).isEqualTo(4);
        assertThatThrownBy(() -> progress.issue(0)).hasMessageContaining("rank 0 is not one of [2, 3]");
    }

    @Test
    void aProcessThatStoppedReportingIsNamedWithWhereItWas() {
        var all = Map.of(0, at(12, 3402, 3402, 3401, 61000), 1, at(12, 3401, 3401, 3401, 3000));
        assertThat(JobProgress.explain(0, 3402, "all-gather of 1024 bf16 on group 'world'", WAITED, all, Set.of(1), PROCESS))
                .startsWith("process 1 (node 0, ranks 2-3) has not progressed for ")
                .contains("and stopped reporting (last at step 12, collective 3401; is it stopped, frozen or unreachable?);"
                        + " process 0 (node 0, ranks 0-1) waits for it in all-gather of 1024 bf16 on group 'world'"
                        + " (collective 3402) for 61 s");
    }

    @Test
    void aProcessThatHasNotCalledTheCollectiveIsNamed() {
        var all = Map.of(0, at(3, 41, 41, 40, 61000), 1, at(3, 40, 40, 40, 61000));
        assertThat(JobProgress.explain(0, 41, "all-reduce on group 'world'", WAITED, all, Set.of(), PROCESS))
                .isEqualTo("process 1 (node 0, ranks 2-3) has not progressed for 61 s (last at step 3, collective 40;"
                        + " it has not called collective 41); process 0 (node 0, ranks 0-1) waits for it in all-reduce on"
                        + " group 'world' (collective 41) for 61 s");
    }

    @Test
    void aProcessWhoseOwnWorkBeforeTheCollectiveHangsIsNamed() {
        var all = Map.of(0, at(3, 41, 41, 40, 61000), 1, at(3, 44, 40, 40, 61000));
        assertThat(JobProgress.explain(0, 41, "all-reduce on group 'world'", WAITED, all, Set.of(), PROCESS))
                .startsWith("process 1 (node 0, ranks 2-3)'s own work before collective 41 has not finished for 61 s"
                        + " (at step 3; a kernel that hangs?); process 0 (node 0, ranks 0-1) waits for it in");
    }

    @Test
    void ranksOfOneProcessAreNamedTheSameWayAndAWaiterThatIsItselfBehindWaitsForNobody() {
        var all = Map.of(0, at(1, 9, 8, 8, 70000), 1, at(1, 9, 9, 8, 70000));
        assertThat(JobProgress.explain(0, 9, "all-gather on group 'shard.0'", WAITED, all, Set.of(), r -> "rank " + r))
                .isEqualTo("rank 0's own work before collective 9 has not finished for 70 s (at step 1; a kernel that"
                        + " hangs?); rank 0 waits in all-gather on group 'shard.0' (collective 9) for 61 s");
    }

    @Test
    void whenEveryoneHasCalledItTheFaultIsBetweenThem() {
        var all = Map.of(0, at(3, 41, 41, 40, 61000), 1, at(3, 41, 41, 40, 61000));
        assertThat(JobProgress.explain(1, 41, "all-reduce on group 'world'", WAITED, all, Set.of(), PROCESS))
                .isEqualTo("process 1 (node 0, ranks 2-3) has waited in all-reduce on group 'world' (collective 41) for"
                        + " 61 s, which every rank has called with its inputs ready (a network or NCCL fault?)");
    }

    @Test
    void whatTheWaiterSawIsSaidWhenNobodyIsBehind() {
        var all = Map.of(0, at(3, 41, 41, 40, 61000), 1, at(3, 41, 41, 40, 61000));
        assertThat(JobProgress.explain(1, 41, "all-reduce on group 'world'", WAITED, all, Set.of(), PROCESS,
                "all-reduce on group 'world' failed: no data from node 0 (ranks 0-1) for 60 s"))
                .isEqualTo("all-reduce on group 'world' failed: no data from node 0 (ranks 0-1) for 60 s");
    }

    @Test
    void aProcessThatNeverReportedIsNamed() {
        var all = Map.of(0, at(3, 41, 41, 40, 61000));
        assertThat(JobProgress.explain(0, 41, "barrier", WAITED, all, Set.of(1), PROCESS))
                .isEqualTo("process 1 (node 0, ranks 2-3) never reported its progress; process 0 (node 0, ranks 0-1)"
                        + " waits for it in barrier (collective 41) for 61 s");
    }

    /** Two processes publish through a real store; one stops publishing (as a SIGSTOP would stop it). */
    @Test
    void theStoreTellsWhichProcessStoppedPublishing() {
        String token = "job-progress-test";
        try (var server = RendezvousServer.start(0, token, 0);
             var store0 = RendezvousClient.connect("127.0.0.1", server.port(), token, 0, Duration.ofSeconds(5));
             var store1 = RendezvousClient.connect("127.0.0.1", server.port(), token, 0, Duration.ofSeconds(5));
             var live = new JobProgress(List.of(0, 1)); var stopped = new JobProgress(List.of(2, 3))) {
            JobLayout layout = new JobLayout(1, 0, 2, 0, 2, "127.0.0.1", server.port(), "test");
            for (int i = 0; i < 5; i++) {
                live.issue(0);
                live.issue(1);
            }
            live.start(0, 5); // both wait in collective 5, their inputs ready
            live.start(1, 5);
            stopped.issue(2);
            stopped.issue(3);
            live.publish(store0, 0);
            stopped.publish(store1, 1);
            awaitRecord(store0, "progress/1"); // not through store1: the publisher holds it
            stopped.close();
            String why = JobProgress.explainFromStore(store0, layout, 5, "all-gather on group 'world'", WAITED, null);
            assertThat(why).startsWith("process 1 (node 0, ranks 2-3) has not progressed for ")
                    .contains("and stopped reporting (last at step 0, collective 1;")
                    .endsWith("process 0 (node 0, ranks 0-1) waits for it in all-gather on group 'world' (collective 5)"
                            + " for 61 s");
        }
    }

    private static void awaitRecord(RendezvousClient store, String key) {
        assertThat(store.getString(key, Duration.ofSeconds(5))).isPresent();
    }
}
