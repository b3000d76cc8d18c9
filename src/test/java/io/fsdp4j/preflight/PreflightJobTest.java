package io.fsdp4j.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.TestThreads;
import io.fsdp4j.cli.Main;
import io.fsdp4j.job.JobToken;
import io.fsdp4j.job.Launcher;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The check: a job of 2 CPU-rank processes (real JVMs, as a scheduler or {@code fsdp4j launch} starts
 * them) as node 0 and node 1 on this host, each in its own folder with the same config naming {@code model} and
 * {@code data.jsonl} there, as on two machines. When the nodes' folders hold
 * different model files, different dataset files, or their configs differ, the job refuses to start on both nodes,
 * naming what differs; with identical ones it starts and trains.
 */
@Timeout(240)
class PreflightJobTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    /** What one node's process printed and its exit status. */
    record Node(int status, String out, String err) {}

    /** Quicker JVMs for short runs (also passed by each launch to the process it starts). */
    private static final List<String> QUICK_JVM = List.of("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC");

    /**
     * {@code fsdp4j train ARGS} as process K of a 2-process job, in node K's folder, with the variables a scheduler
     * (or {@code fsdp4j launch}) sets: {@code MASTER_ADDR}, {@code MASTER_PORT}, {@code RANK}, {@code WORLD_SIZE}.
     */
    private List<Node> job(List<List<String>> trainArgs) throws Exception {
        return start((k, port) -> {
            List<String> command = quickJava();
            command.add("train");
            command.addAll(trainArgs.get(k));
            var builder = new ProcessBuilder(command);
            builder.environment().putAll(Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT", Integer.toString(port),
                    "RANK", Integer.toString(k), "WORLD_SIZE", "2"));
            return builder;
        });
    }

    /** {@code fsdp4j launch --nnodes 2 --node-rank K --rdzv 127.0.0.1:PORT LAUNCH_OPTIONS -- train ARGS}. */
    private List<Node> launched(List<List<String>> trainArgs, List<List<String>> launchOptions) throws Exception {
        return start((k, port) -> {
            List<String> command = quickJava();
            command.addAll(List.of("launch", "--nnodes", "2", "--node-rank", Integer.toString(k), "--rdzv",
                    "127.0.0.1:" + port));
            command.addAll(launchOptions.get(k));
            command.addAll(List.of("--", "train"));
            command.addAll(trainArgs.get(k));
            return new ProcessBuilder(command);
        });
    }

    static List<String> quickJava() {
        List<String> command = new ArrayList<>(Launcher.javaCommand(Main.class.getName()));
        command.addAll(1, QUICK_JVM);
        return command;
    }

    private interface NodeProcess {
        ProcessBuilder of(int node, int port);
    }

    private List<Node> start(NodeProcess nodeProcess) throws Exception {
        int port = freePort();
        List<ProcessBuilder> builders = new ArrayList<>();
        for (int k = 0; k < 2; k++) {
            builders.add(nodeProcess.of(k, port).directory(dir.resolve("node" + k).toFile()));
        }
        return run(builders);
    }

    /**
     * Starts one process per builder, each with a job token and a rendezvous timeout of 60 s, and waits for all of
     * them (200 s at most): each one's exit status and output.
     */
    static List<Node> run(List<ProcessBuilder> builders) throws Exception {
        List<Process> processes = new ArrayList<>();
        List<CompletableFuture<String>> outs = new ArrayList<>(), errs = new ArrayList<>();
        for (ProcessBuilder builder : builders) {
            builder.environment().put(JobToken.ENV, "preflight-job-test");
            builder.environment().put("FSDP4J_RDZV_TIMEOUT", "60");
            Process p = builder.start();
            processes.add(p);
            outs.add(CompletableFuture.supplyAsync(() -> read(p.getInputStream()), TestThreads.OWN_THREAD));
            errs.add(CompletableFuture.supplyAsync(() -> read(p.getErrorStream()), TestThreads.OWN_THREAD));
        }
        List<Node> nodes = new ArrayList<>();
        for (int k = 0; k < processes.size(); k++) {
            Process p = processes.get(k);
            if (!p.waitFor(200, TimeUnit.SECONDS)) {
                processes.forEach(Process::destroyForcibly);
                throw new AssertionError("node " + k + " did not finish");
            }
            nodes.add(new Node(p.exitValue(), outs.get(k).get(), errs.get(k).get()));
        }
        return nodes;
    }

    private static String read(java.io.InputStream in) {
        try (in) {
            return new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** The same train arguments for every node: paths relative to the node's folder. */
    private static List<String> args(String... more) {
        List<String> a = new ArrayList<>();
        for (String s : List.of("model.path=model", "data.train=data.jsonl", "data.seq_len=16", "dist.device=cpu",
                "dist.ranks=1", "train.steps=1", "train.batch_size=1", "log.every=1")) {
            a.addAll(List.of("--set", s));
        }
        for (String s : more) {
            a.addAll(s.startsWith("--") ? List.of(s) : List.of("--set", s));
        }
        return a;
    }

    /** Both nodes' folders: the golden llama model and 8 random sequences; node 1's changed by the flags. */
    private void folders(boolean otherWeights, boolean otherData) throws IOException {
        for (int k = 0; k < 2; k++) {
            Path node = dir.resolve("node" + k);
            if (Files.exists(node)) {
                try (var walk = Files.walk(node)) {
                    walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                }
            }
            Path model = FingerprintsTest.copyModel("llama", node.resolve("model"));
            if (k == 1 && otherWeights) {
                Path weights = model.resolve("model.safetensors");
                FingerprintsTest.poke(weights, Files.size(weights) - 4, (byte) 0x3f); // one weight changed
            }
            var random = new SplittableRandom(k == 1 && otherData ? 2 : 1);
            List<String> lines = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                lines.add(JSON.writeValueAsString(Map.of("input_ids", random.ints(16, 0, 160).toArray())));
            }
            Files.write(node.resolve("data.jsonl"), lines);
        }
    }

    private static void assertRefusedOnBoth(List<Node> nodes, String expected) {
        for (int k = 0; k < 2; k++) {
            Node node = nodes.get(k);
            assertThat(node.status()).as("node %d refused to start: %s", k, node.err()).isNotZero();
            assertThat(node.err()).as("node %d", k).contains(expected);
            assertThat(node.out()).as("node %d trained no step", k).doesNotContain("\"step\"");
        }
    }

    @Test
    void differentModelsDataOrConfigsRefuseToStartOnBothNodesAndIdenticalOnesTrain() throws Exception {
        folders(true, false);
        List<Node> models = job(List.of(args(), args()));
        assertRefusedOnBoth(models, "error: preflight: model weights (model.safetensors) differ on node 1 (fingerprint ");
        assertThat(models.getFirst().err()).contains("on node 0): check model.path on that node");

        folders(false, true);
        assertRefusedOnBoth(job(List.of(args(), args())), "error: preflight: training data differs on node 1 (");

        folders(false, false);
        assertRefusedOnBoth(job(List.of(args(), args("optim.lr=3e-4"))), "optim.lr");

        List<Node> same = job(List.of(args(), args()));
        for (int k = 0; k < 2; k++) {
            assertThat(same.get(k).status()).as("node %d: %s", k, same.get(k).err()).isZero();
            assertThat(same.get(k).out()).contains("preflight passed: 2 processes agree");
        }
        assertThat(same.getFirst().out()).contains("{\"summary\"");

        // the same model under another path on node 1 is the same job: paths may differ by node, contents may not
        Files.move(dir.resolve("node1").resolve("model"), dir.resolve("node1").resolve("weights"));
        List<Node> moved = job(List.of(args(), args("model.path=weights")));
        for (int k = 0; k < 2; k++) {
            assertThat(moved.get(k).status()).as("node %d: %s", k, moved.get(k).err()).isZero();
        }
    }

    @Test
    void skippingIsLoggedOnEveryNode() throws Exception {
        folders(false, true); // different data: a preflight would refuse
        List<Node> skipped = launched(List.of(args(), args(Preflight.SKIP_OPTION)),
                List.of(List.of(Preflight.SKIP_OPTION), List.of())); // through launch on node 0, train on node 1
        for (int k = 0; k < 2; k++) {
            assertThat(skipped.get(k).status()).as("node %d: %s", k, skipped.get(k).err()).isZero();
            assertThat(skipped.get(k).out()).contains("preflight skipped");
        }
    }

    static int freePort() throws IOException {
        try (var socket = new ServerSocket()) {
            socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            return socket.getLocalPort();
        }
    }
}
