package io.fsdp4j.job;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.comm.inprocess.InProcessGroup;
import io.fsdp4j.cuda.Cuda;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * All the ranks of a job as threads of this process: the world group and the shard and replicate groups of
 * a mesh, with one {@link RankContext} per rank. The ranks are CPU ranks, or ({@link #sharingOneGpu}) CUDA ranks that
 * share the first visible GPU, each with its own streams and memory, their collectives copies and sums on it.
 */
public final class InProcessWorld implements LocalRanks {
    private final DeviceMesh mesh;
    private final boolean onGpu;
    private final InProcessGroup world;
    private final List<InProcessGroup> shardGroups = new ArrayList<>();
    private final List<InProcessGroup> replicateGroups = new ArrayList<>();

    /** CPU ranks. */
    public InProcessWorld(DeviceMesh mesh, Duration timeout) {
        this(mesh, timeout, false);
    }

    /** Every rank of the mesh a CUDA rank on the first visible GPU ({@code dist.share_gpu}). */
    public static InProcessWorld sharingOneGpu(DeviceMesh mesh, Duration timeout) {
        return new InProcessWorld(mesh, timeout, true);
    }

    private InProcessWorld(DeviceMesh mesh, Duration timeout, boolean onGpu) {
        this.mesh = mesh;
        this.onGpu = onGpu;
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
        return rank(globalRank, onGpu ? new CudaBackend(0) : CpuBackend.INSTANCE);
    }

    @Override
    public void close(RankContext rank) {
        if (rank.backend() instanceof CudaBackend gpu) {
            gpu.close();
        } // CPU ranks: heap memory, nothing to release
    }

    @Override
    public String devices() {
        return onGpu ? Cuda.properties(0).name() + " x1 (shared by " + mesh.worldSize() + " ranks)"
                : "cpu x" + mesh.worldSize();
    }

    @Override
    public DeviceMesh mesh() {
        return mesh;
    }

    public RankContext rank(int globalRank, Backend backend) {
        int replica = mesh.replicaOf(globalRank), shardRank = mesh.shardRankOf(globalRank);
        return new RankContext(globalRank, mesh, backend, member(world, globalRank, backend),
                member(shardGroups.get(replica), shardRank, backend),
                member(replicateGroups.get(shardRank), replica, backend));
    }

    private static ProcessGroup member(InProcessGroup group, int rank, Backend backend) {
        return backend instanceof CudaBackend gpu ? group.gpuMember(rank, gpu) : group.member(rank);
    }

    /** Tests: runs {@code hook} in every rank just before it waits in any group of this world. */
    void beforeEveryWait(Runnable hook) {
        world.beforeEveryWait(hook);
        shardGroups.forEach(g -> g.beforeEveryWait(hook));
        replicateGroups.forEach(g -> g.beforeEveryWait(hook));
    }

    /** Releases every rank blocked in any group of this world. */
    @Override
    public void abort(String reason) {
        world.abort(reason);
        shardGroups.forEach(g -> g.abort(reason));
        replicateGroups.forEach(g -> g.abort(reason));
    }
}
