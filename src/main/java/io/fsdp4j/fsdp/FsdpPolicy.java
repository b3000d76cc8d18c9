package io.fsdp4j.fsdp;

import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;

/**
 * How FSDP runs a model: what is sharded and when it is freed, the precision of gathered parameters and of
 * gradient reduction (master weights are always fp32), and which activations are recomputed.
 */
public record FsdpPolicy(ShardingStrategy strategy, Precision paramDtype, Precision reduceDtype,
                         ActivationCheckpointing checkpointing) {

    public static FsdpPolicy fullShardFp32() {
        return new FsdpPolicy(ShardingStrategy.FULL_SHARD, Precision.FP32, Precision.FP32, ActivationCheckpointing.NONE);
    }

    /** Ranks per shard group for this strategy on a world of the given size. */
    public int shardSize(int worldSize, int configuredShardSize, int ranksPerNode) {
        return switch (strategy) {
            case FULL_SHARD, SHARD_GRAD_OP -> worldSize;
            case NO_SHARD -> 1;
            case HYBRID_SHARD, HYBRID_SHARD_ZERO2 -> configuredShardSize > 0 ? configuredShardSize : ranksPerNode;
        };
    }
}
