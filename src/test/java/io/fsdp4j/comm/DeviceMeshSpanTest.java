package io.fsdp4j.comm;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Where a mesh's groups lie over the nodes: what nccl-test reports beside each measurement for plan to read. */
class DeviceMeshSpanTest {

    @Test
    void fullShardAcrossTwoNodesIsOneWorldOnBoth() {
        DeviceMesh mesh = new DeviceMesh(1, 8); // 2 nodes x 4 ranks, all sharded
        assertThat(mesh.span("world", 4)).isEqualTo(new DeviceMesh.Span(2, 1));
        assertThat(mesh.span("world", 8)).isEqualTo(new DeviceMesh.Span(1, 1)); // one node of 8
    }

    @Test
    void hybridShardsInsideANodeAndReplicatesAcrossThem() {
        DeviceMesh mesh = new DeviceMesh(2, 4); // 2 nodes x 4 ranks, a shard group a node
        assertThat(mesh.span("shard.0", 4)).isEqualTo(new DeviceMesh.Span(1, 1));
        assertThat(mesh.span("shard.1", 4)).isEqualTo(new DeviceMesh.Span(1, 1));
        // each replicate group has one rank on each node, and all four share each node's network
        assertThat(mesh.span("replicate.0", 4)).isEqualTo(new DeviceMesh.Span(2, 4));
        assertThat(mesh.span("replicate.3", 4)).isEqualTo(new DeviceMesh.Span(2, 4));
    }

    @Test
    void shardGroupsSmallerThanANodeShareIt() {
        DeviceMesh mesh = new DeviceMesh(4, 2); // 2 nodes x 4 ranks, shard groups of 2
        assertThat(mesh.span("shard.0", 4)).isEqualTo(new DeviceMesh.Span(1, 2));
        // replicate.0 = ranks 0, 2, 4, 6: two on each node
        assertThat(mesh.span("replicate.0", 4)).isEqualTo(new DeviceMesh.Span(2, 2));
    }
}
