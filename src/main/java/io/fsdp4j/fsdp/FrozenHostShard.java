package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.tensor.Tensor;

/**
 * A shard that does not train, in host memory ({@code fsdp.cpu_offload} for a model that computes forwards only:
 * {@code eval}, {@code score}): the parameters only, in fp32 (the precision of the backends' host copies), copied to
 * the device a unit ahead of each gather as training's offloaded masters are. No gradient, no optimizer state: 4 bytes
 * a parameter of host memory where offloaded training holds 8 and its moments 8 more.
 */
public final class FrozenHostShard implements ShardStorage {
    private final int shardNumel;
    private final HostStaging params;

    FrozenHostShard(Backend backend, int shardNumel) {
        this.shardNumel = shardNumel;
        this.params = new HostStaging(backend, shardNumel);
    }

    @Override
    public boolean inHostMemory() {
        return true;
    }

    @Override
    public void load(float[] values) {
        params.load(values);
    }

    @Override
    public float[] values() {
        return params.toArray();
    }

    @Override
    public Tensor gatherSource() {
        return params.onDevice();
    }

    @Override
    public void startHostCopy() {
        params.startCopy();
    }

    @Override
    public void releaseStaged() {
        params.release();
    }

    @Override
    public Tensor fp32OnDevice() {
        return params.copyInScope();
    }

    @Override
    public long paramBytes() {
        return 4L * shardNumel;
    }

    @Override
    public long gradBytes() {
        return 0;
    }
}
