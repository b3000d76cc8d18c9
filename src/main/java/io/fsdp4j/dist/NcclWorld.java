package io.fsdp4j.dist;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.Nccl;
import io.fsdp4j.cuda.NcclComm;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The GPUs of this process as ranks: rank r drives GPU r from its own thread with a {@link CudaBackend}, and
 * reaches the others through NCCL communicators for the world, its shard group and its replicate group. The
 * communicators' unique ids are made before the rank threads start; every rank joins its groups in the same
 * order (world, shard, replicate), so the joins cannot deadlock.
 */
public final class NcclWorld implements LocalRanks {
    private final DeviceMesh mesh;
    private final byte[] worldId;
    private final List<byte[]> shardIds = new ArrayList<>();
    private final List<byte[]> replicateIds = new ArrayList<>();
    private final Map<Integer, List<NcclComm>> comms = new ConcurrentHashMap<>();
    private final String deviceName;

    public NcclWorld(DeviceMesh mesh) {
        int gpus = Cuda.deviceCount();
        if (mesh.worldSize() > gpus) {
            throw new UserError(mesh.worldSize() + " ranks need " + mesh.worldSize() + " GPUs, but " + gpus
                    + " are visible; set dist.ranks to at most " + gpus);
        }
        this.mesh = mesh;
        this.worldId = Nccl.uniqueId();
        for (int replica = 0; replica < mesh.replicas(); replica++) {
            shardIds.add(Nccl.uniqueId());
        }
        for (int s = 0; s < mesh.shardSize(); s++) {
            replicateIds.add(Nccl.uniqueId());
        }
        this.deviceName = Cuda.properties(0).name() + " x" + mesh.worldSize();
    }

    @Override
    public DeviceMesh mesh() {
        return mesh;
    }

    @Override
    public RankContext open(int globalRank) {
        CudaBackend backend = new CudaBackend(globalRank);
        int replica = mesh.replicaOf(globalRank), shardRank = mesh.shardRankOf(globalRank);
        NcclComm world = Nccl.initRank(worldId, mesh.worldSize(), globalRank);
        NcclComm shard = Nccl.initRank(shardIds.get(replica), mesh.shardSize(), shardRank);
        NcclComm replicate = Nccl.initRank(replicateIds.get(shardRank), mesh.replicas(), replica);
        comms.put(globalRank, List.of(world, shard, replicate));
        return new RankContext(globalRank, mesh, backend, new NcclProcessGroup(world, backend),
                new NcclProcessGroup(shard, backend), new NcclProcessGroup(replicate, backend));
    }

    @Override
    public void close(RankContext rank) {
        CudaBackend backend = (CudaBackend) rank.backend();
        backend.synchronize();
        List<NcclComm> mine = comms.remove(rank.rank());
        if (mine != null) {
            mine.forEach(NcclComm::close);
        }
        backend.close();
    }

    @Override
    public void abort(String reason) {
        comms.values().forEach(list -> list.forEach(NcclComm::abort));
    }

    @Override
    public String devices() {
        return deviceName;
    }
}
