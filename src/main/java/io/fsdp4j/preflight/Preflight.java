package io.fsdp4j.preflight;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.dist.JobLayout;
import io.fsdp4j.dist.RendezvousClient;
import io.fsdp4j.dist.TcpWorld;
import io.fsdp4j.doctor.GpuHealth;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The preflight exchange of a job of several processes, through its rendezvous store: each process publishes its
 * {@link NodeFacts} under {@code preflight/<process>}, then reads every other's, waiting at most the given time in
 * all. A process that cannot state its facts publishes why before it stops, and one started with
 * {@value #SKIP_OPTION} publishes that it skips: the others then stop naming it, or skip the comparison too,
 * instead of waiting out the timeout. The comparison ({@link Comparison}) is the same on every process, so a
 * mismatch stops every one of them with the same message.
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
     * The check at the start of a job of several processes, once they have joined (the first process serves the
     * rendezvous store until the job ends) and before the model is loaded: this process's {@link NodeFacts} for
     * {@code config}, with the quick GPU health test on CUDA when the process hosts all of its node's GPUs; or, with
     * {@code dist.preflight=false} ({@value #SKIP_OPTION}), the skip, logged. Reaches the store with the job token
     * and restart attempt of {@code env}, as the rendezvous did, and waits for the others at most the rendezvous
     * timeout. Logs to standard output.
     *
     * @param cuda  whether the job runs on the CUDA backend
     * @param world the job's ranks in this process, returned as they are when the check passes
     * @throws UserError {@code preflight: ...} naming the process that differs and what differs
     */
    public static <W> W atJobStart(TrainConfig config, boolean cuda, JobLayout layout, Map<String, String> env,
                                   W world) {
        Consumer<String> log = System.out::println;
        var settings = TcpWorld.Settings.fromEnv(env, Duration.ZERO);
        try (var store = RendezvousClient.connect(layout.rdzvHost(), layout.rdzvPort(), settings.token(),
                settings.attempt(), settings.rendezvousTimeout())) {
            if (!config.dist().preflight()) {
                skip(store, layout.process(), log);
            } else {
                check(store, layout, () -> {
                    NodeFacts facts = NodeFacts.of(config, cuda);
                    return cuda && layout.procsPerNode() == 1 ? facts.withHealth(GpuHealth.quick()) : facts;
                }, settings.rendezvousTimeout(), log);
            }
        }
        return world;
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
            finish(store, names.size());
            throw new UserError("preflight: " + comparison.message());
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
