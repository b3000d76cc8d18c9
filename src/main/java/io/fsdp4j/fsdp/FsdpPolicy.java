package io.fsdp4j.fsdp;

import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.FsdpSection;
import io.fsdp4j.config.ParamCopy;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.tensor.DType;

/**
 * How FSDP runs a model: what is sharded and when it is freed, the precision of gathered parameters and of
 * gradient reduction (master weights are always fp32), which activations are recomputed, whether the master,
 * gradient and optimizer shards live in host memory ({@code cpuOffload}; the optimizer then steps on the host), and
 * how many units ahead of the one computing have their all-gather started ({@code prefetch}: 0 gathers each unit
 * when it is needed; 1, the default, overlaps the next unit's gather with this unit's compute; more hold more
 * gathered units at once, for links whose gathers take longer than some units compute), and whether a half-precision
 * copy of each master shard on the device is kept for the gathers ({@code paramCopy}). The model's last
 * {@code blocksNotCheckpointed} blocks keep every activation whatever {@code checkpointing} says, and where it
 * recomputes whole blocks the {@code blocksSelective} before them are checkpointed selectively.
 */
public record FsdpPolicy(ShardingStrategy strategy, Precision paramDtype, Precision reduceDtype,
                         ActivationCheckpointing checkpointing, boolean cpuOffload, int prefetch, ParamCopy paramCopy,
                         int blocksNotCheckpointed, int blocksSelective) {
    public FsdpPolicy {
        if (prefetch < 0) {
            throw new IllegalArgumentException("prefetch depth " + prefetch + " < 0");
        }
        if (blocksNotCheckpointed < 0) {
            throw new IllegalArgumentException("blocks not checkpointed " + blocksNotCheckpointed + " < 0");
        }
        if (blocksSelective < 0) {
            throw new IllegalArgumentException("blocks checkpointed selectively " + blocksSelective + " < 0");
        }
        java.util.Objects.requireNonNull(paramCopy, "paramCopy");
    }

    /** Every block under {@code checkpointing}. */
    public FsdpPolicy(ShardingStrategy strategy, Precision paramDtype, Precision reduceDtype,
                      ActivationCheckpointing checkpointing, boolean cpuOffload, int prefetch, ParamCopy paramCopy) {
        this(strategy, paramDtype, reduceDtype, checkpointing, cpuOffload, prefetch, paramCopy, 0, 0);
    }

    /**
     * Block {@code layer}'s checkpointing, of a model of {@code blocks} blocks: none for the last ones left out,
     * selective for those before them ({@link ActivationCheckpointing#ofBlock(int, int, int, int)}).
     */
    public ActivationCheckpointing checkpointing(int layer, int blocks) {
        return checkpointing.ofBlock(layer, blocks, blocksNotCheckpointed, blocksSelective);
    }

    /** Parameters rounded at each gather. */
    public FsdpPolicy(ShardingStrategy strategy, Precision paramDtype, Precision reduceDtype,
                      ActivationCheckpointing checkpointing, boolean cpuOffload, int prefetch) {
        this(strategy, paramDtype, reduceDtype, checkpointing, cpuOffload, prefetch, FsdpSection.DEFAULT_PARAM_COPY);
    }

    /** The configured sharding of an {@code fsdp} section. */
    public static FsdpPolicy of(FsdpSection f) {
        return new FsdpPolicy(f.strategy(), f.paramDtype(), f.reduceDtype(), f.activationCheckpointing(),
                f.cpuOffload(), f.prefetch(), f.paramCopy(), f.blocksNotCheckpointed(), f.blocksSelective());
    }

    /**
     * The type of the copy of each master shard on the device kept for the gathers, or null when none is kept (fp32
     * parameters, or {@code fsdp.param_copy: per_gather}).
     */
    public DType keptCopyDtype() {
        return paramCopy == ParamCopy.KEPT && paramDtype.isHalf() ? paramDtype.dtype() : null;
    }

    /** With the default prefetch depth. */
    public FsdpPolicy(ShardingStrategy strategy, Precision paramDtype, Precision reduceDtype,
                      ActivationCheckpointing checkpointing, boolean cpuOffload) {
        this(strategy, paramDtype, reduceDtype, checkpointing, cpuOffload, FsdpSection.DEFAULT_PREFETCH);
    }

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
