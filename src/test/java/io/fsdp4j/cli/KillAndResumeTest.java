package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.Checkpoints;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * As a user would: {@code fsdp4j train} in a process of its own, killed (SIGKILL) once it has written a
 * checkpoint, then the same command with {@code checkpoint.resume=auto}. Its metrics file then holds the whole
 * run, and every step's loss, gradient norm and learning rate equal those of a run that was never interrupted,
 * exactly (CPU ranks are deterministic).
 */
class KillAndResumeTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int STEPS = 24;
    private static final int EVERY = 3;

    @TempDir
    Path tmp;

    private List<String> command(Path data, Path run) {
        return List.of("train", "--set", "model.path=" + Golden.dir("qwen2"), "--set", "data.train=" + data,
                "--set", "data.seq_len=16", "--set", "train.batch_size=3", "--set", "dist.ranks=2",
                "--set", "dist.device=cpu", "--set", "train.steps=" + STEPS, "--set", "optim.lr=0.003",
                "--set", "checkpoint.dir=" + run.resolve("checkpoints"), "--set", "checkpoint.every=" + EVERY,
                "--set", "checkpoint.keep=3", "--set", "checkpoint.resume=auto",
                "--set", "log.metrics=" + run.resolve("metrics.jsonl"));
    }

    @Test
    void aRunKilledAfterACheckpointResumesOnTheUninterruptedTrajectory() throws Exception {
        Path data = Golden.jsonl("qwen2", "train.json", true, tmp);
        Path killedRun = tmp.resolve("killed"), straightRun = tmp.resolve("straight");

        Process process = start(command(data, killedRun), tmp.resolve("killed.log"));
        Path checkpoints = killedRun.resolve("checkpoints");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (Checkpoints.latest(checkpoints) == null && process.isAlive() && System.nanoTime() < deadline) {
            Thread.sleep(2);
        }
        assertThat(process.isAlive()).as("the run is still training when its first checkpoint appears; its output: %s",
                Files.exists(tmp.resolve("killed.log")) ? Files.readString(tmp.resolve("killed.log")) : "").isTrue();
        process.destroyForcibly(); // SIGKILL: no shutdown hook, no cleanup
        assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        int savedStep = Integer.parseInt(Checkpoints.latest(checkpoints).getFileName().toString().substring(5));
        assertThat(savedStep).isLessThan(STEPS);

        Process resumed = start(command(data, killedRun), tmp.resolve("resumed.log"));
        Process straight = start(command(data, straightRun), tmp.resolve("straight.log"));
        assertThat(resumed.waitFor()).as(Files.readString(tmp.resolve("resumed.log"))).isZero();
        assertThat(Files.readString(tmp.resolve("resumed.log"))).contains("resuming from")
                .contains(String.format("step-%08d", savedStep));
        assertThat(straight.waitFor()).as(Files.readString(tmp.resolve("straight.log"))).isZero();

        List<JsonNode> expected = steps(straightRun.resolve("metrics.jsonl"));
        List<JsonNode> actual = steps(killedRun.resolve("metrics.jsonl"));
        assertThat(expected).hasSize(STEPS);
        assertThat(actual).as("the resumed metrics file holds every step once").hasSize(STEPS);
        for (int s = 0; s < STEPS; s++) {
            assertThat(actual.get(s).get("step").intValue()).isEqualTo(s + 1);
            for (String key : List.of("loss", "grad_norm", "lr", "loss_tokens")) {
                assertThat(actual.get(s).get(key)).as("%s at step %d", key, s + 1).isEqualTo(expected.get(s).get(key));
            }
        }
        assertThat(Checkpoints.latest(checkpoints).getFileName().toString()).isEqualTo(String.format("step-%08d", STEPS));
    }

    /**
     * {@code fsdp4j train ARGS} in a process of its own, with the JVM options bin/fsdp4j gives a run without CPU
     * offload (so without jdk.incubator.vector, which this test JVM has: its sums round differently).
     */
    private static Process start(List<String> args, Path log) throws IOException {
        List<String> java = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:+UseParallelGC", "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                Main.class.getName()));
        java.addAll(args);
        return new ProcessBuilder(java).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    }

    private static List<JsonNode> steps(Path metrics) throws IOException {
        List<JsonNode> steps = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) {
            JsonNode node = JSON.readTree(line);
            if (node.has("loss")) {
                steps.add(node);
            }
        }
        return steps;
    }
}
