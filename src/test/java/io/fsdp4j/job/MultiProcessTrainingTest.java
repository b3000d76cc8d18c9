package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.TestThreads;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.train.Training;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code fsdp4j train} in real child JVMs started as {@code fsdp4j launch --nproc-per-node 2} starts them: 2
 * processes x 2 CPU ranks against 1 process x 4 ranks in this JVM, with a process killed from outside mid-run.
 * (Hybrid sharding over 2 processes against 1: {@link MultinodeExamplesTest}.)
 */
@Timeout(120)
class MultiProcessTrainingTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** For the children of tests: a few seconds of a tiny model start and run faster with these, and lighter. */
    static final List<String> QUICK_JVM = List.of("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC");

    @TempDir
    Path dir;

    /** 64 random sequences of 32 tokens for the tiny model (256 tokens), pre-tokenized, in {@code dir}. */
    static Path data(Path dir) throws IOException {
        Path file = dir.resolve("data.jsonl");
        if (!Files.exists(file)) {
            var random = new java.util.SplittableRandom(7);
            List<String> lines = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                lines.add(JSON.writeValueAsString(java.util.Map.of("input_ids", random.ints(32, 0, 256).toArray())));
            }
            Files.write(file, lines);
        }
        return file;
    }

    /** The settings of the runs: a tiny model, 4 ranks on this node, a checkpoint after every step. */
    static List<String> settings(Path run, String strategy, int steps) throws IOException {
        List<String> sets = new ArrayList<>(List.of("model.preset=tiny", "dist.device=cpu", "dist.ranks=4",
                "data.train=" + data(run.getParent()), "data.seq_len=32", "train.steps=" + steps, "fsdp.strategy=" + strategy,
                "log.metrics=" + run.resolve("metrics.jsonl"), "checkpoint.dir=" + run.resolve("checkpoints"),
                "checkpoint.every=1", "checkpoint.resume=auto"));
        if (strategy.startsWith("hybrid")) {
            sets.add("fsdp.shard_size=2"); // shard inside a "node" (a process), replicate across
        }
        return sets;
    }

    /** One process hosting the 4 ranks, in this JVM: the step losses from its metrics file. */
    static List<Double> inProcess(Path run, String strategy, int steps) throws IOException {
        var out = new ByteArrayOutputStream();
        int status = Training.run(TrainConfig.load(null, settings(run, strategy, steps)),
                new PrintStream(out, true, StandardCharsets.UTF_8));
        assertThat(status).isZero();
        return losses(run);
    }

    static List<Double> losses(Path run) {
        try {
            List<Double> losses = new ArrayList<>();
            for (String line : Files.readAllLines(run.resolve("metrics.jsonl"))) {
                JsonNode node = JSON.readTree(line);
                if (node.has("loss")) {
                    losses.add(node.get("loss").asDouble());
                }
            }
            return losses;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** attemptEndedAfter: seconds from the kill to the launcher's word that the attempt ended (NaN: no kill). */
    private record Launched(Launcher.Outcome outcome, List<String> out, List<String> err, double attemptEndedAfter) {
        double finalLoss() {
            String summary = out.stream().filter(l -> l.startsWith("[node 0 process 0] {\"summary\"")).findFirst()
                    .orElseThrow(() -> new AssertionError("no summary in " + out + " / " + err));
            try {
                return JSON.readTree(summary.substring(summary.indexOf('{'))).get("final_loss").asDouble();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** What the test does to process 1 of the first attempt: kill it (SIGKILL), or stop it (SIGSTOP) alive. */
    private enum Signal { KILL, STOP }

    /**
     * {@code fsdp4j launch --nproc-per-node 2 [--max-restarts R] -- train --set ...}, the children through
     * {@link PidFileMain}; with {@code afterStep} > 0, process 1 of the first attempt gets {@code signal} once the
     * checkpoint of that step exists. A stopped process is killed at the end, whatever happened.
     */
    private Launched launch(Path run, String strategy, int steps, int maxRestarts, int afterStep, Signal signal,
                            List<String> env, Duration stopGrace) throws Exception {
        Path pids = Files.createDirectories(run.resolve("pids"));
        List<String> command = new ArrayList<>(Launcher.javaCommand(PidFileMain.class.getName()));
        command.addAll(1, QUICK_JVM);
        if (!env.isEmpty()) { // the launcher passes its own environment on
            command.addAll(0, env);
            command.addFirst("env");
        }
        command.add(pids.toString());
        command.add("train");
        for (String s : settings(run, strategy, steps)) {
            command.addAll(List.of("--set", s));
        }
        var plan = new Launcher.Plan(new JobLayout.Nodes(1, 0, null, "single node"), 2, JobToken.generate(),
                maxRestarts, command, stopGrace);
        List<String> out = Collections.synchronizedList(new ArrayList<>());
        List<String> err = Collections.synchronizedList(new ArrayList<>());
        long[] signalledAt = {0}, attemptEndedAt = {0};
        var job = CompletableFuture.supplyAsync(() -> Launcher.run(plan, out::add, line -> {
            if (line.contains("; restarting the job") && attemptEndedAt[0] == 0) {
                attemptEndedAt[0] = System.nanoTime();
            }
            err.add(line);
        }), TestThreads.OWN_THREAD);
        ProcessHandle signalled = null;
        try {
            if (afterStep > 0) {
                Path checkpoint = Checkpoints.stepDir(run.resolve("checkpoints"), afterStep);
                while (!Files.exists(checkpoint) && !job.isDone()) {
                    Thread.sleep(20);
                }
                assertThat(job.isDone()).as("the job ended before step %d: %s %s", afterStep, out, err).isFalse();
                long pid = Long.parseLong(Files.readString(pids.resolve("process-1-attempt-0")));
                signalled = ProcessHandle.of(pid).orElseThrow();
                signalledAt[0] = System.nanoTime();
                if (signal == Signal.KILL) {
                    signalled.destroyForcibly();
                } else {
                    assertThat(new ProcessBuilder("kill", "-STOP", Long.toString(pid)).start().waitFor()).isZero();
                }
            }
            Launcher.Outcome outcome = job.get();
            return new Launched(outcome, out, err, afterStep > 0 ? (attemptEndedAt[0] - signalledAt[0]) / 1e9 : Double.NaN);
        } finally {
            if (signal == Signal.STOP && signalled != null && signalled.isAlive()) { // leave nothing running
                new ProcessBuilder("kill", "-CONT", Long.toString(signalled.pid())).start().waitFor();
                signalled.destroyForcibly();
            }
        }
    }

    /**
     * Full sharding over 2 processes, {@code --max-restarts 1}: process 1 is killed (SIGKILL) after the checkpoint
     * of step 2. The attempt ends soon, process 0 naming the ranks it lost and the launcher the process, with a
     * non-zero status; the job starts again, resumes from the last checkpoint (whole, though written while a
     * process was dying) and ends with the losses of an uninterrupted run.
     */
    @Test
    void aKilledProcessEndsTheAttemptAndARestartFinishesTheRunFromTheLastCheckpoint() throws Exception {
        int steps = 5;
        List<Double> reference = inProcess(dir.resolve("one"), "full_shard", steps);

        Launched restarted = launch(dir.resolve("restarted"), "full_shard", steps, 1, 2, Signal.KILL, List.of(),
                Duration.ofSeconds(5));
        assertThat(restarted.outcome().ok()).as("%s %s", restarted.outcome(), restarted.err()).isTrue();
        assertThat(restarted.err()).as("%s", restarted.err()).anyMatch(l -> l.startsWith("[node 0 process 0] error: "
                + "the job stopped: ") && l.contains("process 1 (node 0, ranks 2-3)"));
        assertThat(restarted.err()).anyMatch(l -> l.equals("fsdp4j launch: node 0 process 1 (process 1 of 2) exited "
                + "with status 137 (killed by signal 9); restarting the job (restart 1 of 1)"));
        assertThat(restarted.attemptEndedAfter()).as("the attempt ends soon after the kill").isLessThan(15);
        assertThat(restarted.out()).anyMatch(l -> l.startsWith("[node 0 process 0] fsdp4j: resuming from "));
        assertThat(restarted.finalLoss()).isCloseTo(reference.getLast(), within(1e-6));
        // the metrics file holds the whole run once: the first attempt's steps up to the checkpoint, then the resumed
        List<Double> all = losses(dir.resolve("restarted"));
        assertThat(all).hasSize(steps);
        for (int i = 0; i < steps; i++) {
            assertThat(all.get(i)).as("step %d", i + 1).isCloseTo(reference.get(i), within(1e-6));
        }
    }

    /**
     * Process 1 is stopped (SIGSTOP: alive, holding its connections, silent) after the checkpoint of step 2, with
     * collectives timing out after 5 s. Process 0's collective times out; it reads the processes' progress from the
     * store and fails naming process 1 as the one that stopped reporting, with the step it was at; the launcher
     * ends the attempt (killing the stopped process) and, with {@code --max-restarts 1}, the run finishes from the
     * last checkpoint (whole) with the losses of an uninterrupted run.
     */
    @Test
    void aStoppedProcessIsNamedWhenTheOthersTimeOutAndARestartFinishesTheRun() throws Exception {
        int steps = 4;
        List<Double> reference = inProcess(dir.resolve("one"), "full_shard", steps);

        Launched restarted = launch(dir.resolve("stopped"), "full_shard", steps, 1, 2, Signal.STOP,
                List.of(JobStart.COLLECTIVE_TIMEOUT_ENV + "=5"), Duration.ofSeconds(1));
        assertThat(restarted.outcome().ok()).as("%s %s", restarted.outcome(), restarted.err()).isTrue();
        assertThat(restarted.err()).as("%s", restarted.err()).anyMatch(l -> l.startsWith("[node 0 process 0] error: "
                + "the job stopped: process 1 (node 0, ranks 2-3) has not progressed for ")
                && l.contains(" and stopped reporting (last at step ")
                && l.contains("process 0 (node 0, ranks 0-1) waits for it in ")
                && l.endsWith("(" + JobStart.COLLECTIVE_TIMEOUT_ENV + "=5)"));
        assertThat(restarted.err()).anyMatch(l -> l.equals("fsdp4j launch: node 0 process 0 (process 0 of 2) exited "
                + "with status 5; restarting the job (restart 1 of 1)"));
        // 5 s of timeout, 2 s reading the others' progress, then closing and the launcher's 1 s of grace
        assertThat(restarted.attemptEndedAfter()).as("the attempt ends soon after the timeout").isLessThan(20);
        assertThat(restarted.out()).anyMatch(l -> l.startsWith("[node 0 process 0] fsdp4j: resuming from "));
        List<Double> all = losses(dir.resolve("stopped"));
        assertThat(all).hasSize(steps);
        for (int i = 0; i < steps; i++) {
            assertThat(all.get(i)).as("step %d", i + 1).isCloseTo(reference.get(i), within(1e-6));
        }
    }

    /**
     * {@code fsdp4j train --set dist.nnodes=2 ...} on two "nodes" of this machine that hold different job tokens:
     * node 1 is refused at once, and node 0 is told at once (not at the rendezvous timeout, ten minutes here),
     * naming the refused node's address, the reason and the node that will not join.
     */
    @Test
    void aNodeWithAnotherTokenIsRefusedAndNodeZeroIsToldAtOnce() throws Exception {
        int port;
        try (var socket = new java.net.ServerSocket(0)) {
            port = socket.getLocalPort();
        }
        List<Process> nodes = new ArrayList<>();
        for (int node = 0; node < 2; node++) {
            List<String> command = new ArrayList<>(Launcher.javaCommand("io.fsdp4j.cli.Main"));
            command.addAll(1, QUICK_JVM);
            command.add("train");
            for (String set : settings(dir.resolve("node" + node), "full_shard", 2)) {
                command.addAll(List.of("--set", set.replace("dist.ranks=4", "dist.ranks=2")));
            }
            command.addAll(List.of("--set", "dist.nnodes=2", "--set", "dist.node_rank=" + node, "--set",
                    "dist.rdzv=127.0.0.1:" + port));
            ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
                    .redirectOutput(dir.resolve("node" + node + ".log").toFile());
            builder.environment().put(JobToken.ENV, node == 0 ? "the-job-token" : "another-token");
            builder.environment().put(JobSettings.RDZV_TIMEOUT_ENV, "600");
            nodes.add(builder.start());
        }
        long start = System.nanoTime();
        for (Process p : nodes) {
            assertThat(p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        }
        assertThat((System.nanoTime() - start) / 1e9).as("both nodes know within seconds").isLessThan(30);
        List<String> node0 = Files.readAllLines(dir.resolve("node0.log")), node1 = Files.readAllLines(dir.resolve("node1.log"));
        assertThat(nodes.get(1).exitValue()).as("%s", node1).isEqualTo(2);
        assertThat(node1).contains("error: rendezvous at 127.0.0.1:" + port + " refused this process: wrong job token ("
                + JobToken.ENV + "); every node of a job must have the same one, and the others were told");
        assertThat(nodes.get(0).exitValue()).as("%s", node0).isEqualTo(2);
        assertThat(node0).contains("error: rendezvous at 127.0.0.1:" + port + " refused a process of this job: the "
                + "process connecting from 127.0.0.1 had a wrong job token (" + JobToken.ENV + "); node(s) 1 of 2 (ranks "
                + "2-3) will not join: give every node the same " + JobToken.ENV + " and start the job again");
    }
}
