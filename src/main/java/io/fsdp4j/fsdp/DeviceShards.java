package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.backend.OutOfDeviceMemory;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;

/**
 * fp32 master and gradient shards on the device. No work that changes no number: a zeroed gradient shard is only
 * marked zero ({@link #zeroGrad}), written with zeros when first read ({@link #grad}), and a reduction or a backward
 * that writes it whole takes it as it is ({@link #takeZeroed}).
 */
public final class DeviceShards extends MasterShards {
    private final Tensor master;
    private final Tensor grad;
    /** The gradient shard holds zeros that have not been written yet. */
    private boolean gradIsZero;

    DeviceShards(Backend backend, UnitLayout layout, int shardNumel, long shardStart) {
        super(backend, layout, shardNumel, shardStart);
        try {
            this.master = backend.allocate(DType.F32, shardNumel);
            this.grad = backend.allocate(DType.F32, shardNumel);
        } catch (OutOfDeviceMemory e) {
            throw e.naming("the fp32 master and gradient shards of unit " + layout.name());
        }
    }

    /** fp32 master weights of this rank's shard. */
    public Tensor master() {
        return master;
    }

    /** Reduced gradient of this rank's shard (summed over micro-batches and ranks). */
    public Tensor grad() {
        if (gradIsZero) { // zeroed since the last step and not written into: write the zeros now
            backend.fill(grad, 0f);
            gradIsZero = false;
        }
        return grad;
    }

    /**
     * The gradient shard, if it is still marked zero, for a writer that overwrites it whole (then no longer
     * marked); else null.
     */
    Tensor takeZeroed() {
        if (!gradIsZero) {
            return null;
        }
        gradIsZero = false;
        return grad;
    }

    /** Unsharded, bf16 reduction: the reduced local sum replaces the gradient shard. */
    void replaceWithReduced(Tensor reduced, MemoryScope buffers) {
        backend.copy(reduced, grad);
        buffers.close();
    }

    @Override
    public boolean inHostMemory() {
        return false;
    }

    @Override
    public Buffers buffers() {
        return new OnDevice(master, grad());
    }

    @Override
    public void load(float[] values) {
        try (var staging = backend.newScope(); var entered = staging.enter()) {
            backend.copy(backend.upload(values, values.length), master.view(0, values.length));
        }
    }

    @Override
    public float[] values() {
        return backend.toFloats(master);
    }

    @Override
    public Tensor gatherSource() {
        return master;
    }

    @Override
    public Tensor fp32OnDevice() {
        return master;
    }

    @Override
    void zeroGrad() {
        gradIsZero = true;
    }

    @Override
    void receiveReduced(Tensor reduced, MemoryScope buffers) {
        if (reduced != grad) { // else reduced in place
            backend.add(grad(), reduced);
        }
        buffers.close();
    }

    @Override
    double gradSumOfSquares() {
        return backend.sumOfSquares(grad());
    }

    @Override
    void scaleGrad(float factor) {
        backend.scale(grad(), factor);
    }
}
