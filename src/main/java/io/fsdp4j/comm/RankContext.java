package io.fsdp4j.comm;

import io.fsdp4j.backend.Backend;

/**
 * Everything one rank needs to take part in a job: its device, its place in the mesh and the groups it
 * belongs to (the world, its shard group, its replicate group).
 */
public record RankContext(int rank, DeviceMesh mesh, Backend backend, ProcessGroup world, ProcessGroup shardGroup,
                          ProcessGroup replicateGroup) {

    public int worldSize() {
        return mesh.worldSize();
    }
}
