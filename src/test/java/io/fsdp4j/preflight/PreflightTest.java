package io.fsdp4j.preflight;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.TestThreads;
import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.doctor.GpuHealth;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.RendezvousClient;
import io.fsdp4j.job.RendezvousServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The preflight exchange through a real rendezvous store, each "node" a client on its own thread. */
@Timeout(60)
class PreflightTest {
    private static final String TOKEN = "preflight-test-token";
    private static final Duration WAIT = Duration.ofSeconds(20);

    @TempDir
    Path tmp;

    @Test
    void identicalNodesPassAndLogIt() throws Exception {
        TrainConfig config = TrainConfig.load(null, List.of("train.steps=2"));
        List<Outcome> outcomes = exchange(3, n -> () -> NodeFacts.of(config.with("dist.node_rank=0"), false), WAIT);
        for (Outcome o : outcomes) {
            assertThat(o.error()).isNull();
            assertThat(o.log()).anySatisfy(line -> assertThat(line).startsWith("fsdp4j: preflight passed: 3 processes"));
        }
    }

    @Test
    void differentWeightsStopEveryNodeNamingTheNodeAndTheFile() throws Exception {
        Path good = FingerprintsTest.copyModel("llama", tmp.resolve("a"));
        Path otherCopy = FingerprintsTest.copyModel("llama", tmp.resolve("b"));
        Path bad = FingerprintsTest.copyModel("llama", tmp.resolve("c"));
        FingerprintsTest.poke(bad.resolve("model.safetensors"), Files.size(bad.resolve("model.safetensors")) - 2, (byte) 7);
        Path[] models = {good, bad, otherCopy};
        List<Outcome> outcomes = exchange(3, n -> () -> NodeFacts.of(
                TrainConfig.load(null, List.of("model.path=" + models[n], "dist.nnodes=3", "dist.node_rank=" + n)),
                false), WAIT);
        String expected = outcomes.getFirst().error();
        assertThat(expected).matches("preflight: model weights \\(model.safetensors\\) differ on node 1 \\(fingerprint "
                + "[0-9a-f]{8}\\.\\. vs [0-9a-f]{8}\\.\\. on node 0\\): check model.path on that node");
        assertThat(outcomes).allSatisfy(o -> assertThat(o.error()).isEqualTo(expected));
    }

    @Test
    void differentDataAndConfigAreNamedWithTheirValues() throws Exception {
        Path a = Files.writeString(tmp.resolve("a.jsonl"), "{\"input_ids\":[1,2,3]}\n");
        Path b = Files.writeString(tmp.resolve("b.jsonl"), "{\"input_ids\":[1,2,4]}\n");
        List<Outcome> data = exchange(2, n -> () -> NodeFacts.of(
                TrainConfig.load(null, List.of("data.train=" + (n == 0 ? a : b))), false), WAIT);
        assertThat(data).allSatisfy(o -> assertThat(o.error()).matches(
                "preflight: training data differs on node 1 \\(22 bytes, fingerprint [0-9a-f]{8}\\.\\. vs "
                        + "[0-9a-f]{8}\\.\\. on node 0\\): check data.train on that node"));
        List<Outcome> config = exchange(2, n -> () -> NodeFacts.of(
                TrainConfig.load(null, List.of("data.train=" + a, "train.steps=" + (n == 0 ? 5 : 7), "optim.lr=" + (n == 0
                        ? "1e-4" : "2e-4"))), false), WAIT);
        assertThat(config).allSatisfy(o -> assertThat(o.error()).isEqualTo("preflight: config key train.steps differs on "
                + "node 1 (7 vs 5 on node 0): give every node the same config file and --set flags; also different: "
                + "config key optim.lr (node 1)"));
    }

