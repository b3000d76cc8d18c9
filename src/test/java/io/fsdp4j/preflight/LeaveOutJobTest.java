package io.fsdp4j.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.doctor.GpuHealth;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobToken;
import io.fsdp4j.job.Launcher;
import io.fsdp4j.job.NodeLeftOutException;
import io.fsdp4j.train.Training;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The health gating on CPU ranks: a job of 3 nodes (real JVMs on this host, 1 CPU rank each) in which node 0
 * (the one serving the rendezvous store) reports a failed health test through {@value GpuHealth#FAULT_ENV}. Without
 * {@code dist.exclude_unhealthy}, or where the layout forbids a job without it, every node stops naming node 0; with
 * it, nodes 1 and 2 form a job of 2 nodes and train it to the end with the losses of 2 ranks, while node 0's process
 * ends with its own status and message.
 */
@Timeout(180)
public class LeaveOutJobTest {
    private static final String FAULT = "GPU 0 computed a wrong bf16 product (drill)";

    @TempDir
    Path dir;

    /**
     * The train settings of every node: a tiny model, 1 CPU rank a node, 3 steps, data written into {@code dir}
     * (once), metrics in {@code run}. ({@link io.fsdp4j.gpu.GpuLeaveOutTest} runs them on GPUs.)
     */
    public static List<String> settings(Path dir, Path run) throws IOException {
        Path data = dir.resolve("data.jsonl");
        if (!Files.exists(data)) {
            var random = new SplittableRandom(3);
            List<String> lines = new ArrayList<>();
            for (int i = 0; i < 24; i++) {
                lines.add(new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(
                        Map.of("input_ids", random.ints(16, 0, 256).toArray())));
            }
            Files.write(data, lines);
        }
        return List.of("model.preset=tiny", "dist.device=cpu", "dist.ranks=1", "data.train=" + data,
                "data.seq_len=16", "train.steps=3", "train.batch_size=2", "fsdp.strategy=full_shard",
                "log.metrics=" + run.resolve("metrics.jsonl"));
    }

    private static List<String> sets(List<String> settings) {
        List<String> args = new ArrayList<>();
        settings.forEach(s -> args.addAll(List.of("--set", s)));
        return args;
    }

    /** 3 nodes as a scheduler starts them (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); node 0 faulty. */
    private List<PreflightJobTest.Node> threeNodes(List<String> trainArgs) throws Exception {
        int port = PreflightJobTest.freePort();
        List<ProcessBuilder> builders = new ArrayList<>();
        for (int k = 0; k < 3; k++) {
            List<String> command = PreflightJobTest.quickJava();
            command.add("train");
            command.addAll(trainArgs);
            var builder = new ProcessBuilder(command);
            builder.environment().putAll(Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT", Integer.toString(port),
                    "RANK", Integer.toString(k), "WORLD_SIZE", "3"));
            if (k == 0) {
                builder.environment().put(GpuHealth.FAULT_ENV, FAULT);
            }
            builders.add(builder);
        }
        return PreflightJobTest.run(builders);
    }

    @Test
    void withoutTheOptionOrWhereTheLayoutForbidsItEveryNodeStopsNamingTheUnhealthyNode() throws Exception {
        List<PreflightJobTest.Node> nodes = threeNodes(sets(settings(dir, dir.resolve("stopped"))));
        for (int k = 0; k < 3; k++) {
            PreflightJobTest.Node node = nodes.get(k);
            assertThat(node.status()).as("node %d: %s", k, node.err()).isEqualTo(2);
            assertThat(node.err().lines()).as("node %d", k).contains("error: preflight: the GPU health test failed on node 0: "
                    + FAULT + " (injected by " + GpuHealth.FAULT_ENV + "): run fsdp4j doctor on that node "
                    + "(dist.exclude_unhealthy=true would start without node 0)");
            assertThat(node.out()).as("node %d trained no step", k).doesNotContain("step ");
        }

        // with the option, but shard groups of 3 ranks cannot be cut from the 2 ranks that would be left
        List<String> args = new ArrayList<>(List.of("--exclude-unhealthy"));
        args.addAll(sets(settings(dir, dir.resolve("unshardable"))));
        args.addAll(List.of("--set", "fsdp.strategy=hybrid_shard", "--set", "fsdp.shard_size=3"));
        List<PreflightJobTest.Node> unshardable = threeNodes(args);
        for (int k = 0; k < 3; k++) {
            PreflightJobTest.Node node = unshardable.get(k);
            assertThat(node.status()).as("node %d: %s", k, node.err()).isEqualTo(2);
            assertThat(node.err().lines()).as("node %d", k).contains("error: preflight: the GPU health test failed on "
                    + "node 0: " + FAULT + " (injected by " + GpuHealth.FAULT_ENV + "): run fsdp4j doctor on that node; "
                    + "cannot start without node 0 (dist.exclude_unhealthy): world size 2 is not divisible by "
                    + "fsdp.shard_size 3; choose a shard size that divides the number of ranks");
        }
    }

    /**
     * Through {@code fsdp4j launch}'s machinery, 3 emulated nodes, node 0 faulty (set by a shell wrapper from its
     * RANK): nodes 1 and 2 go on as nodes 0 and 1 of a 2-node job and train the 3 steps with the losses of one
     * process hosting 2 ranks; node 0's process ends with {@value NodeLeftOutException#EXIT_STATUS}, which the
     * launcher reports without stopping the others.
     */
    @Test
    void withTheOptionTheOtherNodesTrainWithoutTheUnhealthyOneAsATwoNodeJob() throws Exception {
        Path two = Files.createDirectories(dir.resolve("two"));
        var out = new ByteArrayOutputStream();
        List<String> reference = new ArrayList<>(settings(dir, two));
        reference.set(reference.indexOf("dist.ranks=1"), "dist.ranks=2");
        assertThat(Training.run(TrainConfig.load(null, reference), new PrintStream(out, true, StandardCharsets.UTF_8)))
                .isZero();

        Path three = Files.createDirectories(dir.resolve("three"));
        List<String> command = new ArrayList<>(List.of("bash", "-c", "if [ \"$RANK\" = 0 ]; then export "
                + GpuHealth.FAULT_ENV + "='" + FAULT + "'; fi; exec \"$@\"", "node"));
        command.addAll(PreflightJobTest.quickJava());
        command.addAll(List.of("train", "--exclude-unhealthy"));
        command.addAll(sets(settings(dir, three)));
        var plan = new Launcher.Plan(new JobLayout.Nodes(3, 0, null, "emulated"), 1, JobToken.generate(), 0, command,
                Duration.ofSeconds(5), true);
        List<String> lines = Collections.synchronizedList(new ArrayList<>());
        Launcher.Outcome outcome = Launcher.run(plan, lines::add, lines::add);

        assertThat(outcome.ok()).as("%s%n%s", outcome, String.join("\n", lines)).isTrue();
        String verdict = "fsdp4j: preflight: leaving node 0 out of the job (dist.exclude_unhealthy): the GPU health "
                + "test failed on node 0: " + FAULT + " (injected by " + GpuHealth.FAULT_ENV + "); the other 2 node(s) "
                + "start without it";
        for (int k = 0; k < 3; k++) {
            assertThat(lines).as("node %d logs the verdict", k).contains("[node " + k + "] " + verdict);
        }
        assertThat(lines).contains("[node 0] error: preflight: leaving node 0 out of the job (dist.exclude_unhealthy): "
                + "the GPU health test failed on node 0: " + FAULT + " (injected by " + GpuHealth.FAULT_ENV + "); this "
                + "process stops here and the other 2 node(s) train without it");
        assertThat(lines).contains("fsdp4j launch: node 0 (process 0 of 3) was left out of the job by the preflight "
                + "(its message above); the other process(es) go on");
        assertThat(lines).anyMatch(l -> l.startsWith("[node 1] fsdp4j: preflight: the job goes on as 2 node(s) of 1 "
                + "rank(s); node 1 (rank 1) is now node 0 (rank 0); rendezvous "));
        assertThat(lines).anyMatch(l -> l.startsWith("[node 2] fsdp4j: preflight: the job goes on as 2 node(s) of 1 "
                + "rank(s); node 2 (rank 2) is now node 1 (rank 1); rendezvous "));
        assertThat(lines).contains("[node 2] fsdp4j: node 1 (rank 1) finished; node 0 (rank 0) reports for the job");
        assertThat(lines).anyMatch(l -> l.startsWith("[node 1] {\"summary\"") && l.contains("\"world_size\":2"));
        assertThat(lines).noneMatch(l -> l.startsWith("[node 0] fsdp4j: tiny"));

        List<Double> expected = losses(two), got = losses(three);
        assertThat(expected).hasSize(3);
        assertThat(got).as("the 2-node job's losses, bit for bit").isEqualTo(expected);
    }

    /** The step losses in {@code run}'s metrics file. */
    public static List<Double> losses(Path run) throws IOException {
        List<Double> losses = new ArrayList<>();
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        for (String line : Files.readAllLines(run.resolve("metrics.jsonl"))) {
            var node = json.readTree(line);
            if (node.has("loss")) {
                losses.add(node.get("loss").asDouble());
            }
        }
        return losses;
    }
}
