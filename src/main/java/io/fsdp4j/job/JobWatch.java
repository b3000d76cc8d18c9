package io.fsdp4j.job;

import io.fsdp4j.UserError;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * How the processes of a job learn that one of them stopped, where their collectives cannot tell them (NCCL waits
 * for a dead peer forever): a connection of its own to the rendezvous store, on which this process
 * <ul>
 *   <li>posts the reason when it fails ({@link #post}), under {@value #STOP_KEY};</li>
 *   <li>leaves a message the store posts itself if the connection drops before {@link #finish} (the process
 *       died, was killed, or its node went away);</li>
 *   <li>watches for a posted reason from a daemon thread, and for the store going away (node 0 died), and runs
 *       the stop action (abort the communicators) once, with the reason.</li>
 * </ul>
 * The first process keeps the store up in {@link #finish} until every process has finished (bounded), so that a
 * store gone away always means a failure.
 */
final class JobWatch implements AutoCloseable {
    static final String STOP_KEY = "job/stop";
    private static final Duration POLL = Duration.ofMillis(500);
    private static final Duration FINISH_WAIT = Duration.ofSeconds(60);

    private final JobLayout layout;
    private final RendezvousClient store;
    private final AtomicReference<Consumer<String>> onStop = new AtomicReference<>();
    private final AtomicBoolean stopped = new AtomicBoolean();
    private volatile boolean finished;
    private volatile String reason;
    private Thread watcher;

    private JobWatch(JobLayout layout, RendezvousClient store) {
        this.layout = layout;
        this.store = store;
    }

    /** Connects to the job's store (up already: this process has joined it) and starts watching. */
    static JobWatch start(JobLayout layout, JobSettings settings) {
        RendezvousClient store = RendezvousClient.connect(layout.rdzvHost(), layout.rdzvPort(), settings.token(),
                settings.attempt(), settings.rendezvousTimeout());
        JobWatch watch = new JobWatch(layout, store);
        store.setOnLoss(STOP_KEY, layout.describeProcess(layout.process())
                + " lost its connection to the rendezvous store (it died, was killed, or its node went away)");
        watch.watcher = Thread.ofPlatform().daemon().name("job-watch").start(watch::watch);
        return watch;
    }

    /** What to do when the job stops: run once, with the reason (at once if it has stopped already). */
    void onStop(Consumer<String> action) {
        onStop.set(action);
        if (reason != null) {
            act();
        }
    }

    /** Why the job stopped, once it has; null before. */
    String reason() {
        return reason;
    }

    private void watch() {
        while (!finished) {
            try {
                var posted = store.getString(STOP_KEY, POLL);
                if (posted.isPresent()) {
                    fire(posted.get());
                    return;
                }
            } catch (UserError | IllegalStateException lost) {
                if (!finished) {
                    fire("lost the rendezvous store at " + store.address() + " (node 0 stopped?)");
                }
                return;
            }
        }
    }

    private void fire(String why) {
        reason = why;
        act();
    }

    private void act() {
        Consumer<String> action = onStop.get();
        if (action != null && stopped.compareAndSet(false, true)) {
            action.accept(reason);
        }
    }

    /** Tells every process that the job stops, and why (the first reason posted wins). */
    void post(String why) {
        if (reason != null || finished) {
            return;
        }
        try {
            if (store.getString(STOP_KEY, Duration.ZERO).isEmpty()) {
                store.set(STOP_KEY, why);
            }
        } catch (UserError | IllegalStateException e) {
            // no store to tell: the others learn it when this process's connection drops
        }
    }

    /**
     * This process has finished: withdraws its message for the store and, when the job went as planned
     * ({@code ok}), on the first process waits (bounded) for every process to finish before the store may close.
     * After a failure nobody waits: the others are stopping too.
     */
    void finish(boolean ok) {
        finished = true;
        try {
            watcher.join(POLL.multipliedBy(2).toMillis());
            store.cancelOnLoss();
            store.add("job/finished", 1);
            if (ok && reason == null && layout.firstProcess()) {
                store.awaitAtLeast("job/finished", layout.processes(), FINISH_WAIT);
            }
        } catch (UserError | IllegalStateException e) {
            // the store is gone: nothing left to tell it
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            store.close();
        }
    }

    @Override
    public void close() {
        finished = true;
        store.close();
    }
}
