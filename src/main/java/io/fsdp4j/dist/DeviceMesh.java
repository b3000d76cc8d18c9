package io.fsdp4j.dist;

import io.fsdp4j.UserError;

/**
 * A 2-D arrangement of the world's ranks: {@code replicas} rows of {@code shardSize} ranks. Parameters are
 * sharded across a row (the shard group, ranks that share a node) and replicated down a column (the
 * replicate group). A 1-D mesh is the special case of one row (all sharded) or rows of one (all replicated).
 * Global rank = replica * shardSize + shardRank.
 */
public record DeviceMesh(int replicas, int shardSize) {

    public DeviceMesh {
        if (replicas < 1 || shardSize < 1) {
            throw new IllegalArgumentException("mesh dimensions must be positive");
        }
    }

    /** Refuses a world that cannot be cut into shard groups of the given size, before any work starts. */
    public static DeviceMesh of(int worldSize, int shardSize) {
        if (shardSize < 1 || worldSize % shardSize != 0) {
            throw new UserError("world size " + worldSize + " is not divisible by fsdp.shard_size " + shardSize
                    + "; choose a shard size that divides the number of ranks");
        }
        return new DeviceMesh(worldSize / shardSize, shardSize);
    }

    public int worldSize() {
        return replicas * shardSize;
    }

    public int replicaOf(int globalRank) {
        return globalRank / shardSize;
    }

    public int shardRankOf(int globalRank) {
        return globalRank % shardSize;
    }
}
