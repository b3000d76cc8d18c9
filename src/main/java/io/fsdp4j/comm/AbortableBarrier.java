package io.fsdp4j.comm;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A reusable meeting point for a fixed number of threads that, once aborted, stays aborted: every wait in progress
 * and every later one ends at once with {@link CollectiveAbortedException} carrying the first abort's reason.
 *
 * <p>Why not {@link java.util.concurrent.CyclicBarrier}: its {@code reset()} breaks only the threads waiting at that
 * moment. A thread that has checked an abort flag but not yet reached {@code await()} then waits on a fresh barrier
 * until its timeout, turning "one rank failed" into a hang. Here the abort state and the arrivals share one lock, so
 * no waiter can miss it.
 */
public final class AbortableBarrier {
    private final int parties;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private int arrived;          // threads waiting in the current generation
    private long generation;      // completed meetings
    private String abortReason;   // set once, under the lock

    public AbortableBarrier(int parties) {
        if (parties < 1) {
            throw new IllegalArgumentException("a barrier needs at least one party, not " + parties);
        }
        this.parties = parties;
    }

    /**
     * Waits until all parties have arrived. Returns true when they did, false when {@code limit} passed first (the
     * caller names who is late and aborts); throws when the barrier is or becomes aborted, or the thread is interrupted.
     */
    public boolean await(Duration limit) {
        lock.lock();
        try {
            throwIfAborted();
            long mine = generation;
            if (++arrived == parties) {
                arrived = 0;
                generation++;
                changed.signalAll();
                return true;
            }
            long left = limit.toNanos();
            while (generation == mine) {
                throwIfAborted();
                if (left <= 0) {
                    arrived--; // no longer waiting: a late party must not complete a meeting without this one
                    return false;
                }
                try {
                    left = changed.awaitNanos(left);
                } catch (InterruptedException e) {
                    arrived--;
                    Thread.currentThread().interrupt();
                    throw new CollectiveAbortedException("interrupted while waiting for the other ranks");
                }
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Ends every wait now and later with {@code reason}, unless an earlier abort's reason stands. */
    public void abort(String reason) {
        lock.lock();
        try {
            if (abortReason == null) {
                abortReason = reason;
            }
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    public Optional<String> abortReason() {
        lock.lock();
        try {
            return Optional.ofNullable(abortReason);
        } finally {
            lock.unlock();
        }
    }

    private void throwIfAborted() {
        if (abortReason != null) {
            throw new CollectiveAbortedException(abortReason);
        }
    }

    /** How many parties wait in the current meeting now. */
    public int waiting() {
        lock.lock();
        try {
            return arrived;
        } finally {
            lock.unlock();
        }
    }
}
