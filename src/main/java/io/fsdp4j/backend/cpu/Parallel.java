package io.fsdp4j.backend.cpu;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntConsumer;

/**
 * Splits a loop over independent items across the cores. Each item is computed by exactly one thread, so results
 * never depend on scheduling: the CPU backend is deterministic.
 *
 * <p>The cores are shared by every thread that calls in. A rank thread holds a core for as long as it runs
 * ({@link #holdingCore}), in a loop or between loops, except while it waits for the other ranks at a collective
 * ({@link #lendingCore}); any other caller holds one while it is inside a loop. A loop gets helper threads only for
 * the cores that no thread holds: with as many rank threads as there are cores, each runs its loops alone, and the
 * cores are used once, never oversubscribed; a single rank on several cores spreads its loops over the others. A
 * helper claims items a few at a time (an eighth of an even share) and stops claiming as soon as the cores are all
 * held, so a caller that starts a loop while another's spreads over the cores gets its core back within one claim.
 *
 * <p>Why a rank holds its core between loops: with two ranks on two cores, a rank that waits at a collective or
 * runs its few sequential lines between loops would otherwise lend its core to the other's next loop, which then
 * splits its products into more tasks (each packing its own copy of an operand) and wakes a helper that the
 * returning rank competes with for the core until the helper's item ends: three threads on two cores (issue 28).
 * A rank waiting at a collective lends its core: a rank that fell behind (its core taken by another process) then
 * catches up on both.
 */
public final class Parallel {
    private static final long MIN_WORK_PER_TASK = 1 << 15;
    /** The cores the JVM may use: callers plus helpers never exceed them (tests set other counts). */
    private static volatile int cores = Runtime.getRuntime().availableProcessors();
    /** Threads (other than helpers and holders) now inside a loop. */
    private static final AtomicInteger CALLERS = new AtomicInteger();
    /** Threads that hold a core throughout ({@link #holdingCore}). */
    private static final AtomicInteger HOLDERS = new AtomicInteger();
    private static final ThreadLocal<Boolean> HELPER = ThreadLocal.withInitial(() -> false);
    private static final ThreadLocal<Boolean> HOLDS = ThreadLocal.withInitial(() -> false);
    private static final java.util.concurrent.ExecutorService HELPERS =
            java.util.concurrent.Executors.newCachedThreadPool(r -> Thread.ofPlatform().daemon()
                    .name("fsdp4j-cpu-helper").unstarted(() -> {
                        HELPER.set(true);
                        r.run();
                    }));

    private Parallel() {}

    /**
     * Runs {@code body} on this thread holding one core throughout (a rank thread, for the whole of its run): loops
     * of other threads get no helper for it, whether this thread is inside a loop or not. Nested calls hold one core.
     */
    public static void holdingCore(Runnable body) {
        if (HOLDS.get()) {
            body.run();
            return;
        }
        HOLDS.set(true);
        HOLDERS.incrementAndGet();
        try {
            body.run();
        } finally {
            HOLDERS.decrementAndGet();
            HOLDS.set(false);
        }
    }

    /**
     * Runs {@code wait} (a wait for other threads, such as a collective's barrier) with this thread's held core lent
     * to the others' loops, and returns its result; on a thread that holds none, just runs it.
     */
    public static boolean lendingCore(java.util.function.BooleanSupplier wait) {
        if (!HOLDS.get()) {
            return wait.getAsBoolean();
        }
        HOLDERS.decrementAndGet();
        try {
            return wait.getAsBoolean();
        } finally {
            HOLDERS.incrementAndGet();
        }
    }

    /** Cores held now: by holders, and by the other callers inside loops. */
    private static int held() {
        return HOLDERS.get() + CALLERS.get();
    }

    /**
     * Runs {@code body} for each item in [0, n). {@code workPerItem} (roughly flops) decides whether running in
     * parallel pays off. An exception thrown by an item is rethrown here once every started item has finished.
     */
    public static void forEach(int n, long workPerItem, IntConsumer body) {
        int cores = Parallel.cores;
        if (n <= 1 || cores <= 1 || (long) n * workPerItem < MIN_WORK_PER_TASK || HELPER.get()) {
            sequential(n, body);
            return;
        }
        boolean holds = HOLDS.get();
        if (!holds) {
            CALLERS.incrementAndGet();
        }
        try {
            int helpers = Math.min(n, cores - held() + 1) - 1;
            if (helpers <= 0) {
                sequential(n, body);
                return;
            }
            Loop loop = new Loop(n, body, Thread.currentThread(), cores);
            for (int h = 0; h < helpers; h++) {
                HELPERS.execute(loop::help);
            }
            loop.work(false);
            loop.await();
        } finally {
            if (!holds) {
                CALLERS.decrementAndGet();
            }
        }
    }

