package io.fsdp4j.dist;

import io.fsdp4j.backend.Backend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * All the ranks of a job as threads of this process: the world group and the shard and replicate groups of
 * a mesh, with one {@link RankContext} per rank.
 */
public final class InProcessWorld implements LocalRanks {
    private final DeviceMesh mesh;
    private final InProcessGroup world;
    private final List<InProcessGroup> shardGroups = new ArrayList<>();
    private final List<InProcessGroup> replicateGroups = new ArrayList<>();

    public InProcessWorld(DeviceMesh mesh, Duration timeout) {
        this.mesh = mesh;
        Map<String, List<Integer>> groups = mesh.groups();
        this.world = new InProcessGroup("world", groups.get("world"), timeout);
        for (int replica = 0; replica < mesh.replicas(); replica++) {
            shardGroups.add(new InProcessGroup("shard." + replica, groups.get("shard." + replica), timeout));
        }
        for (int s = 0; s < mesh.shardSize(); s++) {
            replicateGroups.add(new InProcessGroup("replicate." + s, groups.get("replicate." + s), timeout));
        }
    }

    @Override
    public RankContext open(int globalRank) {
        return rank(globalRank, io.fsdp4j.backend.CpuBackend.INSTANCE);
    }

    @Override
    public void close(RankContext rank) {
        // heap memory: nothing to release
    }

    @Override
    public String devices() {
        return "cpu x" + mesh.worldSize();
    }

    @Override
    public DeviceMesh mesh() {
        return mesh;
    }

    public RankContext rank(int globalRank, Backend backend) {
        int replica = mesh.replicaOf(globalRank), shardRank = mesh.shardRankOf(globalRank);
        return new RankContext(globalRank, mesh, backend, world.member(globalRank),
                shardGroups.get(replica).member(shardRank), replicateGroups.get(shardRank).member(replica));
    }

    /** Releases every rank blocked in any group of this world. */
    @Override
    public void abort(String reason) {
        world.abort(reason);
        shardGroups.forEach(g -> g.abort(reason));
        replicateGroups.forEach(g -> g.abort(reason));
    }
}