    @Test
    void theMajorityIsTheReference() {
        List<String> names = List.of("node 0", "node 1", "node 2", "node 3");
        IntFunction<NodeFacts> facts = n -> new NodeFacts(List.of(
                Fact.enforced("java", "JDK", n == 0 ? "24" : "25", "run every node on the same JDK"),
                Fact.advisory("driver", "NVIDIA driver's CUDA version", n == 3 ? "12.8" : "13.0", "-")));
        var comparison = Comparison.of(names, List.of(facts.apply(0), facts.apply(1), facts.apply(2), facts.apply(3)));
        assertThat(comparison.agree()).isFalse();
        assertThat(comparison.message()).isEqualTo("JDK differs on node 0 (24 vs 25 on node 1): run every node on the "
                + "same JDK");
        assertThat(comparison.notes()).containsExactly("NVIDIA driver's CUDA version differs on node 3 (12.8 vs 13.0 on "
                + "node 0)");
        // a fact one node lacks is "absent" there; a tie between two nodes goes to node 0
        var missing = Comparison.of(names.subList(0, 2), List.of(new NodeFacts(List.of(Fact.enforced("data.eval",
                "evaluation data", "none", "check data.eval on {nodes}"))), new NodeFacts(List.of())));
        assertThat(missing.message()).isEqualTo("evaluation data differs on node 1 (absent vs none on node 0): check "
                + "data.eval on that node");
        // advisory differences alone let the job start
        var advisoryOnly = Comparison.of(names.subList(0, 2), List.of(facts.apply(1), facts.apply(3)));
        assertThat(advisoryOnly.agree()).isTrue();
        assertThat(advisoryOnly.message()).isEmpty();
    }

    @Test
    void aNodeWhoseGpusFailOrLagFarBehindIsNamedThroughTheStore() throws Exception {
        TrainConfig config = TrainConfig.load(null, List.of());
        double[] gemm = {700e12, 690e12, 200e12, 710e12};
        List<Outcome> slow = exchange(4, n -> () -> NodeFacts.of(config, false)
                .withHealth(new GpuHealth.Quick(gemm[n], 4.2e12, null)), WAIT);
        assertThat(slow).allSatisfy(o -> assertThat(o.error()).isEqualTo("preflight: the bf16 product rate of the "
                + "slowest GPU on node 2 is 200.00 TFLOP/s, 29% of the nodes' median 695.00 TFLOP/s: a degraded GPU? run "
                + "fsdp4j doctor on that node"));
        List<Outcome> failed = exchange(2, n -> () -> NodeFacts.of(config, false).withHealth(n == 1
                ? new GpuHealth.Quick(0, 0, "GPU 3 computed a wrong bf16 product (error 0.5 of the largest entry)")
                : new GpuHealth.Quick(700e12, 4.2e12, null)), WAIT);
        assertThat(failed).allSatisfy(o -> assertThat(o.error()).isEqualTo("preflight: the GPU health test failed on "
                + "node 1: GPU 3 computed a wrong bf16 product (error 0.5 of the largest entry): run fsdp4j doctor on "
                + "that node"));
        List<Outcome> healthy = exchange(2, n -> () -> NodeFacts.of(config, false)
                .withHealth(new GpuHealth.Quick(700e12 - n * 100e12, 4.2e12, null)), WAIT);
        assertThat(healthy).allSatisfy(o -> assertThat(o.error()).isNull());
    }

    @Test
    void aNodeThatCannotStateItsFactsStopsTheOthersWithItsReason() throws Exception {
        TrainConfig config = TrainConfig.load(null, List.of());
        List<Outcome> outcomes = exchange(3, n -> () -> {
            if (n == 2) {
                throw new UserError("model.path /models/x: no such directory");
            }
            return NodeFacts.of(config, false);
        }, WAIT);
        assertThat(outcomes.get(2).error()).isEqualTo("model.path /models/x: no such directory");
        assertThat(outcomes.subList(0, 2)).allSatisfy(o -> assertThat(o.error()).isEqualTo(
                "preflight: node 2 stopped before the check: model.path /models/x: no such directory"));
    }

    @Test
    void skippingIsLoggedAndToldToTheOthers() throws Exception {
        try (var server = RendezvousServer.start(0, TOKEN, 0)) {
            List<String> names = List.of("node 0", "node 1");
            List<String> log0 = new ArrayList<>(), log1 = new ArrayList<>();
            var checking = CompletableFuture.supplyAsync(() -> {
                try (var store = connect(server)) {
                    return Preflight.check(store, 0, names, () -> NodeFacts.of(TrainConfig.defaults(), false), WAIT,
                            log0::add);
                }
            }, TestThreads.OWN_THREAD);
            try (var store = connect(server)) {
                Preflight.skip(store, 1, log1::add);
            }
            assertThat(checking.get(30, TimeUnit.SECONDS)).isEmpty();
            assertThat(log1).containsExactly("fsdp4j: preflight skipped (--skip-preflight): the processes of this job "
                    + "are not compared");
            assertThat(log0).containsExactly("fsdp4j: preflight skipped: node 1 started with --skip-preflight");
        }
    }