    /** A loop body over the items [from, to). */
    @FunctionalInterface
    public interface Range {
        void run(int from, int to);
    }

    /** Items per range of {@link #forRanges} for element-wise loops: large enough that claiming one costs nothing. */
    public static final int GRAIN = 1 << 14;

    /**
     * Runs {@code body} over [0, n) in ranges of {@code grain} items (the last one shorter), each range on one thread:
     * for element-wise loops, whose items are too small to be claimed one at a time. {@code workPerItem} is per item,
     * as for {@link #forEach}.
     */
    public static void forRanges(int n, int grain, long workPerItem, Range body) {
        int ranges = (n + grain - 1) / grain;
        forEach(ranges, workPerItem * grain, r -> {
            int from = r * grain;
            body.run(from, Math.min(n, from + grain));
        });
    }

    /**
     * The threads a loop started now on this thread would run on (itself and its helpers): the cores that the other
     * threads (holders, callers inside loops) leave free, at least one. For sizing work; it may change by the time
     * the loop starts.
     */
    public static int threadsFree() {
        if (HELPER.get()) {
            return 1;
        }
        return Math.max(1, cores - held() + (HOLDS.get() ? 1 : 0));
    }

    /**
     * Runs {@code body} as if the machine had {@code count} cores (1: every loop on its caller's thread), then
     * restores the count: for tests that compare results across thread counts.
     */
    static void withCores(int count, Runnable body) {
        int before = cores;
        cores = count;
        try {
            body.run();
        } finally {
            cores = before;
        }
    }

    private static void sequential(int n, IntConsumer body) {
        for (int i = 0; i < n; i++) {
            body.accept(i);
        }
    }

    /**
     * How many items of a loop of {@code n} on {@code cores} a thread claims at once ({@code Loop}'s chunk): an eighth
     * of an even share, at least one. A helper stops only between claims, so it may run this many items after every
     * core has come to be held.
     */
    static int claimSize(int n, int cores) {
        return Math.max(1, n / (8 * cores));
    }

    /** One parallel loop: items claimed in turn by the caller and its helpers. */
    private static final class Loop {
        private final int n;
        private final IntConsumer body;
        private final Thread caller;
        private final int cores;
        /**
         * Items a thread claims at once: an eighth of an even share (one, for a loop of few large items such as a
         * product's tasks). Claiming each of a norm's thousand rows alone cost two atomic updates a row, passed
         * between the cores on every claim, more than the row itself (docs/benchmarks.md, 2026-11-26, eighth
         * session). Which thread runs an item never changes what it computes.
         */
        private final int chunk;
        private final AtomicInteger next = new AtomicInteger();
        private final AtomicInteger done = new AtomicInteger();
        private final AtomicReference<Throwable> failure = new AtomicReference<>();

        Loop(int n, IntConsumer body, Thread caller, int cores) {
            this.n = n;
            this.body = body;
            this.caller = caller;
            this.cores = cores;
            this.chunk = claimSize(n, cores);
        }

        void help() {
            work(true);
        }

        /**
         * Claims and runs items, {@link #chunk} at a time, until none is left (a helper also stops when every core
         * is held).
         */
        void work(boolean helper) {
            while (!(helper && held() >= cores)) {
                int from = next.getAndAdd(chunk);
                if (from >= n) {
                    return;
                }
                int to = Math.min(n, from + chunk);
                try {
                    for (int i = from; i < to && failure.get() == null; i++) {
                        body.accept(i);
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                } finally {
                    if (done.addAndGet(to - from) == n) {
                        LockSupport.unpark(caller);
                    }
                }
            }
        }

        /** Waits (on the caller's thread) until every item has run, and rethrows the first failure. */
        void await() {
            while (done.get() < n) {
                LockSupport.park(this);
            }
            Throwable t = failure.get();
            if (t instanceof RuntimeException e) {
                throw e;
            }
            if (t instanceof Error e) {
                throw e;
            }
        }
    }
}
