package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.plan.Collective.CommGroup;
import org.junit.jupiter.api.Test;

class CollectiveTest {
    private static final Cluster NODE = Cluster.of(GpuSpec.h200(), 1, 4, 0, 50e9);

    @Test
    void busFactorsAreNcclTests() {
        assertThat(Collective.ALL_GATHER.busFactor(4)).isEqualTo(0.75);
        assertThat(Collective.REDUCE_SCATTER.busFactor(8)).isEqualTo(7 / 8.0);
        assertThat(Collective.ALL_REDUCE.busFactor(4)).isEqualTo(1.5);
        assertThat(Collective.ALL_REDUCE.busFactor(2)).isEqualTo(1.0);
    }

    @Test
    void ringTimeIsLatencyPlusBusFactorTimesBytesOverBusBandwidth() {
        long bytes = 466_000_000L;
        var group = new CommGroup(4, 1, 1);
        double latency = 8.4e-6 + 3 * 3.4e-6;
        assertThat(Collective.ALL_GATHER.seconds(bytes, group, NODE))
                .isCloseTo(latency + 0.75 * bytes / 315e9, within(1e-12));
        double arLatency = 8.4e-6 + 6 * 3.4e-6;
        assertThat(Collective.ALL_REDUCE.seconds(2 * bytes, group, NODE))
                .isCloseTo(arLatency + 1.5 * 2 * bytes / 353e9, within(1e-12));
        assertThat(Collective.ALL_GATHER.seconds(bytes, CommGroup.SINGLE, NODE)).isZero();
    }

    @Test
    void matchesTheCollectivesMeasuredOnFourH200() {
        // gpu-machine.md: one 466 MB layer, 4 GPUs: all-gather bf16 1.17 ms, reduce-scatter fp32 2.26 ms,
        // all-reduce fp32 4.15 ms
        var group = new CommGroup(4, 1, 1);
        assertThat(Collective.ALL_GATHER.seconds(466_000_000L, group, NODE)).isCloseTo(1.17e-3, within(0.08e-3));
        assertThat(Collective.REDUCE_SCATTER.seconds(932_000_000L, group, NODE)).isCloseTo(2.26e-3, within(0.15e-3));
        assertThat(Collective.ALL_REDUCE.seconds(932_000_000L, group, NODE)).isCloseTo(4.15e-3, within(0.25e-3));
    }

    @Test
    void aRingAcrossNodesRunsAtTheSlowerOfNvlinkAndEachNodesNetwork() {
        Cluster slow = Cluster.of(GpuSpec.h200(), 2, 8, 0, 50e9);
        long bytes = 1_000_000_000L;
        var everyone = new CommGroup(16, 2, 1);
        double latency = 8.4e-6 + 14 * 3.4e-6 + 1 * 9.6e-6; // 15 steps, one of them between the nodes
        assertThat(Collective.ALL_GATHER.seconds(bytes, everyone, slow))
                .isCloseTo(latency + 15 / 16.0 * bytes / 50e9, within(1e-12));
        Cluster fast = Cluster.of(GpuSpec.h200(), 2, 8, 0, 400e9);
        assertThat(Collective.ALL_GATHER.seconds(bytes, everyone, fast))
                .isCloseTo(latency + 15 / 16.0 * bytes / 315e9, within(1e-12));
    }

    @Test
    void concurrentReplicaGroupsShareTheirNodesNetwork() {
        // hybrid sharding on 4 nodes x 8: eight all-reduces (one per local rank) leave each node at once
        Cluster cluster = Cluster.of(GpuSpec.h200(), 4, 8, 0, 50e9);
        long shardBytes = 100_000_000L;
        var replicas = new CommGroup(4, 4, 8);
        double latency = 8.4e-6 + 6 * 9.6e-6; // every step crosses the network
        assertThat(Collective.ALL_REDUCE.seconds(shardBytes, replicas, cluster))
                .isCloseTo(latency + 1.5 * shardBytes / (50e9 / 8), within(1e-12));
    }
}
