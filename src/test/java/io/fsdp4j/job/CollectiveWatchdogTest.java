package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.comm.CollectiveWatchdog;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The watchdog's bookkeeping on a fake clock, with flags for the completions a GPU would give as CUDA events. */
@Timeout(30)
class CollectiveWatchdogTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    /** A completion set by the test; counts its releases. */
    private static final class Flag implements CollectiveWatchdog.Completion {
        volatile boolean done;
        int released;

        @Override
        public boolean done() {
            return done;
        }

        @Override
        public void release() {
            released++;
        }
    }

    private final AtomicLong clock = new AtomicLong();
    private final List<CollectiveWatchdog.Overdue> fired = new ArrayList<>();
    private final JobProgress progress = new JobProgress(List.of(2, 3), clock::get);
    private final CollectiveWatchdog watchdog = new CollectiveWatchdog(TIMEOUT, progress, clock::get, fired::add);

    private void at(long seconds) {
        clock.set(TimeUnit.SECONDS.toNanos(seconds));
    }

    private static Flag done() {
        Flag f = new Flag();
        f.done = true;
        return f;
    }

    @Test
    void finishedCollectivesAreReleasedAndCountedAndNeverFire() {
        Flag inputs = done(), collective = done();
        assertThat(watchdog.track(2, "all-gather on group 'world'", inputs, collective)).isEqualTo(1);
        assertThat(watchdog.track(2, "reduce-scatter on group 'world'", done(), new Flag())).isEqualTo(2);
        at(1000);
        assertThat(watchdog.check()).isEmpty(); // the second became the oldest only now
        assertThat(fired).isEmpty();
        assertThat(inputs.released).isOne();
        assertThat(collective.released).isOne();
        var rank2 = progress.byRank().get(2);
        assertThat(rank2.issued()).isEqualTo(2);
        assertThat(rank2.started()).isEqualTo(2);
        assertThat(rank2.completed()).isEqualTo(1);
        assertThat(progress.byRank().get(3).issued()).isZero();
    }

    @Test
    void theOldestUnfinishedCollectiveFiresOnceWhenItHasWaitedPastTheTimeout() {
        watchdog.track(3, "all-reduce on group 'shard.1'", done(), done());
        watchdog.track(3, "all-gather on group 'world'", done(), new Flag());
        assertThat(watchdog.check()).isEmpty(); // the first is seen done at 0: the second waits from then
        at(60);
        assertThat(watchdog.check()).isEmpty(); // not past the timeout yet
        at(61);
        var overdue = watchdog.check().orElseThrow();
        assertThat(overdue.rank()).isEqualTo(3);
        assertThat(overdue.seq()).isEqualTo(2);
        assertThat(overdue.what()).isEqualTo("all-gather on group 'world'");
        assertThat(overdue.waited()).isEqualTo(Duration.ofSeconds(61));
        at(200);
        assertThat(watchdog.check()).isPresent();
        assertThat(fired).as("the action runs once").containsExactly(overdue);
    }

    @Test
    void aCollectiveIsTimedFromWhenItsPredecessorWasSeenDoneNotFromWhenItWasQueued() {
        Flag first = new Flag(), second = new Flag();
        watchdog.track(2, "all-gather on group 'world'", done(), first);
        watchdog.track(2, "all-gather on group 'world'", done(), second); // prefetched behind the first
        at(50);
        first.done = true;
        assertThat(watchdog.check()).isEmpty();
        at(110);
        assertThat(watchdog.check()).as("60 s since it became the oldest: not past").isEmpty();
        at(111);
        assertThat(watchdog.check().orElseThrow().seq()).isEqualTo(2);
    }

    @Test
    void aCollectiveWhoseInputsAreNotReadyIsNotStarted() {
        watchdog.track(2, "all-gather on group 'world'", new Flag(), new Flag());
        at(10);
        watchdog.check();
        assertThat(progress.byRank().get(2).started()).isZero();
        assertThat(progress.byRank().get(2).issued()).isOne();
    }

    @Test
    void aCompletionThatCannotBeQueriedCountsAsDone() {
        watchdog.track(2, "all-gather on group 'world'", done(), new CollectiveWatchdog.Completion() {
            @Override
            public boolean done() {
                throw new IllegalStateException("cudaEventQuery: an illegal memory access was encountered");
            }
        });
        at(100);
        assertThat(watchdog.check()).isEmpty();
        assertThat(progress.byRank().get(2).completed()).isOne();
    }

    @Test
    void aClosingRankReleasesWhatIsTrackedAndTrackingAfterCloseReleasesAtOnce() {
        Flag inputs = new Flag(), collective = new Flag();
        watchdog.track(2, "all-gather on group 'world'", inputs, collective);
        watchdog.forget(2);
        assertThat(inputs.released).isOne();
        assertThat(collective.released).isOne();
        watchdog.close();
        Flag late = new Flag();
        watchdog.track(3, "barrier", done(), late);
        assertThat(late.released).isOne();
        at(1000);
        assertThat(watchdog.check()).isEmpty();
    }

    @Test
    void thePollingThreadFiresOnItsOwn() throws Exception {
        var heard = new CompletableFuture<CollectiveWatchdog.Overdue>();
        var progress = new JobProgress(List.of(0));
        try (var live = new CollectiveWatchdog(Duration.ofMillis(300), progress, System::nanoTime, heard::complete)) {
            live.start();
            live.track(0, "all-reduce on group 'world'", done(), new Flag());
            var overdue = heard.get(10, TimeUnit.SECONDS);
            assertThat(overdue.seq()).isOne();
            assertThat(overdue.waited()).isGreaterThan(Duration.ofMillis(300));
        }
    }

    @Test
    void thePollIntervalIsATenthOfTheTimeoutAtMostHalfASecond() {
        assertThat(CollectiveWatchdog.pollInterval(Duration.ofSeconds(2))).isEqualTo(Duration.ofMillis(200));
        assertThat(CollectiveWatchdog.pollInterval(Duration.ofMinutes(10))).isEqualTo(Duration.ofMillis(500));
    }
}
