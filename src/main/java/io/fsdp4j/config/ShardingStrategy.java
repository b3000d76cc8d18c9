package io.fsdp4j.config;

/**
 * {@code fsdp.strategy}: what FSDP shards across the ranks of a shard group, with PyTorch's names. The hybrid
 * strategies shard within a group of {@code fsdp.shard_size} ranks and replicate across the groups.
 */
public enum ShardingStrategy implements ConfigChoice {
    /** Parameters, gradients and optimizer state sharded; parameters gathered per unit and freed after use (ZeRO-3). */
    FULL_SHARD,
    /** Gradients and optimizer state sharded; gathered parameters kept from forward to backward (ZeRO-2). */
    SHARD_GRAD_OP,
    /** Nothing sharded: every rank holds everything and gradients are all-reduced (DDP). */
    NO_SHARD,
    /** {@link #FULL_SHARD} within a shard group, replicated across groups. */
    HYBRID_SHARD,
    /** {@link #SHARD_GRAD_OP} within a shard group, replicated across groups. */
    HYBRID_SHARD_ZERO2;

    /** True for the strategies that shard within a group and replicate across groups. */
    public boolean hybrid() {
        return this == HYBRID_SHARD || this == HYBRID_SHARD_ZERO2;
    }

    /** True when the parameters are freed again after a unit's forward (and gathered again for its backward). */
    public boolean reshardAfterForward() {
        return this == FULL_SHARD || this == HYBRID_SHARD;
    }

    @Override
    public String toString() {
        return spelling();
    }
}
