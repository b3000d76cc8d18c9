package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.TestThreads;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobStart;
import io.fsdp4j.job.JobToken;
import io.fsdp4j.job.Launcher;
import io.fsdp4j.job.PidFileMain;
import java.io.File;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * GPUs across processes: two nodes emulated on one machine ({@code fsdp4j launch --emulate-nodes 2}), each a child
 * JVM with its own NCCL_HOSTID, the communicators' unique ids exchanged through the rendezvous store; and a process
 * that dies while the other waits in NCCL stops the job.
 */
@Tag("gpu")
@Timeout(180)
class GpuMultiProcessTest {

    /** The launcher's java command for {@link NcclJobSelfCheck}, with this JVM's test classes and jar on its path. */
    private static List<String> command(String... args) {
        List<String> command = new ArrayList<>(Launcher.javaCommand(NcclJobSelfCheck.class.getName()));
        int cp = command.indexOf("-cp");
        command.set(cp + 1, codeSource(NcclJobSelfCheck.class) + File.pathSeparator + codeSource(Launcher.class)
                + File.pathSeparator + command.get(cp + 1));
        command.addAll(List.of(args));
        return command;
    }

    private static String codeSource(Class<?> type) {
        try {
            return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static int gpusPerNode() {
        return Math.min(2, Cuda.deviceCount() / 2);
    }

    private static Launcher.Plan plan(List<String> command) {
        return plan(command, 0);
    }

    private static Launcher.Plan plan(List<String> command, int maxRestarts) {
        return new Launcher.Plan(new JobLayout.Nodes(2, 0, null, "emulated"), 1, JobToken.generate(), maxRestarts,
                command, Duration.ofSeconds(10), true);
    }

    /**
     * Collects a job's lines into {@code into} and echoes them on this JVM's standard error as they come, so that a
     * job that hangs shows on the GPU machine where its processes are.
     */
    private static java.util.function.Consumer<String> echoInto(List<String> into) {
        return line -> {
            System.err.println(line);
            into.add(line);
        };
    }

    /** {@code command} run with collectives timing out after {@code seconds} (the launcher passes its environment on). */
    private static List<String> withCollectiveTimeout(int seconds, List<String> command) {
        List<String> env = new ArrayList<>(List.of("env", JobStart.COLLECTIVE_TIMEOUT_ENV + "=" + seconds));
        env.addAll(command);
        return env;
    }

    @Test
    void twoEmulatedNodesAgreeOnEveryGroupOfTheMesh() {
        GpuTests.requireGpus(2);
        int perNode = gpusPerNode();
        List<String> out = Collections.synchronizedList(new ArrayList<>());
        List<String> err = Collections.synchronizedList(new ArrayList<>());
        Launcher.Outcome outcome = Launcher.run(plan(command(Integer.toString(perNode))), echoInto(out),
                echoInto(err));
        assertThat(outcome.ok()).as("%s %s", outcome, err).isTrue();
        String ranks0 = perNode == 1 ? "[0]" : "[0, 1]", ranks1 = perNode == 1 ? "[1]" : "[2, 3]";
        assertThat(out).anyMatch(l -> l.startsWith("[node 0] process 0 ok: ranks " + ranks0 + " of " + 2 * perNode)
                && l.endsWith("NCCL_HOSTID=fsdp4j-emulated-node-0"));
        assertThat(out).anyMatch(l -> l.startsWith("[node 1] process 1 ok: ranks " + ranks1 + " of " + 2 * perNode)
                && l.endsWith("NCCL_HOSTID=fsdp4j-emulated-node-1"));
    }

    /**
     * Process 1 vanishes (halts, status 0: the launcher stops nobody) while process 0 waits for it inside NCCL;
     * process 0 must hear it through the rendezvous store, abort its communicators and fail, naming process 1.
     */
    @Test
    void aProcessThatVanishesStopsTheOtherWaitingInNccl() {
        GpuTests.requireGpus(2);
        List<String> err = Collections.synchronizedList(new ArrayList<>());
        long start = System.nanoTime();
        Launcher.Outcome outcome = Launcher.run(plan(command(Integer.toString(gpusPerNode()), "fail=1")),
                System.err::println, echoInto(err));
        double seconds = (System.nanoTime() - start) / 1e9;
        assertThat(outcome.ok()).as("%s", err).isFalse();
        assertThat(outcome.failure()).as("%s", err).isEqualTo("node 0 (process 0 of 2) exited with status 1");
        assertThat(err).as("%s", err).anyMatch(l -> l.startsWith("[node 0] error: the job stopped: node 1 (rank")
                && l.contains("lost its connection to the rendezvous store"));
        assertThat(seconds).as("the job stops well before any NCCL timeout").isLessThan(90);
    }

    /**
     * Process 1 stops (SIGSTOP: alive, connected, silent) while process 0 waits for it inside NCCL, which would wait
     * forever: process 0's collective watchdog fires after the timeout, the progress in the store names process 1
     * as the one that stopped reporting, the communicators are aborted and process 0 fails; the launcher then kills
     * the stopped process.
     */
    @Test
    void aStoppedProcessIsNamedWhenTheOthersCollectiveTimesOut() {
        GpuTests.requireGpus(2);
        List<String> err = runFailing("stop=1", 60);
        assertThat(err).as("%s", err).anyMatch(l -> l.startsWith("[node 0] error: the job stopped: node 1 (rank")
                && l.contains(" and stopped reporting (last at step 0, collective ")
                && l.contains("; node 0 (rank") && l.contains(" waits for it in all-reduce of 1048576 f32 on group 'world'")
                && l.endsWith("(" + JobStart.COLLECTIVE_TIMEOUT_ENV + "=10)"));
    }

    /**
     * The self-check with process 1 failing as {@code failure} says ({@link NcclJobSelfCheck}), collectives timing
     * out after 10 s: process 0 fails, within {@code boundSeconds}; returns the job's standard error.
     */
    private static List<String> runFailing(String failure, int boundSeconds) {
        List<String> err = Collections.synchronizedList(new ArrayList<>());
        long start = System.nanoTime();
        Launcher.Outcome outcome = Launcher.run(plan(withCollectiveTimeout(10,
                command(Integer.toString(gpusPerNode()), failure))), System.err::println, echoInto(err));
        double seconds = (System.nanoTime() - start) / 1e9;
        assertThat(outcome.ok()).as("%s", err).isFalse();
        assertThat(outcome.failure()).as("%s", err).isEqualTo("node 0 (process 0 of 2) exited with status 1");
        assertThat(seconds).as("the job stops soon after the timeout").isLessThan(boundSeconds);
        return err;
    }

    /**
     * Process 1's ranks hang on the host (as in a deadlock) while its process lives on and reports its progress:
     * process 0's watchdog names it as the one that has not called the collective the others wait in.
     */
    @Test
    void aProcessThatStopsCallingCollectivesIsNamed() {
        GpuTests.requireGpus(2);
        List<String> err = runFailing("hang=1", 90); // process 0's store waits (15 s at most) for process 1 to leave
        assertThat(err).as("%s", err).anyMatch(l -> l.startsWith("[node 0] error: the job stopped: node 1 (rank")
                && l.contains("; it has not called collective ")
                && l.contains(" waits for it in all-reduce of 1048576 f32 on group 'world'"));
    }

    /**
     * {@code fsdp4j train} of the tiny model on 2 emulated nodes (1 GPU each), {@code --max-restarts 1}: process 1
     * is stopped (SIGSTOP) once the checkpoint of step 5 exists (of 100 steps: the run still goes on then). Process
     * 0 fails naming it, the launcher ends the attempt, and the restart resumes from the last checkpoint (whole)
     * and finishes the run.
     */
    @Test
    @Timeout(300)
    void aStoppedTrainingProcessEndsTheAttemptAndARestartFinishesFromTheLastCheckpoint(@TempDir Path dir)
            throws Exception {
        GpuTests.requireGpus(2);
        int steps = 100;
        Path data = dir.resolve("data.jsonl"), run = dir.resolve("run"), pids = Files.createDirectories(dir.resolve("pids"));
        var random = new java.util.SplittableRandom(7);
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            lines.add("{\"input_ids\": " + java.util.Arrays.toString(random.ints(32, 0, 256).toArray()) + "}");
        }
        Files.write(data, lines);
        List<String> command = new ArrayList<>(Launcher.javaCommand(PidFileMain.class.getName()));
        int cp = command.indexOf("-cp");
        command.set(cp + 1, codeSource(PidFileMain.class) + File.pathSeparator + codeSource(Launcher.class)
                + File.pathSeparator + command.get(cp + 1));
        command.addAll(List.of(pids.toString(), "train"));
        for (String set : List.of("model.preset=tiny", "dist.device=cuda", "dist.ranks=1", "data.train=" + data,
                "data.seq_len=32", "train.steps=" + steps, "log.metrics=" + run.resolve("metrics.jsonl"),
                "checkpoint.dir=" + run.resolve("checkpoints"), "checkpoint.every=5", "checkpoint.resume=auto")) {
            command.addAll(List.of("--set", set));
        }
        List<String> out = Collections.synchronizedList(new ArrayList<>());
        List<String> err = Collections.synchronizedList(new ArrayList<>());
        var job = CompletableFuture.supplyAsync(() -> Launcher.run(plan(withCollectiveTimeout(20, command), 1),
                echoInto(out), echoInto(err)), TestThreads.OWN_THREAD);
        ProcessHandle stopped = null;
        try {
            Path checkpoint = Checkpoints.stepDir(run.resolve("checkpoints"), 5);
            while (!Files.exists(checkpoint) && !job.isDone()) {
                Thread.sleep(5);
            }
            assertThat(job.isDone()).as("the job ended before step 5: %s %s", out, err).isFalse();
            long pid = Long.parseLong(Files.readString(pids.resolve("process-1-attempt-0")));
            stopped = ProcessHandle.of(pid).orElseThrow();
            assertThat(new ProcessBuilder("kill", "-STOP", Long.toString(pid)).start().waitFor()).isZero();
            Launcher.Outcome outcome = job.get(170, TimeUnit.SECONDS);
            assertThat(outcome.ok()).as("%s %s", outcome, err).isTrue();
            assertThat(err).as("%s", err).anyMatch(l -> l.startsWith("[node 0] error: the job stopped: node 1 (rank")
                    && l.contains(" and stopped reporting (last at step "));
            assertThat(err).anyMatch(l -> l.equals("fsdp4j launch: node 0 (process 0 of 2) exited with status 5;"
                    + " restarting the job (restart 1 of 1)"));
            assertThat(out).anyMatch(l -> l.startsWith("[node 0] fsdp4j: resuming from "));
            long logged = Files.readAllLines(run.resolve("metrics.jsonl")).stream().filter(l -> l.contains("\"loss\""))
                    .count();
            assertThat(logged).as("every step once").isEqualTo(steps);
        } finally {
            if (stopped != null && stopped.isAlive()) { // leave nothing running
                new ProcessBuilder("kill", "-CONT", Long.toString(stopped.pid())).start().waitFor();
                stopped.destroyForcibly();
            }
        }
    }
}
