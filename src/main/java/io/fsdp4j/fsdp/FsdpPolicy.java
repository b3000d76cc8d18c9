package io.fsdp4j.fsdp;

import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;

/**
 * How FSDP runs a model: what is sharded and when it is freed, the precision of gathered parameters and of
 * gradient reduction (master weights are always fp32), which activations are recomputed, and whether the master,
 * gradient and optimizer shards live in host memory ({@code cpuOffload}; the optimizer then steps on the host).
 */
public record FsdpPolicy(ShardingStrategy strategy, Precision paramDtype, Precision reduceDtype,
                         ActivationCheckpointing checkpointing, boolean cpuOffload) {

    /** Without offload. */
    public FsdpPolicy(ShardingStrategy strategy, Precision paramDtype, Precision reduceDtype,
                      ActivationCheckpointing checkpointing) {
        this(strategy, paramDtype, reduceDtype, checkpointing, false);
    }

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
