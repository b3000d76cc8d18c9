package io.fsdp4j.job;

import io.fsdp4j.UserError;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * This process's membership of a job of several processes: the first process serves the {@link RendezvousServer}
 * at the job's rendezvous address; every process connects to it with the job token and claims its place. Then the
 * processes publish values under their index and wait (bounded) for everyone's, failing with a message that names
 * the processes that did not come. The job's start checks ({@link JobStart#checkProcesses}) and the exchange of
 * NCCL unique ids go through the same store.
 */
public final class JobRendezvous implements AutoCloseable {
    private static final int LAST_WORDS_SECONDS = 15;
    private final JobLayout layout;
    private final Duration timeout;
    private final long deadline;
    private final RendezvousServer server; // the first process's, else null
    private final RendezvousClient store;

    private JobRendezvous(JobLayout layout, Duration timeout, long deadline, RendezvousServer server,
                          RendezvousClient store) {
        this.layout = layout;
        this.timeout = timeout;
        this.deadline = deadline;
        this.server = server;
        this.store = store;
    }

    /**
     * Serves the store (first process; {@code hosted}: one served already, for tests), connects, and claims this
     * process's place; the rendezvous timeout of {@code settings} bounds this and every later wait for the others.
     */
    static JobRendezvous join(JobLayout layout, JobSettings settings, RendezvousServer hosted) {
        Duration timeout = settings.rendezvousTimeout();
        long deadline = System.nanoTime() + timeout.toNanos();
        RendezvousServer server = null;
        if (layout.firstProcess()) {
            server = hosted != null ? hosted : RendezvousServer.start(layout.rdzvPort(), settings.token(),
                    settings.attempt());
        }
        RendezvousClient store;
        try {
            store = RendezvousClient.connect(layout.rdzvHost(), layout.rdzvPort(), settings.token(), settings.attempt(),
                    timeout);
        } catch (RuntimeException e) {
            if (server != null) {
                server.close();
            }
            throw e;
        }
        var joined = new JobRendezvous(layout, timeout, deadline, server, store);
        if (store.add("proc/" + layout.process() + "/joined", 1) > 1) {
            joined.close();
            throw new UserError("rendezvous: two processes joined as " + layout.describeProcess(layout.process())
                    + "; give each node its own dist.node_rank (or RANK)");
        }
        return joined;
    }

    public JobLayout layout() {
        return layout;
    }

    /** The connection to the store, for checks and exchanges of the job's start. */
    public RendezvousClient store() {
        return store;
    }

    /** What is left of the rendezvous timeout. */
    public Duration left() {
        return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
    }

    long deadline() {
        return deadline;
    }

    /** Publishes this process's value of {@code name}. */
    public void publish(String name, String value) {
        store.set("proc/" + layout.process() + "/" + name, value);
        store.add("count/" + name, 1);
    }

    /**
     * Every process's value of {@code name}, by process, waiting for them until the rendezvous deadline; then, or
     * when the store goes away (node 0 gave up first), fails naming the processes that have not published it. When
     * the store refuses a process (a wrong job token), fails within a second, naming it and the reason: every
     * process waiting is told at once.
     */
    public Map<Integer, String> awaitAll(String name) {
        Map<Integer, String> values = new TreeMap<>();
        List<Integer> missing = new ArrayList<>();
        for (int p = 0; p < layout.processes(); p++) {
            missing.add(p);
        }
        int me = layout.process();
        while (true) {
            java.util.Optional<String> refused;
            try {
                for (var it = missing.iterator(); it.hasNext(); ) {
                    int p = it.next();
                    var value = store.getString("proc/" + p + "/" + name, Duration.ZERO);
                    if (value.isPresent()) {
                        values.put(p, value.get());
                        it.remove();
                    }
                }
                if (missing.isEmpty()) {
                    return values;
                }
                refused = store.getString(RendezvousServer.REFUSED, Duration.ZERO);
                if (refused.isEmpty() && left().isZero()) {
                    break;
                }
                if (refused.isEmpty()) {
                    store.awaitAtLeast("count/" + name, layout.processes(),
                            Collections.min(List.of(left(), Duration.ofSeconds(1))));
                }
            } catch (UserError lost) { // node 0 gave up (or stopped): it was there, and so is this process
                missing.removeIf(p -> p == 0 || p == me);
                throw new UserError(lost.getMessage() + (missing.isEmpty() ? ""
                        : " while waiting for " + layout.describeProcesses(missing)), lost);
            }
            if (refused.isPresent()) { // the processes waiting for it would wait until the timeout: it never joins
                throw new UserError("rendezvous at " + store.address() + " refused a process of this job: "
                        + refused.get() + "; " + layout.describeProcesses(missing) + " will not join: give every node"
                        + " the same " + JobToken.ENV + " and start the job again");
            }
        }
        throw new UserError("rendezvous: timed out after " + JobLayout.seconds(timeout) + " waiting for "
                + layout.describeProcesses(missing));
    }

    /**
     * The value that process {@code owner} publishes under {@code key} (made there by {@code make}), for every
     * process that asks: an NCCL unique id made by a communicator's first member. Waits until the deadline.
     */
    public byte[] share(String key, int owner, java.util.function.Supplier<byte[]> make) {
        if (owner == layout.process()) {
            byte[] value = make.get();
            store.set(key, value);
            return value;
        }
        return store.get(key, left()).orElseThrow(() -> new UserError("rendezvous: timed out after "
                + JobLayout.seconds(timeout) + " waiting for " + layout.describeProcesses(List.of(owner))
                + " to publish '" + key + "'"));
    }

    /**
     * Disconnects; the first process also stops serving the store, once the others have disconnected (at most
     * {@value #LAST_WORDS_SECONDS} s later), so that each hears the end of the exchange it is in.
     */
    @Override
    public void close() {
        store.close();
        if (server != null) {
            server.awaitIdle(Duration.ofSeconds(LAST_WORDS_SECONDS));
            server.close();
        }
    }
}
