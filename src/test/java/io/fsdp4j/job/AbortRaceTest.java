package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.AbortableBarrier;
import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.tensor.DType;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A failing rank must release every other rank at once, whatever the timing: before, while or after they reach
 * their wait. Each case runs many times with random delays before the failure and before each survivor's wait (the
 * window in which a {@code CyclicBarrier.reset()} used to miss a waiter, who then hung for the whole timeout). The
 * collective timeout is a few seconds, so a missed abort shows as a run over the one-second bound, not a hang.
 */
@Timeout(120)
class AbortRaceTest {
    private static final CpuBackend CPU = CpuBackend.INSTANCE;
    private static final Duration TIMEOUT = Duration.ofSeconds(5);
    private static final long BOUND_NANOS = TimeUnit.SECONDS.toNanos(1);

    /** Busy-waits (or yields) for up to {@code maxMicros}: short enough to land inside a check-then-wait window. */
    private static void jitter(SplittableRandom random, int maxMicros) {
        int kind = random.nextInt(3);
        if (kind == 0) {
            return;
        }
        long micros = random.nextInt(maxMicros + 1);
        if (kind == 1) {
            long end = System.nanoTime() + micros * 1000;
            while (System.nanoTime() < end) {
                Thread.onSpinWait();
            }
        } else {
            LockSupport.parkNanos(micros * 1000);
        }
    }

    @Test
    void aFailingRankReleasesEveryWaiterInEveryOneOfManyRuns() {
        var seeds = new SplittableRandom(31);
        for (int run = 0; run < 400; run++) {
            int ranks = 2 + seeds.nextInt(3);
            int failing = seeds.nextInt(ranks);
            int collectivesBefore = seeds.nextInt(3);
            long seed = seeds.nextLong();
            InProcessWorld world = new InProcessWorld(new DeviceMesh(1, ranks), TIMEOUT);
            var waitJitter = new SplittableRandom(seed ^ 0x5DEECE66DL);
            world.beforeEveryWait(() -> {
                int micros;
                synchronized (waitJitter) {
                    micros = waitJitter.nextInt(200);
                }
                LockSupport.parkNanos(micros * 1000L); // inside the window between "not aborted" and "waiting"
            });
            long start = System.nanoTime();
            int runNumber = run;
            assertThatThrownBy(() -> RankThreads.run(world, r -> {
                var random = new SplittableRandom(seed + r);
                var rank = world.rank(r, CPU);
                for (int i = 0; i < collectivesBefore; i++) {
                    rank.world().allReduce(new double[] {r});
                }
                jitter(random, 300);
                if (r == failing) {
                    throw new IllegalStateException("rank " + r + " failed on purpose in run " + runNumber);
                }
                rank.world().barrier();
                rank.world().allGather(CPU.upload(new float[] {r}, 1), CPU.allocate(DType.F32, ranks));
            })).as("run %d", run).hasMessageContaining("failed on purpose in run " + run);
            long took = System.nanoTime() - start;
            assertThat(took).as("run %d (%d ranks, rank %d failing) took %.3f s", run, ranks, failing, took / 1e9)
                    .isLessThan(BOUND_NANOS);
        }
    }

    @Test
    void anAbortedBarrierRefusesEveryLaterWaitAtOnceWithTheFirstReason() {
        var barrier = new AbortableBarrier(3);
        barrier.abort("first failure");
        barrier.abort("a consequence");
        long start = System.nanoTime();
        for (int i = 0; i < 3; i++) {
            assertThatThrownBy(() -> barrier.await(Duration.ofMinutes(5)))
                    .isInstanceOf(CollectiveAbortedException.class).hasMessage("first failure");
        }
        assertThat(System.nanoTime() - start).isLessThan(BOUND_NANOS);
    }

    @Test
    void anAbortWakesWaitersThatArrivedAtAnyMomentAroundIt() throws Exception {
        var seeds = new SplittableRandom(7);
        for (int run = 0; run < 300; run++) {
            var barrier = new AbortableBarrier(3);
            long seed = seeds.nextLong();
            var released = new ConcurrentLinkedQueue<Long>();
            var go = new CountDownLatch(1);
            List<Thread> waiters = new ArrayList<>();
            AtomicLong abortedAt = new AtomicLong();
            for (int w = 0; w < 2; w++) {
                var random = new SplittableRandom(seed + w);
                waiters.add(Thread.ofPlatform().start(() -> {
                    try {
                        go.await();
                        jitter(random, 200);
                        barrier.await(TIMEOUT);
                    } catch (CollectiveAbortedException e) {
                        released.add(System.nanoTime());
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }));
            }
            var random = new SplittableRandom(seed + 99);
            go.countDown();
            jitter(random, 200);
            abortedAt.set(System.nanoTime());
            barrier.abort("rank 2 failed");
            for (Thread t : waiters) {
                t.join();
            }
            assertThat(released).as("run %d: both waiters released with the abort", run).hasSize(2);
            for (long at : released) {
                assertThat(at - abortedAt.get()).as("run %d", run).isLessThan(BOUND_NANOS);
            }
        }
    }

    @Test
    void aBarrierMeetsRepeatedlyAndTimesOutWithoutAnAbort() throws Exception {
        var barrier = new AbortableBarrier(2);
        var other = Thread.ofPlatform().start(() -> {
            for (int i = 0; i < 1000; i++) {
                assertThat(barrier.await(TIMEOUT)).isTrue();
            }
        });
        for (int i = 0; i < 1000; i++) {
            assertThat(barrier.await(TIMEOUT)).isTrue();
        }
        other.join();
        long start = System.nanoTime();
        assertThat(barrier.await(Duration.ofMillis(50))).as("the other party never comes").isFalse();
        assertThat(System.nanoTime() - start).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(50));
        assertThat(barrier.waiting()).as("a timed-out party no longer counts as waiting").isZero();
    }

    @Test
    void aFailingRankReleasesTheRanksOfTheOtherProcessesInEveryOneOfSeveralRuns() {
        var seeds = new SplittableRandom(11);
        for (int run = 0; run < 12; run++) {
            int failing = seeds.nextInt(4);
            long seed = seeds.nextLong();
            List<TcpWorld> worlds = TcpWorldTest.openJob(2, 2, 4, TIMEOUT);
            AtomicLong failedAt = new AtomicLong();
            var releaseTimes = new ConcurrentLinkedQueue<Long>();
            int runNumber = run;
            List<Throwable> failures = TcpWorldTest.runJob(worlds, (world, rank) -> {
                var random = new SplittableRandom(seed + rank.rank());
                rank.world().barrier();
                jitter(random, 300);
                if (rank.rank() == failing) {
                    failedAt.set(System.nanoTime());
                    throw new IllegalStateException("rank " + failing + " failed on purpose in run " + runNumber);
                }
                try {
                    rank.world().barrier();
                    rank.world().allGather(CPU.upload(new float[] {1}, 1), CPU.allocate(DType.F32, 4));
                } finally {
                    releaseTimes.add(System.nanoTime());
                }
            });
            assertThat(failures).as("run %d", run).allSatisfy(f -> assertThat(f).isNotNull());
            assertThat(failures.get(failing / 2)).as("run %d", run).hasMessageContaining("failed on purpose");
            assertThat(releaseTimes).as("run %d", run).hasSize(3);
            for (long at : releaseTimes) {
                assertThat(at - failedAt.get()).as("run %d: a survivor released %.3f s after the failure", run,
                        (at - failedAt.get()) / 1e9).isLessThan(BOUND_NANOS);
            }
        }
    }
}
