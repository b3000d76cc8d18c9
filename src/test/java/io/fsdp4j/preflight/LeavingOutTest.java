package io.fsdp4j.preflight;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.doctor.GpuHealth;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.train.JobSetup;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** Which nodes a job can start without, and the smaller job's layout and mesh, from a comparison of its nodes. */
class LeavingOutTest {
    private static final GpuHealth.Quick HEALTHY = new GpuHealth.Quick(700e12, 4.2e12, null);

    /** The comparison of nodes with the same facts and these health results (one per process). */
    private static Comparison compare(JobLayout layout, List<GpuHealth.Quick> health) {
        List<NodeFacts> nodes = new ArrayList<>();
        health.forEach(h -> nodes.add(new NodeFacts(List.of(Fact.enforced("java", "JDK", "25", "same JDK")))
                .withHealth(h)));
        return Comparison.of(Preflight.names(layout), nodes);
    }

    private static Function<JobLayout, DeviceMesh> meshOf(String... settings) {
        TrainConfig config = TrainConfig.load(null, List.of(settings));
        return layout -> JobSetup.mesh(config, layout);
    }

    private static JobLayout nodes(int nnodes, int nodeRank, int procsPerNode, int localProc, int ranksPerProc) {
        return new JobLayout(nnodes, nodeRank, procsPerNode, localProc, ranksPerProc, "node0", 29500, "torchrun");
    }

    @Test
    void failedAndLaggingNodesAreLeftOutAndTheOthersRenumbered() {
        JobLayout node3 = nodes(4, 3, 1, 0, 2);
        Comparison comparison = compare(node3, List.of(HEALTHY, new GpuHealth.Quick(0, 0, "GPU 1 failed"),
                new GpuHealth.Quick(200e12, 4.2e12, null), HEALTHY));
        LeavingOut leaving = LeavingOut.plan(comparison, node3);
        assertThat(leaving.nodes()).containsExactly(1, 2);
        assertThat(leaving.named()).isEqualTo("nodes 1 and 2");
        assertThat(leaving.why()).isEqualTo("the GPU health test failed on node 1: GPU 1 failed; the bf16 product rate "
                + "of the slowest GPU on node 2 is 200.00 TFLOP/s, 29% of the nodes' median 700.00 TFLOP/s");
        assertThat(leaving.obstacle(comparison, meshOf("fsdp.strategy=hybrid_shard"))).isNull();
        assertThat(leaving.leavesOutThisProcess()).isFalse();
        assertThat(leaving.firstRemainingProcess()).isZero();

        JobLayout smaller = leaving.smaller(new JobLayout.Address("10.0.0.3", 41000));
        assertThat(smaller).isEqualTo(new JobLayout(2, 1, 1, 0, 2, "10.0.0.3", 41000, "torchrun, without nodes 1 and 2"));
        // hybrid sharding: a shard group is still one node, the replicas are the nodes left
        assertThat(meshOf("fsdp.strategy=hybrid_shard").apply(smaller)).isEqualTo(new DeviceMesh(2, 2));
        assertThat(meshOf("fsdp.strategy=full_shard").apply(smaller)).isEqualTo(new DeviceMesh(1, 4));

        assertThat(LeavingOut.plan(comparison, nodes(4, 2, 1, 0, 2)).leavesOutThisProcess()).isTrue();
    }

    @Test
    void aProcessThatFailsTakesItsWholeNodeOut() {
        JobLayout process5 = nodes(3, 2, 2, 1, 1); // process 5 = node 2, local process 1
        Comparison comparison = compare(process5, List.of(new GpuHealth.Quick(0, 0, "GPU 0 failed"), HEALTHY, HEALTHY,
                HEALTHY, HEALTHY, HEALTHY));
        LeavingOut leaving = LeavingOut.plan(comparison, process5);
        assertThat(leaving.nodes()).containsExactly(0);
        assertThat(leaving.why()).isEqualTo("the GPU health test failed on process 0 (node 0): GPU 0 failed");
        assertThat(leaving.firstRemainingProcess()).isEqualTo(2); // node 1's first process serves the smaller job
        JobLayout smaller = leaving.smaller(new JobLayout.Address("h", 1));
        assertThat(smaller.nodeRank()).isEqualTo(1);
        assertThat(smaller.process()).isEqualTo(3);
        assertThat(smaller.localRanks()).containsExactly(3);
        assertThat(LeavingOut.plan(comparison, nodes(3, 0, 2, 1, 1)).leavesOutThisProcess()).isTrue();
    }

    @Test
    void theJobStopsWhenItsLayoutDoesNotAllowStartingWithoutTheNode() {
        JobLayout node0 = nodes(3, 0, 1, 0, 2);
        Comparison one = compare(node0, List.of(HEALTHY, HEALTHY, new GpuHealth.Quick(0, 0, "GPU 1 failed")));
        LeavingOut leaving = LeavingOut.plan(one, node0);
        // a shard group of 3 ranks across nodes: 6 ranks split into groups of 3, but 4 do not
        assertThat(leaving.obstacle(one, meshOf("fsdp.strategy=hybrid_shard", "fsdp.shard_size=3")))
                .isEqualTo("world size 4 is not divisible by fsdp.shard_size 3; choose a shard size that divides the number "
                        + "of ranks");
        assertThat(leaving.obstacle(one, null)).isEqualTo("only train starts a job of fewer nodes than it was "
                + "started with");

        Comparison all = compare(node0, List.of(new GpuHealth.Quick(0, 0, "x"), new GpuHealth.Quick(0, 0, "y"),
                new GpuHealth.Quick(0, 0, "z")));
        assertThat(LeavingOut.plan(all, node0).obstacle(all, meshOf())).isEqualTo("no node would be left");

        // a node whose facts differ is not a health problem: no job starts without it
        List<NodeFacts> facts = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            facts.add(new NodeFacts(List.of(Fact.enforced("java", "JDK", n == 1 ? "24" : "25", "same JDK")))
                    .withHealth(n == 2 ? new GpuHealth.Quick(0, 0, "GPU 1 failed") : HEALTHY));
        }
        Comparison mixed = Comparison.of(Preflight.names(node0), facts);
        assertThat(mixed.onlyHealthProblems()).isFalse();
        assertThat(LeavingOut.plan(mixed, node0).obstacle(mixed, meshOf())).isEqualTo("other differences stop the job too");
        assertThat(mixed.healthProblems()).isEqualTo(Map.of(2, "the GPU health test failed on node 2: GPU 1 failed"));
    }

    @Test
    void theInjectedFaultStandsInForTheTestOnlyWhenSet() {
        assertThat(GpuHealth.injectedFault(Map.of())).isEmpty();
        assertThat(GpuHealth.injectedFault(Map.of(GpuHealth.FAULT_ENV, " "))).isEmpty();
        assertThat(GpuHealth.injectedFault(Map.of(GpuHealth.FAULT_ENV, "NVLink down"))).contains(
                new GpuHealth.Quick(0, 0, "NVLink down (injected by " + GpuHealth.FAULT_ENV + ")"));
    }
}