    @Test
    void aNodeThatNeverComesIsNamedAfterTheWait() throws Exception {
        try (var server = RendezvousServer.start(0, TOKEN, 0); var store = connect(server)) {
            long start = System.nanoTime();
            assertThatThrownBy(() -> Preflight.check(store, 0, List.of("node 0", "node 1"),
                    () -> NodeFacts.of(TrainConfig.defaults(), false), Duration.ofMillis(300), line -> {}))
                    .isInstanceOf(UserError.class)
                    .hasMessage("preflight: node 1 did not publish its facts within 0 s (is it running this fsdp4j build?)");
            assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(10));
        }
    }

    @Test
    void launchPassesSkipPreflightOnlyToTrain() {
        var err = new java.io.ByteArrayOutputStream();
        int status = io.fsdp4j.cli.Main.execute(new String[] {"launch", Preflight.SKIP_OPTION, "--", "score"},
                new java.io.PrintStream(new java.io.ByteArrayOutputStream()), new java.io.PrintStream(err), false);
        assertThat(status).isEqualTo(2);
        assertThat(err.toString()).isEqualTo("error: launch: --skip-preflight applies to train, not to score\n");
    }

    @Test
    void excludeUnhealthyIsTheConfigKeyOnTrainAndOnlyForTrainOnLaunch() {
        var out = new java.io.ByteArrayOutputStream();
        int status = io.fsdp4j.cli.Main.execute(new String[] {"train", "--exclude-unhealthy", "--print-config"},
                new java.io.PrintStream(out), new java.io.PrintStream(new java.io.ByteArrayOutputStream()), false);
        assertThat(status).isZero();
        assertThat(out.toString()).contains("\"exclude_unhealthy\":true");
        assertThat(TrainConfig.defaults().dist().excludeUnhealthy()).isFalse();
        var err = new java.io.ByteArrayOutputStream();
        status = io.fsdp4j.cli.Main.execute(new String[] {"launch", "--exclude-unhealthy", "--", "score"},
                new java.io.PrintStream(new java.io.ByteArrayOutputStream()), new java.io.PrintStream(err), false);
        assertThat(status).isEqualTo(2);
        assertThat(err.toString()).isEqualTo("error: launch: --exclude-unhealthy applies to train, not to score\n");
    }

    @Test
    void namesFollowTheLayout() {
        assertThat(Preflight.names(new JobLayout(2, 1, 1, 0, 2, "h", 1, "config"))).containsExactly("node 0", "node 1");
        assertThat(Preflight.names(new JobLayout(2, 0, 2, 1, 1, "h", 1, "torchrun"))).containsExactly(
                "process 0 (node 0)", "process 1 (node 0)", "process 2 (node 1)", "process 3 (node 1)");
    }

    /** What one node's check ended with: its log, and its error message or null. */
    record Outcome(List<String> log, String error) {}

    private static List<Outcome> exchange(int nodes, IntFunction<Supplier<NodeFacts>> facts, Duration wait)
            throws InterruptedException, ExecutionException {
        List<String> names = new ArrayList<>();
        for (int n = 0; n < nodes; n++) {
            names.add("node " + n);
        }
        try (var server = RendezvousServer.start(0, TOKEN, 0)) {
            List<CompletableFuture<Outcome>> runs = new ArrayList<>();
            for (int n = 0; n < nodes; n++) {
                int node = n;
                runs.add(CompletableFuture.supplyAsync(() -> {
                    List<String> log = new ArrayList<>();
                    try (var store = connect(server)) {
                        Preflight.check(store, node, names, facts.apply(node), wait, log::add);
                        return new Outcome(log, null);
                    } catch (UserError e) {
                        return new Outcome(log, e.getMessage());
                    }
                }, TestThreads.OWN_THREAD));
            }
            List<Outcome> outcomes = new ArrayList<>();
            for (var run : runs) {
                outcomes.add(run.get());
            }
            return outcomes;
        }
    }

    private static RendezvousClient connect(RendezvousServer server) {
        return RendezvousClient.connect("127.0.0.1", server.port(), TOKEN, 0, Duration.ofSeconds(5));
    }
}
