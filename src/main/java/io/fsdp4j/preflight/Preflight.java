package io.fsdp4j.preflight;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.doctor.GpuHealth;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobRendezvous;
import io.fsdp4j.job.JobSettings;
import io.fsdp4j.job.JobStart;
import io.fsdp4j.job.NodeLeftOutException;
import io.fsdp4j.job.RendezvousClient;
import io.fsdp4j.job.TcpWorld;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The preflight exchange of a job of several processes, through its rendezvous store: each process publishes its
 * {@link NodeFacts} under {@code preflight/<process>}, then reads every other's, waiting at most the given time in
 * all. A process that cannot state its facts publishes why before it stops, and one started with
 * {@value #SKIP_OPTION} publishes that it skips: the others then stop naming it, or skip the comparison too,
 * instead of waiting out the timeout. The comparison ({@link Comparison}) is the same on every process, so a
 * mismatch stops every one of them with the same message; or, where the only problems are nodes' health and
 * {@code dist.exclude_unhealthy} is set, every process reaches the same smaller job without those nodes
 * ({@link LeavingOut}).
 */
public final class Preflight {
    /** The command-line option that skips the check (logged, and told to the other processes). */
    public static final String SKIP_OPTION = "--skip-preflight";

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String KEY = "preflight/";
    private static final Duration FINISH_WAIT = Duration.ofSeconds(10);

    private Preflight() {}

    /** What a process publishes: its facts, or that it skips, or why it cannot take part. */
    record Published(String state, String message, NodeFacts facts) {
        static final String FACTS = "facts", SKIPPED = "skipped", FAILED = "failed";
    }

    /** The processes' names for messages: "node 1", or "process 3 (node 1)" with several processes a node. */
    public static List<String> names(JobLayout layout) {
        List<String> names = new ArrayList<>();
        for (int p = 0; p < layout.processes(); p++) {
            names.add(layout.procsPerNode() == 1 ? "node " + p : "process " + p + " (node " + p / layout.procsPerNode() + ")");
        }
        return List.copyOf(names);
    }

    /**
     * The check at the start of a job of several processes ({@link JobStart.NodeCheck}), once they have joined
     * (the first process serves the rendezvous store until the job ends) and before the model is loaded: this
     * process's {@link NodeFacts} for {@code config}, with the quick GPU health test on CUDA when the process hosts
     * all of its node's GPUs ({@value GpuHealth#FAULT_ENV} in {@code env} stands in for the test, for tests and
     * drills); or, with {@code dist.preflight=false} ({@value #SKIP_OPTION}), the skip, logged. Waits for the others
     * at most the rendezvous timeout of {@code env}. Logs to standard output.
     *
     * <p>When the only problems are nodes' health and {@code dist.exclude_unhealthy} is set, the job starts without
     * those nodes if its layout allows ({@link LeavingOut}): every process logs which nodes are left out and why; a
     * process of a left-out node ends with {@link NodeLeftOutException}; the others get the smaller job to form, whose
     * store the first of them serves at an address it publishes here.
     *
     * @param cuda   whether the job runs on the CUDA backend
     * @param meshOf the mesh of a smaller job of {@code config} (may refuse it with a {@link UserError}); null when
     *               the caller cannot start a smaller job than it asked for
     * @throws UserError {@code preflight: ...} naming the process that differs and what differs
     */
    public static JobStart.NodeCheck atJobStart(TrainConfig config, boolean cuda, Map<String, String> env,
                                                Function<JobLayout, DeviceMesh> meshOf) {
        Consumer<String> log = System.out::println;
        return rendezvous -> {
            JobLayout layout = rendezvous.layout();
            RendezvousClient store = rendezvous.store();
            if (!config.dist().preflight()) {
                skip(store, layout.process(), log);
                return Optional.empty();
            }
            List<String> names = names(layout);
            Optional<Comparison> compared = exchange(store, layout.process(), names, () -> {
                NodeFacts facts = NodeFacts.of(config, cuda);
                Optional<GpuHealth.Quick> injected = GpuHealth.injectedFault(env);
                if (injected.isPresent()) {
                    return facts.withHealth(injected.get());
                }
                return cuda && layout.procsPerNode() == 1 ? facts.withHealth(GpuHealth.quick()) : facts;
            }, JobSettings.fromEnv(env, Duration.ZERO).rendezvousTimeout(), log);
            if (compared.isEmpty() || compared.get().agree()) {
                return Optional.empty();
            }
            Comparison comparison = compared.get();
            LeavingOut leaving = LeavingOut.plan(comparison, layout);
            String obstacle = leaving.obstacle(comparison, meshOf);
            if (!config.dist().excludeUnhealthy() || obstacle != null) {
                finish(store, names.size());
                String tail = leaving.nodes().isEmpty() || !comparison.onlyHealthProblems() ? ""
                        : !config.dist().excludeUnhealthy()
                        ? " (dist.exclude_unhealthy=true would start without " + leaving.named() + ")"
                        : "; cannot start without " + leaving.named() + " (dist.exclude_unhealthy): " + obstacle;
                throw new UserError("preflight: " + comparison.message() + tail);
            }
            return Optional.of(leaveOut(rendezvous, leaving, meshOf, env, log));
        };
    }

    /**
     * The job without {@code leaving}'s nodes, for this process: every process logs the verdict; the first process
     * that remains picks the smaller job's rendezvous address and publishes it; every process waits until all have
     * read it (the old store must outlive that); then a left-out process stops, the others go on.
     */
    private static JobStart.Smaller leaveOut(JobRendezvous rendezvous, LeavingOut leaving,
                                            Function<JobLayout, DeviceMesh> meshOf, Map<String, String> env,
                                            Consumer<String> log) {
        JobLayout layout = rendezvous.layout();
        RendezvousClient store = rendezvous.store();
        String verdict = "leaving " + leaving.named() + " out of the job (dist.exclude_unhealthy): " + leaving.why();
        log.accept("fsdp4j: preflight: " + verdict + "; the other " + leaving.remaining() + " node(s) start without it");
        JobLayout.Address next = null;
        try {
            if (layout.process() == leaving.firstRemainingProcess()) {
                next = new JobLayout.Address(advertisedHost(store, layout, env), freePort());
                store.set(KEY + "smaller-rdzv", next.toString());
            } else if (!leaving.leavesOutThisProcess()) {
                Duration wait = JobSettings.fromEnv(env, Duration.ZERO).rendezvousTimeout();
                next = JobLayout.Address.parse(store.getString(KEY + "smaller-rdzv", wait).orElseThrow(() ->
                        new UserError("preflight: the first remaining process did not publish the smaller job's "
                                + "rendezvous address within " + wait.toSeconds() + " s")), "the smaller job's rendezvous");
            }
        } finally {
            finish(store, layout.processes()); // every process has read what it needs from this store
        }
        if (leaving.leavesOutThisProcess()) {
            throw new NodeLeftOutException("preflight: " + verdict + "; this process stops here and the other "
                    + leaving.remaining() + " node(s) train without it");
        }
        JobLayout smaller = leaving.smaller(next);
        log.accept("fsdp4j: preflight: the job goes on as " + smaller.nnodes() + " node(s) of " + smaller.ranksPerNode()
                + " rank(s); " + layout.describeProcess(layout.process()) + (smaller.process() == layout.process()
                ? " keeps its place" : " is now " + smaller.describeProcess(smaller.process())) + "; rendezvous "
                + smaller.rdzv());
        return new JobStart.Smaller(smaller, meshOf.apply(smaller), verdict);
    }

    /** The host the other processes reach this one at: as {@link TcpWorld} publishes it. */
    private static String advertisedHost(RendezvousClient store, JobLayout layout, Map<String, String> env) {
        String advertise = env.get(JobSettings.ADVERTISE_ENV);
        if (advertise != null && !advertise.isBlank()) {
            return advertise.strip();
        }
        // over loopback, this process shares the store's host: the others reach it where they reach the store
        return store.localAddress().isLoopbackAddress() ? layout.rdzvHost() : store.localAddress().getHostAddress();
    }

    /** A port free on this host now, for the smaller job's store (bound when that job starts, seconds later). */
    private static int freePort() {
        try (var socket = new java.net.ServerSocket()) {
            socket.setReuseAddress(true);
            socket.bind(new java.net.InetSocketAddress(0));
            return socket.getLocalPort();
        } catch (java.io.IOException e) {
            throw new UserError("preflight: no free port on this host for the smaller job's rendezvous: " + e.getMessage());
        }
    }

    /** {@link #check(RendezvousClient, int, List, Supplier, Duration, Consumer)} for this process of {@code layout}. */
    public static Optional<Comparison> check(RendezvousClient store, JobLayout layout, Supplier<NodeFacts> facts,
                                             Duration wait, Consumer<String> log) {
        return check(store, layout.process(), names(layout), facts, wait, log);
    }

    /**
     * Publishes this process's facts, reads everyone's and compares them.
     *
     * @param me    this process's index in {@code names}
     * @param facts this process's facts, taken here (a failure to take them is published, then thrown)
     * @param wait  how long to wait in all for the other processes' facts
     * @param log   where the verdict and the notes go, one line each
     * @return the comparison, or empty when some process skipped the check
     * @throws UserError {@code preflight: ...} when the processes differ, one could not take part, or one did not
     *                   publish in time
     */
    public static Optional<Comparison> check(RendezvousClient store, int me, List<String> names,
                                             Supplier<NodeFacts> facts, Duration wait, Consumer<String> log) {
        Optional<Comparison> comparison = exchange(store, me, names, facts, wait, log);
        if (comparison.isPresent() && !comparison.get().agree()) {
            finish(store, names.size());
            throw new UserError("preflight: " + comparison.get().message());
        }
        return comparison;
    }

    /**
     * The exchange of {@link #check}: the comparison, logged when the nodes agree, returned as it is when they do
     * not (the caller stops the job, after {@link #finish}, or leaves nodes out).
     */
    private static Optional<Comparison> exchange(RendezvousClient store, int me, List<String> names,
                                                 Supplier<NodeFacts> facts, Duration wait, Consumer<String> log) {
        long deadline = System.nanoTime() + wait.toNanos();
        NodeFacts mine;
        try {
            mine = facts.get();
        } catch (RuntimeException e) {
            publish(store, me, new Published(Published.FAILED, String.valueOf(e.getMessage()), null));
            finish(store, names.size());
            throw e;
        }
        publish(store, me, new Published(Published.FACTS, null, mine));
        List<NodeFacts> all = new ArrayList<>();
        List<String> skipped = new ArrayList<>();
        for (int p = 0; p < names.size(); p++) {
            // a process that does not publish in time is named at once: waiting for it at the end is pointless
            Published theirs = p == me ? new Published(Published.FACTS, null, mine) : read(store, p, names, wait, deadline);
            switch (theirs.state()) {
                case Published.FAILED -> {
                    finish(store, names.size());
                    throw new UserError("preflight: " + names.get(p) + " stopped before the check: " + theirs.message());
                }
                case Published.SKIPPED -> skipped.add(names.get(p));
                default -> all.add(theirs.facts());
            }
        }
        if (!skipped.isEmpty()) {
            log.accept("fsdp4j: preflight skipped: " + String.join(", ", skipped) + " started with " + SKIP_OPTION);
            return Optional.empty();
        }
        Comparison comparison = Comparison.of(names, all);
        comparison.notes().forEach(note -> log.accept("fsdp4j: preflight: note: " + note));
        if (!comparison.agree()) {
            return Optional.of(comparison);
        }
        log.accept("fsdp4j: preflight passed: " + names.size() + " processes agree on " + mine.facts().size()
                + " facts (versions, libraries, model, data, config)" + (mine.measures().isEmpty() ? ""
                : " and their GPUs passed the health test"));
        return Optional.of(comparison);
    }

    /**
     * Before a process stops the job, it waits (briefly) until every process has read what it needs: the first
     * process serves the store, and stopping it earlier would leave the others with a lost store instead of the
     * verdict. A store already gone is no reason to wait.
     */
    private static void finish(RendezvousClient store, int processes) {
        try {
            store.barrier(KEY + "verdicts", processes, FINISH_WAIT);
        } catch (UserError gone) {
            // the store is gone: nobody is left to wait for
        }
    }

    /** Skips the check for this process, saying so in the log and to the other processes. */
    public static void skip(RendezvousClient store, int me, Consumer<String> log) {
        publish(store, me, new Published(Published.SKIPPED, null, null));
        log.accept("fsdp4j: preflight skipped (" + SKIP_OPTION + "): the processes of this job are not compared");
    }

    private static void publish(RendezvousClient store, int me, Published published) {
        try {
            store.set(KEY + me, JSON.writeValueAsString(published));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    private static Published read(RendezvousClient store, int p, List<String> names, Duration wait, long deadline) {
        Duration left = Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
        String json = store.getString(KEY + p, left).orElseThrow(() -> new UserError("preflight: " + names.get(p)
                + " did not publish its facts within " + wait.toSeconds() + " s (is it running this fsdp4j build?)"));
        try {
            return JSON.readValue(json, Published.class);
        } catch (JsonProcessingException e) {
            throw new UserError("preflight: " + names.get(p) + " published unreadable facts (another fsdp4j version?): "
                    + e.getOriginalMessage());
        }
    }
}
