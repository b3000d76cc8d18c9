package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * examples/multinode/ as written, on this machine with CPU ranks: the two-node recipe run twice (node 0 and node 1
 * on 127.0.0.1), and the Slurm batch script under a stand-in {@code srun} that starts its two tasks here with the
 * variables Slurm sets. fsdp4j is this build ({@code FSDP4J}: the launcher's java command for the CLI).
 */
@Timeout(120)
class MultinodeExamplesTest {
    /** The train arguments of a run in {@code run}: 2 CPU ranks a node, see {@link MultiProcessTrainingTest}. */
    private static List<String> train(Path run, int steps) throws IOException {
        List<String> args = new ArrayList<>();
        for (String set : MultiProcessTrainingTest.settings(run, "hybrid_shard", steps)) {
            args.addAll(List.of("--set", set.replace("dist.ranks=4", "dist.ranks=2"))); // ranks a node
        }
        return args;
    }

    @TempDir
    Path dir;

    private record Ended(int status, String out) {}

    /** Runs {@code command} with {@code env}, this build as fsdp4j, output to {@code log}. */
    private static Process start(Path log, Map<String, String> env, List<String> command) throws IOException {
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().putAll(env);
        List<String> fsdp4j = new ArrayList<>(Launcher.javaCommand("io.fsdp4j.cli.Main"));
        fsdp4j.addAll(1, MultiProcessTrainingTest.QUICK_JVM); // the launchers pass them on to their children
        builder.environment().put("FSDP4J", String.join(" ", fsdp4j));
        return builder.start();
    }

    private static Ended await(Process p, Path log) throws Exception {
        if (!p.waitFor(100, TimeUnit.SECONDS)) {
            p.destroyForcibly();
        }
        return new Ended(p.exitValue(), Files.readString(log, StandardCharsets.UTF_8));
    }

    private static int freePort() throws IOException {
        try (var s = new ServerSocket()) {
            s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            return s.getLocalPort();
        }
    }

    /**
     * The recipe's two nodes of 2 CPU ranks, hybrid sharding (shards inside a node, replicas across): the losses of
     * 1 process hosting the 4 ranks, within 1e-6.
     */
    @Test
    void theTwoNodeRecipeRunsOnOneMachineAndTrainsAsOneProcess() throws Exception {
        List<Double> reference = MultiProcessTrainingTest.inProcess(dir.resolve("one"), "hybrid_shard", 3);
        String port = Integer.toString(freePort()), token = JobToken.generate();
        List<Process> nodes = new ArrayList<>();
        for (int node = 0; node < 2; node++) {
            List<String> command = new ArrayList<>(List.of("bash", "examples/multinode/two-node.sh"));
            command.addAll(train(dir.resolve("two"), 3));
            nodes.add(start(dir.resolve("node" + node + ".log"), Map.of("NODE_RANK", Integer.toString(node),
                    "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", port, "FSDP4J_JOB_TOKEN", token), command));
        }
        Ended node0 = await(nodes.get(0), dir.resolve("node0.log")), node1 = await(nodes.get(1), dir.resolve("node1.log"));
        assertThat(node0.status()).as(node0.out()).isZero();
        assertThat(node1.status()).as(node1.out()).isZero();
        assertThat(node0.out()).contains("fsdp4j launch: node 0 of 2 (flags)", "[node 0] step     3/3",
                "hybrid_shard (mesh 2 x 2)", "\"world_size\":4");
        assertThat(node1.out()).contains("fsdp4j launch: node 1 of 2 (flags)",
                "[node 1] fsdp4j: node 1 (ranks 2-3) finished; node 0 (ranks 0-1) reports for the job");
        List<Double> losses = MultiProcessTrainingTest.losses(dir.resolve("two"));
        assertThat(losses).hasSize(3);
        for (int i = 0; i < 3; i++) {
            assertThat(losses.get(i)).as("step %d", i + 1).isCloseTo(reference.get(i), within(1e-6));
        }
    }

    /**
     * slurm.sbatch run by bash (as sbatch would, on the first node) with a stand-in srun on the PATH that starts
     * its command once per task, here, with the variables srun gives a task of a 2-node step.
     */
    @Test
    void theSlurmBatchScriptRunsUnderAStandInSrun() throws Exception {
        Path bin = Files.createDirectories(dir.resolve("bin"));
        Path srun = bin.resolve("srun");
        Files.writeString(srun, """
                #!/usr/bin/env bash
                # stand-in srun: drops its options, runs the command as task 0 and 1 of a 2-node step on localhost
                while [[ $1 == --* ]]; do shift; done
                pids=()
                for task in 0 1; do
                    SLURM_PROCID=$task SLURM_NTASKS=2 SLURM_NODEID=$task SLURM_LOCALID=0 SLURM_STEP_NUM_NODES=2 \
                        SLURM_STEP_NODELIST=localhost "$@" > "$SRUN_LOGS/task$task.log" 2>&1 &
                    pids+=($!)
                done
                status=0
                for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
                exit $status
                """);
        Files.setPosixFilePermissions(srun, PosixFilePermissions.fromString("rwxr-xr-x"));
        List<String> command = new ArrayList<>(List.of("bash", "examples/multinode/slurm.sbatch"));
        command.addAll(train(dir.resolve("slurm"), 2));
        Process job = start(dir.resolve("sbatch.log"), Map.of("PATH", bin + ":" + System.getenv("PATH"),
                "SRUN_LOGS", dir.toString(), "MASTER_PORT", Integer.toString(freePort())), command);
        Ended ended = await(job, dir.resolve("sbatch.log"));
        String task0 = Files.readString(dir.resolve("task0.log")), task1 = Files.readString(dir.resolve("task1.log"));
        assertThat(ended.status()).as("%s%n%s%n%s", ended.out(), task0, task1).isZero();
        assertThat(task0).contains("fsdp4j launch: node 0 of 2 (slurm), starting 1 process(es) of 2, rendezvous "
                + "localhost:", "[node 0] step     2/2", "\"world_size\":4");
        assertThat(task1).contains("[node 1] fsdp4j: node 1 (ranks 2-3) finished");
    }
}
