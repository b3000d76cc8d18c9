package io.fsdp4j.backend.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Test;

class ParallelTest {
    /**
     * Every item runs once, on the caller and its helpers. Each item spins 20 us, and until a helper has run one (up to
     * 10 s in all), so that a helper started late on a loaded machine still takes part and one never started fails.
     */
    @Test
    void runsEveryItemOnceAcrossHelpers() {
        int n = 1000;
        AtomicIntegerArray runs = new AtomicIntegerArray(n);
        Set<Thread> threads = ConcurrentHashMap.newKeySet();
        long deadline = System.nanoTime() + 10_000_000_000L;
        Parallel.withCores(4, () -> Parallel.forEach(n, 1 << 20, i -> {
            threads.add(Thread.currentThread());
            runs.incrementAndGet(i);
            for (long spin = System.nanoTime(); System.nanoTime() - spin < 20_000
                    || (threads.size() < 2 && System.nanoTime() < deadline); ) {
                Thread.onSpinWait(); // long enough items that the helpers get some
            }
        }));
        for (int i = 0; i < n; i++) {
            assertThat(runs.get(i)).as("item %d", i).isEqualTo(1);
        }
        assertThat(threads).hasSizeBetween(2, 4);
    }

    /**
     * Two "rank threads" in loops at once on two cores: from the moment both are inside, the helper that the first
     * one got finishes at most the items it had claimed (one claim, {@link Parallel#claimSize}: 12 of these 200) and
     * takes no more. A helper that kept claiming would run about half of the 200.
     */
    @Test
    void callersThatTakeEveryCoreRunTheirLoopsAlone() {
        java.util.concurrent.atomic.AtomicInteger helperItemsAfter = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicIntegerArray inside = new java.util.concurrent.atomic.AtomicIntegerArray(2);
        var start = new java.util.concurrent.CyclicBarrier(2); // both loops begin together, even on a loaded machine
        java.util.function.IntConsumer rank = id -> {
            try {
                start.await();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
            Parallel.forEach(200, 1 << 20, i -> {
                inside.set(id, 1); // an item of this loop runs: its caller is inside forEach
                boolean both = inside.get(0) == 1 && inside.get(1) == 1;
                for (long spin = System.nanoTime(); System.nanoTime() - spin < 50_000; ) {
                    Thread.onSpinWait();
                }
                if (both && Thread.currentThread().getName().equals("fsdp4j-cpu-helper")) {
                    helperItemsAfter.incrementAndGet();
                }
            });
            inside.set(id, 0); // this caller has left: "both inside" means at the same time
        };
        Parallel.withCores(2, () -> {
            Thread a = Thread.ofPlatform().start(() -> rank.accept(0));
            Thread b = Thread.ofPlatform().start(() -> rank.accept(1));
            try {
                a.join();
                b.join();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        // the items of a claim made as the second caller came in
        assertThat(helperItemsAfter.get()).isLessThanOrEqualTo(Parallel.claimSize(200, 2));
    }

    /**
     * A rank thread holds its core between loops too: while one holder is outside a loop, the other holder's loops on
     * two cores still run on their caller alone; a lone holder's loop spreads over the free core, and so does a
     * holder's beside one that lends its core while it waits (as at a collective).
     */
    @Test
    void holdersKeepTheirCoresBetweenLoops() {
        Set<Thread> twoHolders = ConcurrentHashMap.newKeySet(), oneHolder = ConcurrentHashMap.newKeySet();
        Set<Thread> besideLender = ConcurrentHashMap.newKeySet();
        // each item spins 50 us; where a helper is expected, items also wait (up to 10 s in all) until it has run one,
        // so that a helper started late on a loaded machine is still seen, and one never started fails the test
        java.util.function.Consumer<Set<Thread>> loop = seen -> {
            int expected = seen == twoHolders ? 1 : 2;
            long deadline = System.nanoTime() + 10_000_000_000L;
            Parallel.forEach(200, 1 << 20, i -> {
                seen.add(Thread.currentThread());
                for (long spin = System.nanoTime(); System.nanoTime() - spin < 50_000
                        || (seen.size() < expected && System.nanoTime() < deadline); ) {
                    Thread.onSpinWait();
                }
            });
        };
        Parallel.withCores(2, () -> {
            var waiting = new java.util.concurrent.CountDownLatch(1);
            var release = new java.util.concurrent.CountDownLatch(1);
            Thread idle = Thread.ofPlatform().start(() -> Parallel.holdingCore(() -> {
                waiting.countDown();
                try {
                    release.await(); // holds its core without being in a loop
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }));
            var lending = new java.util.concurrent.CountDownLatch(1);
            var lendingRelease = new java.util.concurrent.CountDownLatch(1);
            try {
                waiting.await();
                Thread busy = Thread.ofPlatform().start(() -> Parallel.holdingCore(() -> loop.accept(twoHolders)));
                busy.join();
                release.countDown();
                idle.join();
                assertThat(Parallel.threadsFree()).as("no core held once the holders are done").isEqualTo(2);
                Thread waiter = Thread.ofPlatform().start(() -> Parallel.holdingCore(() -> Parallel.lendingCore(() -> {
                    lending.countDown();
                    try {
                        return lendingRelease.await(10, java.util.concurrent.TimeUnit.SECONDS); // as at a barrier
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        return false;
                    }
                })));
                lending.await();
                Thread beside = Thread.ofPlatform().start(() -> Parallel.holdingCore(() -> loop.accept(besideLender)));
                beside.join();
                lendingRelease.countDown();
                waiter.join();
                Thread alone = Thread.ofPlatform().start(() -> Parallel.holdingCore(() -> loop.accept(oneHolder)));
                alone.join();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        assertThat(twoHolders).as("threads of a loop while the other holder waits").hasSize(1);
        assertThat(oneHolder).as("threads of a lone holder's loop").hasSize(2);
        assertThat(besideLender).as("threads of a loop while the other holder lends its core").hasSize(2);
    }

    @Test
    void rangesCoverEveryItemOnceInPiecesOfTheGrain() {
        int n = 10_007, grain = 1000;
        AtomicIntegerArray runs = new AtomicIntegerArray(n);
        Set<String> ranges = ConcurrentHashMap.newKeySet();
        Parallel.withCores(4, () -> Parallel.forRanges(n, grain, 1 << 10, (from, to) -> {
            ranges.add(from + ".." + to);
            for (int i = from; i < to; i++) {
                runs.incrementAndGet(i);
            }
        }));
        for (int i = 0; i < n; i++) {
            assertThat(runs.get(i)).as("item %d", i).isEqualTo(1);
        }
        assertThat(ranges).hasSize(11).contains("0..1000", "9000..10000", "10000..10007");
    }

    @Test
    void threadsFreeCountsTheCoresOtherCallersLeave() {
        Parallel.withCores(4, () -> {
            assertThat(Parallel.threadsFree()).isEqualTo(4);
            Parallel.forEach(4, 1 << 20, i -> {
                if (Thread.currentThread().getName().equals("fsdp4j-cpu-helper")) {
                    assertThat(Parallel.threadsFree()).isEqualTo(1); // a helper's own loops run on it alone
                }
            });
        });
        Parallel.withCores(1, () -> assertThat(Parallel.threadsFree()).isEqualTo(1));
    }

    @Test
    void rethrowsAnItemsFailureOnTheCaller() {
        Parallel.withCores(4, () -> assertThatThrownBy(() -> Parallel.forEach(100, 1 << 20, i -> {
            if (i == 37) {
                throw new IllegalArgumentException("item 37");
            }
        })).isInstanceOf(IllegalArgumentException.class).hasMessage("item 37"));
    }
}
