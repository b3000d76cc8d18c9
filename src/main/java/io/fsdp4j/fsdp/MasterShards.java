package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.optim.TrainableShard;
import io.fsdp4j.tensor.Tensor;

/**
 * A shard that trains: fp32 master weights and a gradient shard of shardNumel elements each, on the device or in
 * host memory; what the optimizer updates. A step's gradient arrives by {@link #receiveReduced} (the shard group's
 * reduce-scatter, and the replicas' all-reduce), after {@link #zeroGrad} at the step's start.
 */
public abstract sealed class MasterShards implements ShardStorage, TrainableShard permits DeviceShards, HostShards {
    protected final Backend backend;
    protected final UnitLayout layout;
    protected final int shardNumel;
    protected final long shardStart;

    MasterShards(Backend backend, UnitLayout layout, int shardNumel, long shardStart) {
        this.backend = backend;
        this.layout = layout;
        this.shardNumel = shardNumel;
        this.shardStart = shardStart;
    }

    @Override
    public UnitLayout layout() {
        return layout;
    }

    @Override
    public long shardStart() {
        return shardStart;
    }

    @Override
    public int shardNumel() {
        return shardNumel;
    }

    @Override
    public float[] masterValues() {
        return values();
    }

    @Override
    public long paramBytes() {
        return 4L * shardNumel;
    }

    @Override
    public long gradBytes() {
        return 4L * shardNumel;
    }

    /** Starts a step: the gradient shard is zero until this step's reduction arrives. */
    abstract void zeroGrad();

    /**
     * This step's reduced gradient shard (shardNumel elements, fp32 or the reduction's precision), added to the
     * gradient shard; {@code buffers} holds it and the unit's full-size accumulator, and is closed once the
     * gradient has been read (offloaded: by {@link #releaseReducedGradient}, after its copy to host memory).
     */
    abstract void receiveReduced(Tensor reduced, MemoryScope buffers);

    /** Offloaded: waits for the reduced gradient's copy to host memory and frees what it read. */
    void releaseReducedGradient() {}

    /** Squared norm of the gradient shard, accumulated in double. */
    abstract double gradSumOfSquares();

    /** Multiplies the gradient shard by {@code factor} (clipping). */
    abstract void scaleGrad(float factor);
}
