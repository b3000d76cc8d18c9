package io.fsdp4j.plan;

import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.plan.Collective.CommGroup;

/**
 * How a strategy lays its mesh over a cluster, as {@code FsdpPolicy.shardSize} does with the default shard size:
 * FULL_SHARD and SHARD_GRAD_OP shard over every rank, NO_SHARD over none (every rank a replica), the hybrids over
 * the ranks of one node and replicate across nodes.
 *
 * @param shard the shard group: all-gathers of parameters and reduce-scatters of gradients
 * @param replicas the replica group: the all-reduce of each gradient shard after its reduce-scatter
 */
public record Sharding(ShardingStrategy strategy, CommGroup shard, CommGroup replicas) {

    public static Sharding of(ShardingStrategy strategy, Cluster cluster) {
        int world = cluster.world(), nodes = cluster.nodes();
        CommGroup everyone = new CommGroup(world, nodes, 1);
        return switch (strategy) {
            case FULL_SHARD, SHARD_GRAD_OP -> new Sharding(strategy, everyone, CommGroup.SINGLE);
            case NO_SHARD -> new Sharding(strategy, CommGroup.SINGLE, everyone);
            case HYBRID_SHARD, HYBRID_SHARD_ZERO2 -> nodes == 1
                    ? new Sharding(strategy, everyone, CommGroup.SINGLE)
                    : new Sharding(strategy, new CommGroup(cluster.gpusPerNode(), 1, 1),
                            new CommGroup(nodes, nodes, cluster.gpusPerNode()));
        };
    }

    /** S, the ranks one unit's flat buffer is split over. */
    public int shardSize() {
        return shard.ranks();
    }

    /** Whether gathered parameters are freed after forward and gathered again for backward. */
    public boolean reshardAfterForward() {
        return strategy.reshardAfterForward();
    }
}
