package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.ExitStatus;
import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.DirectoryLock;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Faults a run meets, each as a user would meet it through {@code fsdp4j train} (in this JVM, or in a process of
 * its own where the fault is a process's): nothing is lost without a word, and the exit status says what happened.
 */
class FaultsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    private List<String> train(Path data, String... more) {
        List<String> args = new ArrayList<>(List.of("train", "--set", "model.path=" + Golden.dir("qwen2"),
                "--set", "data.train=" + data, "--set", "data.seq_len=16", "--set", "train.batch_size=3",
                "--set", "dist.ranks=2", "--set", "dist.device=cpu", "--set", "optim.lr=0.003"));
        for (String m : more) {
            args.add("--set");
            args.add(m);
        }
        return args;
    }

    private CommandsEndToEndTest.Run run(List<String> args) {
        return CommandsEndToEndTest.run(args.toArray(String[]::new));
    }

    private Path data() {
        return Golden.jsonl("qwen2", "train.json", true, tmp);
    }

    /**
     * A run that diverges mid-way (its learning rate made infinite from step 4 on: the update of step 4 makes the
     * weights infinite, and every later loss is NaN): steps 5 to 7 are skipped on every rank and counted in the
     * metrics, the run ends with status 3 naming step 7, the checkpoints of steps 4 to 7 record that they are not
     * finite, and step 3's, the newest finite one, survives pruning (checkpoint.keep=2). resume=auto then goes back
     * to it and says why.
     */
    @Test
    void aDivergedRunStopsWithStatus3AndItsLastFiniteCheckpointSurvives() throws IOException {
        Path data = data(), ck = tmp.resolve("ck"), metrics = tmp.resolve("metrics.jsonl");
        String[] common = {"checkpoint.dir=" + ck, "checkpoint.every=1", "checkpoint.keep=2", "checkpoint.resume=auto",
                "log.metrics=" + metrics};
        var good = run(train(data, concat(common, "train.steps=3")));
        assertThat(good.status()).as(good.err()).isZero();

        var diverged = run(train(data, concat(common, "train.steps=20", "optim.lr=1e39")));
        assertThat(diverged.status()).as(diverged.out() + diverged.err()).isEqualTo(ExitStatus.DIVERGED);
        assertThat(diverged.err().lines().toList()).singleElement().asString()
                .startsWith("error: training diverged: ").contains("at step 7, the 3rd step in a row")
                .contains("no update was made after step 4")
                .contains("the newest finite checkpoint is " + Checkpoints.stepDir(ck, 3));
        assertThat(diverged.out()).contains("fsdp4j: step 5 skipped: loss NaN")
                .contains("3 in a row of train.max_bad_steps=3");
        // saved at steps 4 to 6 (step 7 ended the run), the newest two kept, and step 3's: the newest finite one
        assertThat(Checkpoints.list(ck)).containsExactly(Checkpoints.stepDir(ck, 3), Checkpoints.stepDir(ck, 5),
                Checkpoints.stepDir(ck, 6));
        assertThat(Checkpoints.isFinite(Checkpoints.stepDir(ck, 3))).isTrue();
        assertThat(Checkpoints.isFinite(Checkpoints.stepDir(ck, 6))).isFalse();
        List<JsonNode> lines = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) {
            lines.add(JSON.readTree(line));
        }
        assertThat(lines).extracting(l -> l.get("step").intValue()).containsExactly(1, 2, 3, 4, 5, 6, 7);
        assertThat(lines).extracting(l -> l.get("skipped").booleanValue())
                .containsExactly(false, false, false, false, true, true, true);
        assertThat(lines.getLast().get("skipped_steps").intValue()).isEqualTo(3);

        var resumed = run(train(data, concat(common, "train.steps=5")));
        assertThat(resumed.status()).as(resumed.out() + resumed.err()).isZero();
        assertThat(resumed.out()).contains("checkpoint.resume=auto: step-00000006 holds values that are not finite")
                .contains("taking step-00000003, the newest finite checkpoint")
                .contains("resuming from " + Checkpoints.stepDir(ck, 3) + " (step 3)")
                .contains("removed step-00000005, step-00000006 (not finite), which this run replaces");
        assertThat(Checkpoints.list(ck)).containsExactly(Checkpoints.stepDir(ck, 4), Checkpoints.stepDir(ck, 5));
        assertThat(Checkpoints.isFinite(Checkpoints.stepDir(ck, 5))).isTrue();
    }

    /** Without the check, a NaN loss trained on: the same run with max_bad_steps above its length is not stopped. */
    @Test
    void aSkippedStepLeavesTheWeightsAsTheyWere() throws IOException {
        Path data = data(), ck = tmp.resolve("ck");
        var run = run(train(data, "checkpoint.dir=" + ck, "checkpoint.every=1", "checkpoint.keep=10",
                "train.steps=3", "train.max_bad_steps=5", "optim.lr=1e39"));
        assertThat(run.status()).as(run.out() + run.err()).isZero();
        // step 1's update made the weights infinite; steps 2 and 3 were skipped: their tensors equal step 1's
        assertThat(tensorBytes(Checkpoints.stepDir(ck, 3))).isEqualTo(tensorBytes(Checkpoints.stepDir(ck, 1)));
        assertThat(Checkpoints.isFinite(Checkpoints.stepDir(ck, 1))).isFalse();
    }

    /**
     * Two runs on one checkpoint.dir: while one holds it (a process of its own), the second is refused with a line
     * naming the first's host and pid, before it trains; once the first is killed (SIGKILL: no cleanup), the next run
     * takes the lock over and says whose it was.
     */
    @Test
    void aSecondRunOnTheSameCheckpointDirectoryIsRefused() throws Exception {
        Path data = data(), ck = tmp.resolve("ck");
        Process first = start(train(data, "checkpoint.dir=" + ck, "train.steps=100000"), tmp.resolve("first.log"));
        try {
            Path lock = ck.resolve(DirectoryLock.FILE);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!(Files.exists(lock) && Files.readString(lock).contains("pid " + first.pid()))
                    && first.isAlive() && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertThat(first.isAlive()).as(Files.readString(tmp.resolve("first.log"))).isTrue();

            var second = run(train(data, "checkpoint.dir=" + ck, "train.steps=2"));
            second.failsWith("checkpoint.dir " + ck + " is in use by another run (host ", ", pid " + first.pid()
                    + ", started ", "wait for it to end, or give this run another checkpoint.dir");
            assertThat(second.out()).doesNotContain("step 1");
        } finally {
            first.destroyForcibly();
            first.waitFor(30, TimeUnit.SECONDS);
        }
        var third = run(train(data, "checkpoint.dir=" + ck, "train.steps=2"));
        assertThat(third.status()).as(third.err()).isZero();
        assertThat(third.out()).contains("fsdp4j: checkpoint.dir " + ck + " was locked by a run that ended without "
                + "releasing it (host ").contains("pid " + first.pid() + ", started").contains("taking it over");
        assertThat(Files.readString(ck.resolve(DirectoryLock.FILE))).isEmpty(); // released at the end
    }

    /**
     * Every path a run writes is made and test-written before its first step: a checkpoint.dir under a regular file
     * and a metrics file on a full disk ({@code /dev/full} refuses every write) fail at once, naming the path.
     */
    @Test
    void outputPathsThatCannotBeWrittenFailBeforeTheFirstStep() throws IOException {
        Path data = data();
        Path file = Files.writeString(tmp.resolve("a-file"), "x");
        var underFile = run(train(data, "checkpoint.dir=" + file.resolve("ck"), "checkpoint.every=1", "train.steps=2"));
        underFile.failsWith("cannot create checkpoint.dir " + file.resolve("ck"), file + " is a file, not a "
                + "directory");
        assertThat(underFile.out()).doesNotContain("step 1");

        Path full = Path.of("/dev/full"); // Linux: every write fails with ENOSPC, as on a full disk
        var fullDisk = run(train(data, "log.metrics=" + full, "train.steps=2"));
        fullDisk.failsWith("cannot write log.metrics /dev/full: No space left on device");
        assertThat(fullDisk.out()).doesNotContain("step 1");
    }

    /**
     * SIGTERM (what Slurm and Kubernetes send before SIGKILL) in the middle of a run: every rank finishes its step,
     * a checkpoint of that step is saved (checkpoint.every=0: no other), the run says where to resume from and exits
     * with status 6; resuming from it continues on the trajectory of a run never stopped, exactly.
     */
    @Test
    void sigtermSavesACheckpointAfterTheStepAndTheResumeIsExact() throws Exception {
        int steps = 12;
        Path data = data(), stoppedRun = tmp.resolve("stopped"), straightRun = tmp.resolve("straight");
        java.util.function.Function<Path, List<String>> command = run -> train(data, "train.steps=" + steps,
                "checkpoint.dir=" + run.resolve("ck"), "checkpoint.resume=auto", "log.metrics=" + run.resolve("m.jsonl"));
        Process process = start(command.apply(stoppedRun), tmp.resolve("stopped.log"));
        Path metrics = stoppedRun.resolve("m.jsonl");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while ((!Files.exists(metrics) || Files.readAllLines(metrics).size() < 2) && process.isAlive()
                && System.nanoTime() < deadline) {
            Thread.sleep(2);
        }
        process.destroy(); // SIGTERM
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        String log = Files.readString(tmp.resolve("stopped.log"));
        assertThat(process.exitValue()).as(log).isEqualTo(ExitStatus.STOPPED);
        Path saved = Checkpoints.latest(stoppedRun.resolve("ck"));
        assertThat(saved).as(log).isNotNull();
        int step = Integer.parseInt(saved.getFileName().toString().substring(5));
        assertThat(step).isBetween(2, steps - 1);
        assertThat(log).contains("fsdp4j: SIGTERM: finishing the current step, then saving and stopping")
                .contains("fsdp4j: stopped by SIGTERM after step " + step + " of " + steps + "; checkpoint saved in "
                        + saved + "; to continue, run the same command with checkpoint.resume=auto");

        Process resumed = start(command.apply(stoppedRun), tmp.resolve("resumed.log"));
        Process straight = start(command.apply(straightRun), tmp.resolve("straight.log"));
        assertThat(resumed.waitFor()).as(Files.readString(tmp.resolve("resumed.log"))).isZero();
        assertThat(straight.waitFor()).as(Files.readString(tmp.resolve("straight.log"))).isZero();
        List<JsonNode> expected = stepLines(straightRun.resolve("m.jsonl"));
        List<JsonNode> actual = stepLines(metrics);
        assertThat(expected).hasSize(steps);
        assertThat(actual).hasSize(steps);
        for (int s = 0; s < steps; s++) {
            for (String key : List.of("step", "loss", "grad_norm", "lr")) {
                assertThat(actual.get(s).get(key)).as("%s at step %d", key, s + 1).isEqualTo(expected.get(s).get(key));
            }
        }
    }

    /**
     * A second signal while the first is honoured ends the run at once (status 128 + its number), without waiting
     * for the step or a checkpoint; it says so.
     */
    @Test
    void aSecondSignalEndsTheRunAtOnce() throws Exception {
        // a job started in the background (nohup, `cmd &` in a script) has SIGINT ignored, and the JVMs it starts
        // inherit that: their SIGINT never reaches fsdp4j (as Ctrl-C should not reach a background job)
        org.junit.jupiter.api.Assumptions.assumeFalse(sigintIgnoredHere(),
                "SIGINT is ignored in this environment (a background job): this case needs SIGINT delivered");
        Path data = data(), metrics = tmp.resolve("m.jsonl"), ck = tmp.resolve("ck");
        // two signals this close are taken for one delivered twice, unless told otherwise
        Process process = start(train(data, "train.steps=100000", "checkpoint.dir=" + ck, "log.metrics=" + metrics),
                tmp.resolve("run.log"), "-Dfsdp4j.stop.sameRequestMillis=0");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while ((!Files.exists(metrics) || Files.readAllLines(metrics).isEmpty()) && process.isAlive()
                && System.nanoTime() < deadline) {
            Thread.sleep(2);
        }
        // SIGTERM then SIGINT, back to back: two signals of one kind so close could merge into one
        new ProcessBuilder("sh", "-c", "kill -TERM " + process.pid() + "; kill -INT " + process.pid()).start().waitFor();
        assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        String log = Files.readString(tmp.resolve("run.log"));
        // the JVM may hand the two to its handler in either order: the second ends the run with 128 + its number
        assertThat(process.exitValue()).as(log).isIn(128 + 2, 128 + 15);
        String second = process.exitValue() == 128 + 2 ? "SIGINT" : "SIGTERM";
        String first = second.equals("SIGINT") ? "SIGTERM" : "SIGINT";
        assertThat(log).contains("fsdp4j: " + first + ": finishing the current step, then saving and stopping")
                .contains("fsdp4j: " + second + " while stopping for " + first + ": stopping now, without a checkpoint")
                .doesNotContain("stopped by");
    }

    /** Whether this process ignores SIGINT (Linux: bit 2 of SigIgn in /proc/self/status); its children inherit it. */
    private static boolean sigintIgnoredHere() throws IOException {
        Path status = Path.of("/proc/self/status");
        if (!Files.isReadable(status)) {
            return false;
        }
        for (String line : Files.readAllLines(status)) {
            if (line.startsWith("SigIgn:")) {
                return (Long.parseUnsignedLong(line.substring(7).strip(), 16) & (1L << (2 - 1))) != 0;
            }
        }
        return false;
    }

    /**
     * SIGTERM to {@code launch} (what Kubernetes sends to a pod's first process): passed on to its processes, which
     * finish their step, save a checkpoint and stop; the launcher waits for them and ends with their status, 6.
     */
    @Test
    void sigtermToTheLauncherStopsItsProcessesAfterSavingWithStatus6() throws Exception {
        Path data = data(), metrics = tmp.resolve("m.jsonl"), ck = tmp.resolve("ck");
        List<String> command = new ArrayList<>(List.of("launch", "--nproc-per-node", "2", "--"));
        command.addAll(train(data, "train.steps=100000", "checkpoint.dir=" + ck, "log.metrics=" + metrics));
        Process launcher = start(command, tmp.resolve("launch.log"));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while ((!Files.exists(metrics) || Files.readAllLines(metrics).size() < 2) && launcher.isAlive()
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        List<ProcessHandle> workers = launcher.descendants().toList();
        launcher.destroy(); // SIGTERM
        assertThat(launcher.waitFor(60, TimeUnit.SECONDS)).isTrue();
        String log = Files.readString(tmp.resolve("launch.log"));
        workers.forEach(ProcessHandle::destroyForcibly);
        assertThat(launcher.exitValue()).as(log).isEqualTo(ExitStatus.STOPPED);
        Path saved = Checkpoints.latest(ck);
        assertThat(saved).as(log).isNotNull();
        assertThat(log).contains("fsdp4j launch: SIGTERM: passing it on to the process(es)")
                .contains("[node 0 process 0] fsdp4j: stopped by SIGTERM after step ")
                .contains("checkpoint saved in " + saved)
                .contains("fsdp4j launch: node 0 process 0, node 0 process 1 stopped on a signal after saving");
    }

    /**
     * {@code launch} killed with SIGKILL (no hook of it runs): its processes, training, see it gone and end within
     * seconds instead of training on unsupervised to the end.
     */
    @Test
    void theProcessesOfAKilledLauncherEnd() throws Exception {
        Path data = data(), metrics = tmp.resolve("m.jsonl");
        List<String> command = new ArrayList<>(List.of("launch", "--nproc-per-node", "2", "--"));
        command.addAll(train(data, "train.steps=100000", "log.metrics=" + metrics, "log.every=1"));
        Process launcher = start(command, tmp.resolve("launch.log"));
        List<ProcessHandle> workers = List.of();
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while ((!Files.exists(metrics) || Files.readAllLines(metrics).size() < 2) && launcher.isAlive()
                    && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            workers = launcher.descendants().toList();
            assertThat(workers).as(Files.readString(tmp.resolve("launch.log"))).hasSize(2);
            launcher.destroyForcibly();
            assertThat(launcher.waitFor(10, TimeUnit.SECONDS)).isTrue();
            long killed = System.nanoTime();
            for (ProcessHandle worker : workers) {
                worker.onExit().get(Math.max(1, TimeUnit.SECONDS.toNanos(10) - (System.nanoTime() - killed)),
                        TimeUnit.NANOSECONDS);
            }
            assertThat(workers).noneMatch(ProcessHandle::isAlive);
        } finally {
            workers.forEach(ProcessHandle::destroyForcibly);
        }
    }

    /**
     * {@code launch} ends with its process's status: a run that diverged is 3 (it was 2, the status of bad input, for
     * every failure), with the process's own line and the launcher's.
     */
    @Test
    void launchEndsWithTheStatusOfItsFailedProcess() {
        List<String> command = new ArrayList<>(List.of("launch", "--"));
        command.addAll(train(data(), "train.steps=10", "optim.lr=1e39"));
        var launched = run(command);
        assertThat(launched.status()).as(launched.out() + launched.err()).isEqualTo(ExitStatus.DIVERGED);
        assertThat(launched.err()).contains("error: training diverged: ")
                .contains("error: launch: node 0 (process 0 of 1) exited with status 3");
    }

    /**
     * Resuming with settings other than the checkpoint's states each; those that would make the run other than a
     * continuation (data.seq_len, the data's content under the same path, the seed, ...) are refused unless
     * checkpoint.allow_changes is set.
     */
    @Test
    void resumingWithOtherSettingsStatesThemAndRefusesThoseThatMakeItInexact() throws IOException {
        Path data = data(), ck = tmp.resolve("ck");
        var first = run(train(data, "checkpoint.dir=" + ck, "checkpoint.every=1", "train.steps=2"));
        assertThat(first.status()).as(first.err()).isZero();
        String[] resume = {"checkpoint.dir=" + ck, "checkpoint.resume=auto", "train.steps=3"};

        run(train(data, concat(resume, "data.seq_len=8", "train.seed=7"))).failsWith("resuming step-00000002 with "
                + "data.seq_len 8 (was 16), train.seed 7 (was 1234) would not continue it exactly",
                "set checkpoint.allow_changes=true");
        String original = Files.readString(data);
        List<String> lines = new ArrayList<>(Files.readAllLines(data));
        java.util.Collections.swap(lines, 0, 1);
        Files.write(data, lines);
        run(train(data, resume)).failsWith("resuming step-00000002 with the content of data.train ",
                "would not continue it exactly");
        Files.writeString(data, original);
        assertThat(Checkpoints.latest(ck)).isEqualTo(Checkpoints.stepDir(ck, 2));

        var changed = run(train(data, concat(resume, "optim.lr=0.01")));
        assertThat(changed.status()).as(changed.err()).isZero();
        assertThat(changed.out()).contains("fsdp4j: resuming with settings other than the checkpoint's: "
                + "train.steps 3 (was 2), optim.lr 0.01 (was 0.003)\n");
        var allowed = run(train(data, concat(resume, "train.steps=4", "train.seed=7", "checkpoint.allow_changes=true")));
        assertThat(allowed.status()).as(allowed.err()).isZero();
        assertThat(allowed.out()).contains("fsdp4j: resuming with settings other than the checkpoint's: "
                + "train.steps 4 (was 3), train.seed 7 (was 1234)").contains("does not continue it exactly");
    }

    /** What saves interrupted by a crash leave in checkpoint.dir is removed at the next start, and named. */
    @Test
    void temporariesOfInterruptedSavesAreRemovedAtTheNextStart() throws IOException {
        Path data = data(), ck = tmp.resolve("ck");
        Files.writeString(Files.createDirectories(ck.resolve(".tmp-step-00000009")).resolve("shard-00000.safetensors"),
                "partial");
        Files.createDirectories(ck.resolve(".old-step-00000004"));
        var run = run(train(data, "checkpoint.dir=" + ck, "train.steps=1"));
        assertThat(run.status()).as(run.err()).isZero();
        assertThat(run.out()).contains("fsdp4j: removed what interrupted saves left in " + ck
                + ": .old-step-00000004, .tmp-step-00000009");
        assertThat(ck.resolve(".tmp-step-00000009")).doesNotExist();
        assertThat(ck.resolve(".old-step-00000004")).doesNotExist();
    }

    private static List<JsonNode> stepLines(Path metrics) throws IOException {
        List<JsonNode> steps = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) {
            if (!line.isBlank() && JSON.readTree(line).has("loss")) {
                steps.add(JSON.readTree(line));
            }
        }
        return steps;
    }

    /** The tensor data of a checkpoint's first shard file (what follows its header, which names the step). */
    private static byte[] tensorBytes(Path checkpoint) throws IOException {
        byte[] file = Files.readAllBytes(checkpoint.resolve("shard-00000.safetensors"));
        long header = java.nio.ByteBuffer.wrap(file, 0, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
        return java.util.Arrays.copyOfRange(file, 8 + (int) header, file.length);
    }

    private static String[] concat(String[] a, String... b) {
        List<String> all = new ArrayList<>(List.of(a));
        all.addAll(List.of(b));
        return all.toArray(String[]::new);
    }

    /** {@code fsdp4j ARGS} in a JVM of its own, its output (both streams) into {@code log}. */
    static Process start(List<String> args, Path log, String... jvmOptions) throws IOException {
        List<String> java = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:+UseParallelGC", "--enable-native-access=ALL-UNNAMED"));
        java.addAll(List.of(jvmOptions));
        java.addAll(List.of("-cp", System.getProperty("java.class.path"), Main.class.getName()));
        java.addAll(args);
        return new ProcessBuilder(java).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    }
}
