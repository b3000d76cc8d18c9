package io.fsdp4j.job;

import io.fsdp4j.UserError;
import io.fsdp4j.comm.DeviceMesh;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The start of a job of several processes, in one place: {@link #join} resolves how this process reaches the
 * others (CPU ranks over TCP, GPUs through NCCL), the rendezvous admits it, and {@link #checkProcesses} checks
 * that every process is about to run the same job before any collective starts, then runs the caller's
 * {@link NodeCheck} (the preflight), which may stop the job or shrink it: a job shrunk to fewer nodes is formed
 * again, from a new rendezvous, by the processes that remain.
 */
public final class JobStart {
    /** Seconds a collective waits for the other ranks before the job is stopped (default 600). */
    public static final String COLLECTIVE_TIMEOUT_ENV = "FSDP4J_COLLECTIVE_TIMEOUT";

    /**
     * The node check of the {@link #join} in progress on this thread. The worlds call {@link #checkProcesses}
     * themselves, in the middle of their own start; the check reaches it through this scoped value rather than
     * through every world's signature, and {@link #join} makes sure that it ran.
     */
    private static final ScopedValue<PendingCheck> NODE_CHECK = ScopedValue.newInstance();

    /** A node check, and whether {@link #checkProcesses} has run it. */
    private static final class PendingCheck {
        final NodeCheck check;
        boolean ran;

        PendingCheck(NodeCheck check) {
            this.check = check;
        }
    }

    private JobStart() {}

    /** How this process's ranks compute: on the CPU (threads, TCP between processes) or on GPUs (NCCL). */
    public enum Device { CPU, CUDA }

    /**
     * A check of the nodes themselves at the start of a job (the preflight), run by every process once all have
     * joined the rendezvous and agreed on the job's description, before any collective. It reaches the others
     * through {@code rendezvous.store()} and must reach the same verdict on every process.
     */
    @FunctionalInterface
    public interface NodeCheck {
        /**
         * @return empty to start the job as it is, or the smaller job this process starts instead (the others that
         *         remain return theirs)
         * @throws io.fsdp4j.UserError to stop the job; {@link NodeLeftOutException} in a process left out
         */
        Optional<Smaller> check(JobRendezvous rendezvous);
    }

    /**
     * The job without some nodes: this process's place in it (a new rendezvous address, served by its first
     * process), its mesh, and why, for the log.
     */
    public record Smaller(JobLayout layout, DeviceMesh mesh, String why) {}

    /** This process's part of the job as it started: where it stands, and its ranks. */
    public record Joined(JobLayout layout, LocalRanks ranks) {}

    /** Unwinds a world's start when the node check shrinks the job (the world closes what it opened). */
    private static final class Shrunk extends RuntimeException {
        final Smaller smaller;

        Shrunk(Smaller smaller) {
            super(smaller.why(), null, false, false);
            this.smaller = smaller;
        }
    }

    /**
     * Joins the job that {@code layout} describes (several processes), described by {@code settings} (see
     * {@link #describe(Map, DeviceMesh, JobLayout)}), running {@code check} once every process has joined. When the
     * check leaves nodes out, this process joins the smaller job it names (no check again: its nodes were compared
     * already): a job of one process left gets the in-process world of its mesh.
     */
    public static Joined join(JobLayout layout, DeviceMesh mesh, Device device, Map<String, ?> settings,
                              Map<String, String> env, NodeCheck check) {
        Smaller smaller;
        var pending = new PendingCheck(check);
        try {
            LocalRanks ranks = ScopedValue.where(NODE_CHECK, pending)
                    .call(() -> join(layout, mesh, device, describe(settings, mesh, layout), env));
            if (!pending.ran) { // a world that skipped checkProcesses would start the job unchecked
                throw new IllegalStateException("the " + device + " world started without the job's start checks");
            }
            return new Joined(layout, ranks);
        } catch (Shrunk shrunk) {
            smaller = shrunk.smaller;
        }
        JobLayout next = smaller.layout();
        if (next.multiProcess()) {
            return new Joined(next, join(next, smaller.mesh(), device, describe(settings, smaller.mesh(), next), env));
        }
        return new Joined(next, switch (device) {
            case CPU -> new InProcessWorld(smaller.mesh(), collectiveTimeout(env));
            case CUDA -> new NcclWorld(smaller.mesh());
        });
    }

    /**
     * Joins the job that {@code layout} describes (several processes): the ranks of this process, connected to
     * those of the others. {@code description} is what every process must agree on (see {@link #describe}).
     */
    public static LocalRanks join(JobLayout layout, DeviceMesh mesh, Device device, String description,
                                  Map<String, String> env) {
        if (!layout.multiProcess()) {
            throw new IllegalArgumentException("a job of one process needs no rendezvous");
        }
        var settings = JobSettings.fromEnv(env, collectiveTimeout(env));
        return switch (device) {
            case CPU -> TcpWorld.open(layout, mesh, settings, description);
            case CUDA -> NcclWorld.join(layout, mesh, settings, description);
        };
    }

    /** {@value #COLLECTIVE_TIMEOUT_ENV}, or 10 minutes. */
    public static Duration collectiveTimeout(Map<String, String> env) {
        String value = env.get(COLLECTIVE_TIMEOUT_ENV);
        if (value == null || value.isBlank()) {
            return Duration.ofMinutes(10);
        }
        try {
            long seconds = Long.parseLong(value.strip());
            if (seconds >= 1) {
                return Duration.ofSeconds(seconds);
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new UserError(COLLECTIVE_TIMEOUT_ENV + "='" + value + "' is not a number of seconds (at least 1)");
    }

    /**
     * The checks at the start of a job, when every process has joined the rendezvous and before any collective:
     * each process publishes its description of the job, and all of them stop, naming the first difference,
     * when a process's differs from the first process's (a node started with another config or another build).
     * Then the {@link NodeCheck} of the {@link #join} in progress, if any, compares the nodes themselves.
     */
    public static void checkProcesses(JobRendezvous rendezvous, String description) {
        rendezvous.publish("job", description);
        Map<Integer, String> all = rendezvous.awaitAll("job");
        JobLayout layout = rendezvous.layout();
        String reference = all.get(0);
        for (var e : all.entrySet()) {
            if (!e.getValue().equals(reference)) {
                throw new UserError("job start: " + layout.describeProcess(e.getKey()) + " was started for another job"
                        + " than " + layout.describeProcess(0) + ": " + firstDifference(reference, e.getValue())
                        + "; start every node with the same config and the same fsdp4j");
            }
        }
        if (NODE_CHECK.isBound()) {
            PendingCheck pending = NODE_CHECK.get();
            pending.ran = true;
            pending.check.check(rendezvous).ifPresent(smaller -> {
                throw new Shrunk(smaller);
            });
        }
    }

    /** "dist.ranks is 2 there, 3 here", from two descriptions of {@code key=value} lines. */
    static String firstDifference(String first, String other) {
        List<String> a = List.of(first.split("\n")), b = List.of(other.split("\n"));
        for (int i = 0; i < Math.max(a.size(), b.size()); i++) {
            String x = i < a.size() ? a.get(i) : "(nothing)", y = i < b.size() ? b.get(i) : "(nothing)";
            if (!x.equals(y)) {
                return "'" + y + "' where the first has '" + x + "'";
            }
        }
        return "the descriptions differ";
    }

    /** A job's description from its mesh and layout alone. */
    public static String describe(DeviceMesh mesh, JobLayout layout) {
        return describe(Map.of(), mesh, layout);
    }

    /**
     * A job's description: {@code settings} (flattened {@code section.key=value}, as a config's map; what differs
     * between nodes by design, such as {@code dist.node_rank}, left out by the caller), then the mesh and layout.
     */
    public static String describe(Map<String, ?> settings, DeviceMesh mesh, JobLayout layout) {
        List<String> lines = new ArrayList<>();
        flatten("", settings, lines);
        lines.add("fsdp4j=" + version());
        lines.add("mesh=" + mesh.replicas() + "x" + mesh.shardSize());
        lines.add("processes=" + layout.processes() + " (" + layout.procsPerNode() + " a node, " + layout.ranksPerProc()
                + " ranks each)");
        return String.join("\n", lines);
    }

    private static void flatten(String prefix, Map<String, ?> map, List<String> lines) {
        for (var e : map.entrySet()) {
            if (e.getValue() instanceof Map<?, ?> inner) {
                @SuppressWarnings("unchecked")
                Map<String, ?> section = (Map<String, ?>) inner;
                flatten(prefix + e.getKey() + ".", section, lines);
            } else {
                lines.add(prefix + e.getKey() + "=" + e.getValue());
            }
        }
    }

    private static String version() {
        String v = JobStart.class.getPackage().getImplementationVersion();
        return v == null ? "dev" : v;
    }
}
