package io.fsdp4j.comm;

import io.fsdp4j.UserError;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

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

    /**
     * Every group of the mesh by name, each its global ranks in group order: "world", then "shard.R" for each
     * replica R, then "replicate.S" for each shard rank S.
     */
    public Map<String, List<Integer>> groups() {
        Map<String, List<Integer>> all = new LinkedHashMap<>();
        List<Integer> world = new ArrayList<>();
        for (int r = 0; r < worldSize(); r++) {
            world.add(r);
        }
        all.put("world", world);
        for (int replica = 0; replica < replicas; replica++) {
            List<Integer> ranks = new ArrayList<>();
            for (int s = 0; s < shardSize; s++) {
                ranks.add(replica * shardSize + s);
            }
            all.put("shard." + replica, ranks);
        }
        for (int s = 0; s < shardSize; s++) {
            List<Integer> ranks = new ArrayList<>();
            for (int replica = 0; replica < replicas; replica++) {
                ranks.add(replica * shardSize + s);
            }
            all.put("replicate." + s, ranks);
        }
        return all;
    }

    /**
     * How a group of {@link #groups} lies over the nodes when every node holds {@code ranksPerNode} consecutive global
     * ranks: how many nodes its ranks are on, and how many groups of its kind ("world", "shard", "replicate") have
     * ranks on its first rank's node (they share that node's network when they run at once).
     */
    public record Span(int nodes, int groupsPerNode) {}

    public Span span(String group, int ranksPerNode) {
        Map<String, List<Integer>> all = groups();
        List<Integer> members = all.get(group);
        if (members == null || ranksPerNode < 1) {
            throw new IllegalArgumentException("no group " + group + " with " + ranksPerNode + " ranks a node");
        }
        int nodes = (int) members.stream().map(r -> r / ranksPerNode).distinct().count();
        int node = members.getFirst() / ranksPerNode;
        String kind = kindOf(group);
        int groupsPerNode = (int) all.entrySet().stream().filter(e -> kindOf(e.getKey()).equals(kind))
                .filter(e -> e.getValue().stream().anyMatch(r -> r / ranksPerNode == node)).count();
        return new Span(nodes, groupsPerNode);
    }

    private static String kindOf(String group) {
        int dot = group.indexOf('.');
        return dot < 0 ? group : group.substring(0, dot);
    }
}
