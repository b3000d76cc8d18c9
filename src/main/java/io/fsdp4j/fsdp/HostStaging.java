package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A shard's fp32 values in host memory (page-locked on CUDA) and their copy on the device for a gather: what an
 * offloaded shard, training ({@link HostShards}' master) or frozen ({@link FrozenHostShard}), gathers from. The
 * copy runs on the backend's host-to-device stream ({@link #startCopy}, which the engine calls one unit ahead, so
 * that it overlaps compute); the gather's compute waits for it by an event, not the host.
 */
final class HostStaging {
    private final Backend backend;
    private final int shardNumel;
    private final MemorySegment values;
    private Tensor staged; // the values copied to the device ahead of a gather
    private MemoryScope stagedScope;
    private Backend.HostCopy staging;

    HostStaging(Backend backend, int shardNumel) {
        this.backend = backend;
        this.shardNumel = shardNumel;
        this.values = backend.allocateHost(shardNumel);
    }

    /** The values (shardNumel floats of host memory). */
    MemorySegment segment() {
        return values;
    }

    /** Sets the first {@code floats.length} values (the rest stays as it is). */
    void load(float[] floats) {
        MemorySegment.copy(floats, 0, values, ValueLayout.JAVA_FLOAT, 0, floats.length);
    }

    /** The values as an array (shardNumel floats). */
    float[] toArray() {
        return values.asSlice(0, 4L * shardNumel).toArray(ValueLayout.JAVA_FLOAT);
    }

    /** Starts copying the values to the device for the next gather, unless on their way already. */
    void startCopy() {
        if (staged != null) {
            return;
        }
        stagedScope = backend.newScope();
        try (var entered = stagedScope.enter()) {
            staged = backend.allocateForWrite(DType.F32, shardNumel);
            staging = backend.copyFromHost(values, staged);
        }
    }

    /** The copy on the device, which the compute stream waits for; valid until {@link #release}. */
    Tensor onDevice() {
        startCopy(); // unless the engine started it a unit ahead
        staging.await(); // the compute stream, and the collective queued after it, wait for the copy
        return staged;
    }

    /** Frees the copy on the device once it and anything queued before are done. */
    void release() {
        if (stagedScope != null) {
            staging.await(); // a copy still on its way must land before its buffer can be reused
            stagedScope.close();
        }
        staged = null;
        stagedScope = null;
        staging = null;
    }

    /** A copy of the values on the device, in the current scope, which the compute stream waits for. */
    Tensor copyInScope() {
        Tensor copy = backend.allocateForWrite(DType.F32, shardNumel);
        backend.copyFromHost(values, copy).await();
        return copy;
    }
}
