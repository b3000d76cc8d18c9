package io.fsdp4j.comm;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Notices a collective that does not finish in time, where nothing else would: NCCL waits for a peer that is alive
 * but stuck (a deadlock, a kernel that hangs, a stopped process) forever. Each rank's collectives are tracked in the
 * order it queues them ({@link #track}), each with two completions: its inputs (the work queued before it) and the
 * collective itself (on a GPU, CUDA events; in tests, flags). A daemon thread polls them ({@link #start}); the
 * oldest unfinished collective of a rank is timed from when it became the oldest (its predecessor was seen done,
 * or it was queued), so a long queue of prefetched collectives does not count against the last one. When one has
 * waited longer than the timeout, the action runs, once, with what hangs ({@link Overdue}); the caller aborts the
 * communicators and tells the other processes.
 *
 * <p>Completions seen also advance the ranks' {@link CollectiveProgress}, which names the ranks holding the others up.
 */
public final class CollectiveWatchdog implements AutoCloseable {
    /** Whether some queued work has finished (never blocks), and how to free what tells it (a CUDA event). */
    public interface Completion {
        boolean done();

        default void release() {}
    }

    /** Collective {@code seq} of {@code rank} ({@code what}) has not finished after {@code waited}. */
    public record Overdue(int rank, long seq, String what, Duration waited) {}

    private static final class Tracked {
        final long seq;
        final String what;
        final Completion inputs, done;
        final long queuedAt;
        long since; // when it became its rank's oldest unfinished collective
        boolean started;

        Tracked(long seq, String what, Completion inputs, Completion done, long queuedAt) {
            this.seq = seq;
            this.what = what;
            this.inputs = inputs;
            this.done = done;
            this.queuedAt = queuedAt;
            this.since = queuedAt;
        }
    }

    private final Duration timeout;
    private final LongSupplier clock; // nanoseconds
    private final CollectiveProgress progress;
    private final Consumer<Overdue> action;
    private final Map<Integer, ArrayDeque<Tracked>> pending = new LinkedHashMap<>(); // by rank
    private final AtomicBoolean fired = new AtomicBoolean();
    private volatile boolean closed;
    private Thread poller;

    /**
     * Watches the collectives of {@code progress}'s ranks, running {@code action} once when one has waited longer
     * than {@code timeout} by {@code clock} (nanoseconds).
     */
    public CollectiveWatchdog(Duration timeout, CollectiveProgress progress, LongSupplier clock, Consumer<Overdue> action) {
        this.timeout = timeout;
        this.clock = clock;
        this.progress = progress;
        this.action = action;
        for (int rank : progress.ranks()) {
            pending.put(rank, new ArrayDeque<>());
        }
    }

    /** The poll interval for {@code timeout}: a tenth of it, at most half a second. */
    public static Duration pollInterval(Duration timeout) {
        Duration tenth = timeout.dividedBy(10), most = Duration.ofMillis(500);
        return tenth.compareTo(most) < 0 ? tenth : most;
    }

    /** Polls from a daemon thread every {@link #pollInterval} until {@link #close}. */
    public CollectiveWatchdog start() {
        Duration every = pollInterval(timeout);
        poller = Thread.ofPlatform().daemon().name("collective-watchdog").start(() -> {
            while (!closed && !fired.get()) {
                check();
                try {
                    Thread.sleep(every);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        return this;
    }

    /**
     * Rank {@code rank} has queued its next collective, {@code what} (e.g. "all-gather on group 'world'"); the
     * watchdog owns the completions from now on and releases them once done. Returns the collective's number.
     */
    public long track(int rank, String what, Completion inputs, Completion done) {
        long seq = progress.issue(rank);
        ArrayDeque<Tracked> queue = pending.get(rank);
        synchronized (queue) {
            if (closed) {
                inputs.release();
                done.release();
            } else {
                queue.add(new Tracked(seq, what, inputs, done, clock.getAsLong()));
            }
        }
        return seq;
    }

    /**
     * One poll: forgets the collectives that have finished (oldest first, per rank) and, when a rank's oldest
     * unfinished one has waited past the timeout, runs the action (the first time only) and returns it.
     */
    public Optional<Overdue> check() {
        Overdue overdue = null;
        for (var e : pending.entrySet()) {
            int rank = e.getKey();
            ArrayDeque<Tracked> queue = e.getValue();
            synchronized (queue) {
                Tracked head;
                while ((head = queue.peek()) != null) {
                    if (!head.started && finished(head.inputs)) {
                        head.started = true;
                        progress.start(rank, head.seq);
                    }
                    if (!finished(head.done)) {
                        break;
                    }
                    queue.poll();
                    head.inputs.release();
                    head.done.release();
                    progress.complete(rank, head.seq);
                    Tracked next = queue.peek();
                    if (next != null) {
                        next.since = Math.max(next.queuedAt, clock.getAsLong());
                    }
                }
                if (head != null) {
                    Duration waited = Duration.ofNanos(clock.getAsLong() - head.since);
                    if (waited.compareTo(timeout) > 0 && (overdue == null || waited.compareTo(overdue.waited()) > 0)) {
                        overdue = new Overdue(rank, head.seq, head.what, waited);
                    }
                }
            }
        }
        if (overdue != null && fired.compareAndSet(false, true)) {
            action.accept(overdue);
        }
        return Optional.ofNullable(overdue);
    }

    /** A completion whose query fails (the device holds an error) counts as done: the rank itself reports the error. */
    private static boolean finished(Completion c) {
        try {
            return c.done();
        } catch (RuntimeException e) {
            return true;
        }
    }

    /**
     * Releases what is still tracked of {@code rank}'s collectives (it is closing), on the calling thread: the
     * rank's own, where its device is current.
     */
    public void forget(int rank) {
        List<Tracked> left;
        ArrayDeque<Tracked> queue = pending.get(rank);
        synchronized (queue) {
            left = new ArrayList<>(queue);
            queue.clear();
        }
        for (Tracked t : left) {
            try {
                t.inputs.release();
                t.done.release();
            } catch (RuntimeException e) {
                // the device holds an error (the job is stopping): nothing more to free
            }
        }
    }

    /** Stops polling; what is tracked from now on is released at once. */
    @Override
    public void close() {
        closed = true;
        if (poller != null && poller != Thread.currentThread()) {
            poller.interrupt();
        }
    }
}
