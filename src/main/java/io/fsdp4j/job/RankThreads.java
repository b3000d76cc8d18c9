package io.fsdp4j.job;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.cpu.Parallel;
import io.fsdp4j.comm.CollectiveAbortedException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntConsumer;

/**
 * Runs one body per rank of this process ({@link LocalRanks#ranks()}), each on its own thread. When a rank fails,
 * the world is aborted so that every other rank leaves its collective at once instead of hanging; the first failure
 * is rethrown with the rank named. Each rank thread holds a core throughout ({@link Parallel#holdingCore}): the CPU
 * backend's loops get helper threads only for the cores that no rank holds.
 */
public final class RankThreads {
    private RankThreads() {}

    public static void run(LocalRanks world, IntConsumer body) {
        AtomicReference<RuntimeException> firstFailure = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int rank : world.ranks()) {
            threads.add(Thread.ofPlatform().name("rank-" + rank).start(() -> {
                try {
                    Parallel.holdingCore(() -> body.accept(rank)); // CPU loops of other ranks get no helper for it
                } catch (CollectiveAbortedException e) {
                    firstFailure.compareAndSet(null, e); // a consequence, unless nothing else failed first
                } catch (RuntimeException | Error e) {
                    var stopped = world.stoppedBecause(); // failed because another process stopped the job
                    RuntimeException named = e instanceof UserError u ? u
                            : stopped.isPresent() ? new CollectiveAbortedException(stopped.get())
                            : new RankFailedException(rank, e);
                    RuntimeException previous = firstFailure.getAndUpdate(
                            f -> f == null || f instanceof CollectiveAbortedException ? named : f);
                    if (previous == null || previous instanceof CollectiveAbortedException) {
                        world.abort("rank " + rank + " failed: " + e);
                    }
                }
            }));
        }
        for (Thread t : threads) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                world.abort("interrupted");
            }
        }
        if (firstFailure.get() != null) {
            throw firstFailure.get();
        }
    }

    /** A rank failed for a reason that is not the user's input. */
    public static final class RankFailedException extends RuntimeException {
        RankFailedException(int rank, Throwable cause) {
            super("rank " + rank + " failed: " + cause, cause);
        }
    }
}
