package io.fsdp4j.train;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import sun.misc.Signal;
import sun.misc.SignalHandler;

/**
 * A request to stop training after the current step: every rank finishes it, the ranks agree (a request seen by
 * any process of the job stops them all at the same step), a checkpoint is saved where a directory is set, and the
 * run ends with {@link io.fsdp4j.ExitStatus#STOPPED}. {@link #onSignals} makes SIGTERM (what Slurm and Kubernetes
 * send before SIGKILL) and SIGINT (Ctrl-C) such requests; a second signal (a second later or more: the same one
 * often arrives twice) ends the process at once.
 */
public final class StopRequest implements AutoCloseable {
    private static final List<String> SIGNALS = List.of("TERM", "INT");

    /**
     * A signal this soon after the first is the same request delivered twice (Ctrl-C reaches the launcher's process
     * group and the launcher passes it on; Slurm signals every process of a step), not a second one. The system
     * property {@value #REPEAT_PROPERTY} (milliseconds) changes it, for tests.
     */
    static final String REPEAT_PROPERTY = "fsdp4j.stop.sameRequestMillis";
    static final long SAME_REQUEST_MILLIS = Long.getLong(REPEAT_PROPERTY, 1000);

    private volatile String reason;
    private volatile long signalledAt;
    private final List<Signal> installed = new ArrayList<>();
    private final List<SignalHandler> previous = new ArrayList<>();

    /** A request that only {@link #request} sets. */
    public StopRequest() {}

    /**
     * A request that SIGTERM and SIGINT set, until closed (the handlers before it are then restored). A second
     * signal, while the first is being honoured, halts the process with status 128 + its number, as the JVM's own
     * handler would have, but without waiting for anything.
     */
    public static StopRequest onSignals(PrintStream err) {
        StopRequest request = new StopRequest();
        for (String name : SIGNALS) {
            Signal signal;
            try {
                signal = new Signal(name);
            } catch (IllegalArgumentException e) {
                continue; // not on this platform
            }
            try {
                request.previous.add(Signal.handle(signal, s -> request.signalled(s, err)));
                request.installed.add(signal);
            } catch (IllegalArgumentException e) {
                // the JVM reserves it (-Xrs): the default handling stays
            }
        }
        return request;
    }

    /** Signals are handled on threads of their own: two at once must not both be taken for the first. */
    private synchronized void signalled(Signal signal, PrintStream err) {
        String name = "SIG" + signal.getName();
        long now = System.nanoTime();
        if (reason != null && now - signalledAt < SAME_REQUEST_MILLIS * 1_000_000) {
            return; // the first one again
        }
        if (reason != null) {
            err.println("fsdp4j: " + name + " while stopping for " + reason + ": stopping now, without a checkpoint");
            err.flush();
            Runtime.getRuntime().halt(128 + signal.getNumber());
        }
        reason = name;
        signalledAt = now;
        err.println("fsdp4j: " + name + ": finishing the current step, then saving and stopping (a second signal "
                + "stops at once)");
        err.flush();
    }

    /** Asks for a stop after the current step; {@code why} names the cause in the run's last message. */
    public void request(String why) {
        reason = why;
    }

    /** What asked for the stop, or null when nothing did. */
    public String reason() {
        return reason;
    }

    @Override
    public void close() {
        for (int i = 0; i < installed.size(); i++) {
            Signal.handle(installed.get(i), previous.get(i));
        }
        installed.clear();
        previous.clear();
    }
}
