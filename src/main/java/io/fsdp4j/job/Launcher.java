package io.fsdp4j.job;

import io.fsdp4j.ExitStatus;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * {@code fsdp4j launch}'s machinery: starts this node's processes of a job as child JVMs, tells each its place
 * through torchrun-style variables ({@code MASTER_ADDR}, {@code MASTER_PORT}, {@code WORLD_SIZE}, {@code RANK},
 * {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE}) plus the job token and the restart attempt, streams their output
 * line by line with a prefix naming them, and watches them: when one fails, the others are stopped (SIGTERM, then
 * killed after a grace period) and the job fails, naming the one that failed, or starts again, up to
 * {@code maxRestarts} times. Starting again re-runs the same command; a train command with
 * {@code checkpoint.resume=auto} then continues from its last checkpoint. A child that exits with
 * {@value NodeLeftOutException#EXIT_STATUS} was left out of the job by the preflight: the others go on without it,
 * and a launcher all of whose children were left out ends with that status, without starting them again.
 */
public final class Launcher {
    private Launcher() {}

    /**
     * What to start on this node.
     *
     * @param nodes        the job's nodes and this node's place (rdzv null: a free local port is picked)
     * @param procsPerNode processes to start here
     * @param token        the job token the children share
     * @param command      the child's command line, from the java executable on ({@link #javaCommand})
     * @param stopGrace    how long a stopped child may take to exit before it is killed
     * @param emulateNodes start every node's processes here, each node with its own {@code NCCL_HOSTID} (and NCCL
     *                     on loopback sockets): several nodes emulated on one machine
     */
    public record Plan(JobLayout.Nodes nodes, int procsPerNode, String token, int maxRestarts, List<String> command,
                       Duration stopGrace, boolean emulateNodes) {
        public Plan {
            command = List.copyOf(command);
            if (procsPerNode < 1 || maxRestarts < 0) {
                throw new IllegalArgumentException("procsPerNode >= 1 and maxRestarts >= 0");
            }
            if (emulateNodes && nodes.nodeRank() != 0) {
                throw new IllegalArgumentException("emulated nodes all start from node 0's launcher");
            }
        }

        /** This node's processes of a job of real nodes. */
        public Plan(JobLayout.Nodes nodes, int procsPerNode, String token, int maxRestarts, List<String> command,
                    Duration stopGrace) {
            this(nodes, procsPerNode, token, maxRestarts, command, stopGrace, false);
        }

        int processes() {
            return nodes.nnodes() * procsPerNode;
        }

        /** The nodes whose processes this launcher starts: every node when they are emulated, else its own. */
        List<Integer> localNodes() {
            if (!emulateNodes) {
                return List.of(nodes.nodeRank());
            }
            List<Integer> all = new ArrayList<>();
            for (int n = 0; n < nodes.nnodes(); n++) {
                all.add(n);
            }
            return all;
        }

        /** The job's index of the first process this launcher starts; the others follow in order. */
        int firstProcess() {
            return localNodes().getFirst() * procsPerNode;
        }
    }

    /** How the job ended: status 0 when every child exited 0; else the failed child's status and a message. */
    public record Outcome(int status, String failure) {
        public boolean ok() {
            return status == 0;
        }

        /**
         * The launcher's own exit status: the failed process's when it is one of {@link ExitStatus}'s (bad input,
         * diverged, left out, stopped by a signal after saving, an internal error), else (killed by a signal, or a
         * status of its own) {@link ExitStatus#PEER_FAILED}.
         */
        public int exitStatus() {
            return switch (status) {
                case ExitStatus.OK, ExitStatus.INTERNAL, ExitStatus.BAD_INPUT, ExitStatus.DIVERGED, ExitStatus.LEFT_OUT,
                     ExitStatus.PEER_FAILED, ExitStatus.STOPPED -> status;
                default -> ExitStatus.PEER_FAILED;
            };
        }
    }

    /** The variable that gives a child its launcher's pid, so that it ends when the launcher dies. */
    public static final String LAUNCHER_PID_ENV = "FSDP4J_LAUNCHER_PID";

    /** How often a child looks whether its launcher is still there. */
    private static final Duration LAUNCHER_POLL = Duration.ofMillis(500);

    /**
     * In a process that a launcher started ({@value #LAUNCHER_PID_ENV} set): a daemon thread that, when the launcher
     * dies (even by SIGKILL, which runs none of its hooks), stops this process as SIGTERM would (a train command
     * finishes its step, saves and exits; others end at once), and halts it if it is still there {@code grace} later.
     * Does nothing in a process that no launcher started.
     */
    public static void endWithLauncher(Map<String, String> env, Duration grace, Consumer<String> err) {
        String pid = env.get(LAUNCHER_PID_ENV);
        if (pid == null || pid.isBlank()) {
            return;
        }
        ProcessHandle launcher;
        try {
            launcher = ProcessHandle.of(Long.parseLong(pid.strip())).orElse(null);
        } catch (NumberFormatException e) {
            return;
        }
        Thread.ofPlatform().daemon().name("launcher-watch").start(() -> {
            // the handle knows its process's start time: a pid reused by another process is not taken for it
            while (launcher != null && launcher.isAlive()) {
                sleep(LAUNCHER_POLL.toMillis());
            }
            err.accept("fsdp4j: the launcher (pid " + pid.strip() + ") is gone: stopping");
            try {
                sun.misc.Signal.raise(new sun.misc.Signal("TERM"));
            } catch (IllegalArgumentException e) {
                Runtime.getRuntime().halt(ExitStatus.PEER_FAILED);
            }
            sleep(grace.toMillis());
            err.accept("fsdp4j: still running " + grace.toSeconds() + " s after the launcher died: ending now");
            Runtime.getRuntime().halt(ExitStatus.PEER_FAILED);
        });
    }

    /** The command line that runs {@code mainClass} in a JVM like this one: same java, JVM options and class path. */
    public static List<String> javaCommand(String mainClass) {
        String java = ProcessHandle.current().info().command()
                .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        List<String> command = new ArrayList<>();
        command.add(java);
        for (String option : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (!option.startsWith("-agentlib:jdwp") && !option.startsWith("-Xrunjdwp")) { // one debugger port each
                command.add(option);
            }
        }
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), mainClass));
        return command;
    }

    /**
     * Runs the plan to its end. {@code out} gets the children's standard output, {@code err} their standard error
     * and the launcher's own messages, each line prefixed with the child's place when the job has several processes.
     */
    public static Outcome run(Plan plan, Consumer<String> out, Consumer<String> err) {
        JobLayout.Address rdzv = plan.nodes().rdzv() != null ? plan.nodes().rdzv()
                : new JobLayout.Address("127.0.0.1", freeLocalPort());
        var signalled = new java.util.concurrent.atomic.AtomicBoolean();
        for (int attempt = 0; ; attempt++) {
            Outcome outcome = runOnce(plan, rdzv, attempt, out, err, signalled);
            if (outcome.ok() || outcome.status() == NodeLeftOutException.EXIT_STATUS // the others went on without it
                    || outcome.status() == ExitStatus.STOPPED // stopped on purpose, resumable: not a failure to retry
                    || signalled.get()) { // the launcher was told to stop: whatever its processes did, no restart
                return outcome;
            }
            if (attempt >= plan.maxRestarts()) {
                return new Outcome(outcome.status(), outcome.failure()
                        + (plan.maxRestarts() > 0 ? " (after " + attempt + " restart(s))" : ""));
            }
            err.accept("fsdp4j launch: " + outcome.failure() + "; restarting the job (restart " + (attempt + 1) + " of "
                    + plan.maxRestarts() + ")");
            if (plan.nodes().nnodes() > 1 && !plan.emulateNodes()) {
                sleep(2000); // the failed attempt's processes on other nodes stop meanwhile
            }
        }
    }

    private static Outcome runOnce(Plan plan, JobLayout.Address rdzv, int attempt, Consumer<String> out,
                                   Consumer<String> err, java.util.concurrent.atomic.AtomicBoolean signalled) {
        List<Process> children = new java.util.concurrent.CopyOnWriteArrayList<>();
        List<String> names = new ArrayList<>();
        List<Thread> pumps = new ArrayList<>();
        Thread stopOnExit = Thread.ofPlatform().unstarted(() -> stop(children, plan.stopGrace()));
        Runtime.getRuntime().addShutdownHook(stopOnExit);
        try (var forwarding = SignalForwarding.to(children, err, signalled)) {
            for (int node : plan.localNodes()) {
                for (int local = 0; local < plan.procsPerNode(); local++) {
                    int process = node * plan.procsPerNode() + local;
                    String name = plan.procsPerNode() == 1 ? "node " + node : "node " + node + " process " + process;
                    ProcessBuilder builder = new ProcessBuilder(plan.command());
                    builder.environment().putAll(childEnv(plan, rdzv, node, local, attempt));
                    start(plan, builder, name, children, names, pumps, out, err);
                }
            }
            Outcome outcome = watch(plan, children, names, err);
            joinAll(pumps, Duration.ofSeconds(5));
            return outcome;
        } finally {
            try {
                Runtime.getRuntime().removeShutdownHook(stopOnExit);
            } catch (IllegalStateException e) {
                // the JVM is exiting: the hook runs
            }
        }
    }

    /**
     * SIGTERM and SIGINT to the launcher, passed on to its processes as SIGTERM (a train command finishes its step,
     * saves a checkpoint and exits with {@link ExitStatus#STOPPED}), while the launcher waits for them and ends with
     * their status. A second signal, a second or more after the first, kills them.
     */
    private static final class SignalForwarding implements AutoCloseable {
        private final List<sun.misc.Signal> installed = new ArrayList<>();
        private final List<sun.misc.SignalHandler> previous = new ArrayList<>();
        private volatile long firstAt = -1;

        static SignalForwarding to(List<Process> children, Consumer<String> err,
                                   java.util.concurrent.atomic.AtomicBoolean signalled) {
            SignalForwarding forwarding = new SignalForwarding();
            for (String name : List.of("TERM", "INT")) {
                try {
                    sun.misc.Signal signal = new sun.misc.Signal(name);
                    forwarding.previous.add(sun.misc.Signal.handle(signal, s -> {
                        signalled.set(true);
                        forwarding.on(s, children, err);
                    }));
                    forwarding.installed.add(signal);
                } catch (IllegalArgumentException e) {
                    // not on this platform, or reserved (-Xrs): the shutdown hook stops the processes
                }
            }
            return forwarding;
        }

        private void on(sun.misc.Signal signal, List<Process> children, Consumer<String> err) {
            long now = System.nanoTime();
            if (firstAt < 0) {
                firstAt = now;
                err.accept("fsdp4j launch: SIG" + signal.getName() + ": passing it on to the process(es), which finish "
                        + "their step, save and stop (a second signal kills them)");
                // through the handle: Process.destroy would also close our ends of its output, and its last words
                // (where it saved) would be lost
                children.stream().filter(Process::isAlive).forEach(p -> p.toHandle().destroy());
            } else if (now - firstAt > 1_000_000_000L) {
                err.accept("fsdp4j launch: SIG" + signal.getName() + " again: killing the process(es)");
                children.stream().filter(Process::isAlive).forEach(p -> p.toHandle().destroyForcibly());
            }
        }

        @Override
        public void close() {
            for (int i = 0; i < installed.size(); i++) {
                sun.misc.Signal.handle(installed.get(i), previous.get(i));
            }
        }
    }

    private static void start(Plan plan, ProcessBuilder builder, String name, List<Process> children, List<String> names,
                              List<Thread> pumps, Consumer<String> out, Consumer<String> err) {
        Process child;
        try {
            child = builder.start();
        } catch (IOException e) {
            stop(children, plan.stopGrace());
            throw new UncheckedIOException("cannot start " + plan.command().getFirst() + ": " + e.getMessage(), e);
        }
        children.add(child);
        names.add(name);
        String prefix = plan.processes() > 1 ? "[" + name + "] " : "";
        pumps.add(pump(child.getInputStream(), prefix, out));
        pumps.add(pump(child.getErrorStream(), prefix, err));
    }

    /**
     * Waits for every child to exit 0 (or to be left out of the job), or for the first failure, then stops the rest.
     */
    private static Outcome watch(Plan plan, List<Process> children, List<String> names, Consumer<String> err) {
        List<Integer> leftOut = new ArrayList<>();
        List<Integer> stopped = new ArrayList<>();
        List<Integer> running = new ArrayList<>();
        for (int i = 0; i < children.size(); i++) {
            running.add(i);
        }
        while (!running.isEmpty()) {
            try {
                CompletableFuture.anyOf(running.stream().map(i -> children.get(i).onExit())
                        .toArray(CompletableFuture[]::new)).get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                stop(children, plan.stopGrace());
                return new Outcome(130, "interrupted");
            } catch (ExecutionException e) {
                throw new IllegalStateException(e);
            }
            for (var it = running.iterator(); it.hasNext(); ) {
                int i = it.next();
                Process child = children.get(i);
                if (child.isAlive()) {
                    continue;
                }
                it.remove();
                int status = child.exitValue();
                if (status == NodeLeftOutException.EXIT_STATUS) {
                    leftOut.add(i);
                    err.accept("fsdp4j launch: " + names.get(i) + " (process " + (plan.firstProcess() + i) + " of "
                            + plan.processes() + ") was left out of the job by the preflight (its message above)"
                            + (running.isEmpty() ? "" : "; the other process(es) go on"));
                } else if (status == ExitStatus.STOPPED) { // on a signal: the others stop after the same step
                    stopped.add(i);
                } else if (status != 0) {
                    int process = plan.firstProcess() + i;
                    String failure = names.get(i) + " (process " + process + " of " + plan.processes()
                            + ") exited with status " + status + (status > 128 && status < 160
                            ? " (killed by signal " + (status - 128) + ")" : "");
                    if (!running.isEmpty()) {
                        err.accept("fsdp4j launch: " + failure + "; stopping the other process(es)"
                                + (plan.emulateNodes() ? "" : " of this node"));
                        // they are aborting their collectives: let them say why before they are stopped
                        awaitExit(children, Duration.ofSeconds(2));
                    }
                    stop(children, plan.stopGrace());
                    return new Outcome(status, failure);
                }
            }
        }
        if (!stopped.isEmpty()) {
            return new Outcome(ExitStatus.STOPPED, String.join(", ", stopped.stream().sorted().map(names::get).toList())
                    + " stopped on a signal after saving (see its message above)");
        }
        if (!leftOut.isEmpty() && leftOut.size() == children.size()) {
            return new Outcome(NodeLeftOutException.EXIT_STATUS, String.join(", ",
                    leftOut.stream().sorted().map(names::get).toList()) + " left out of the job by the preflight (dist.exclude_unhealthy): the other node(s) "
                    + "train without " + (leftOut.size() == 1 ? "it" : "them"));
        }
        return new Outcome(0, null);
    }

    private static void awaitExit(List<Process> children, Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        for (Process child : children) {
            try {
                child.waitFor(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /**
     * The variables that tell child {@code local} of {@code node} its place; the rest of the environment is
     * inherited. Emulated nodes also get their own {@code NCCL_HOSTID}, and NCCL's sockets on loopback unless
     * {@code NCCL_SOCKET_IFNAME} is set.
     */
    static Map<String, String> childEnv(Plan plan, JobLayout.Address rdzv, int node, int local, int attempt) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("MASTER_ADDR", rdzv.host());
        env.put("MASTER_PORT", Integer.toString(rdzv.port()));
        env.put("WORLD_SIZE", Integer.toString(plan.processes()));
        env.put("RANK", Integer.toString(node * plan.procsPerNode() + local));
        env.put("LOCAL_RANK", Integer.toString(local));
        env.put("LOCAL_WORLD_SIZE", Integer.toString(plan.procsPerNode()));
        env.put(JobToken.ENV, plan.token());
        env.put(JobSettings.RESTART_ENV, Integer.toString(attempt));
        env.put(LAUNCHER_PID_ENV, Long.toString(ProcessHandle.current().pid()));
        if (plan.emulateNodes()) {
            env.put("NCCL_HOSTID", "fsdp4j-emulated-node-" + node);
            String ifname = System.getenv("NCCL_SOCKET_IFNAME");
            env.put("NCCL_SOCKET_IFNAME", ifname == null || ifname.isBlank() ? "lo" : ifname);
        }
        return env;
    }

    /** SIGTERM to every live child, then SIGKILL to those still alive after the grace period. */
    static void stop(List<Process> children, Duration grace) {
        children.stream().filter(Process::isAlive).forEach(Process::destroy);
        long deadline = System.nanoTime() + grace.toNanos();
        for (Process child : children) {
            try {
                long left = deadline - System.nanoTime();
                if (left <= 0 || !child.waitFor(left, TimeUnit.NANOSECONDS)) {
                    child.destroyForcibly();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                child.destroyForcibly();
            }
        }
        for (Process child : children) {
            try {
                child.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static Thread pump(InputStream stream, String prefix, Consumer<String> sink) {
        return Thread.ofPlatform().daemon().name("launch-output").start(() -> {
            try (var reader = new BufferedReader(new InputStreamReader(stream, StandardCharsets.UTF_8))) {
                for (String line; (line = reader.readLine()) != null; ) {
                    sink.accept(prefix + line);
                }
            } catch (IOException e) {
                // the child is gone
            }
        });
    }

    private static void joinAll(List<Thread> threads, Duration limit) {
        long deadline = System.nanoTime() + limit.toNanos();
        for (Thread t : threads) {
            try {
                t.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static int freeLocalPort() {
        try (var socket = new ServerSocket()) {
            socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("no free local port for the rendezvous", e);
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
