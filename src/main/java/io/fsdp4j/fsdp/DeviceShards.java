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
 *
 * <p>With a kept copy ({@code fsdp.param_copy: kept}) the master shard also lives rounded to bf16 or fp16, and that
 * copy is what gathers send: the optimizer writes it as it updates the master ({@link OnDevice#keptCopy}), and a
 * {@link #load} marks it stale, rounded again at the next gather. Its values are the master's rounded to nearest
 * even, as a rounding at each gather makes them.
 */
public final class DeviceShards extends MasterShards {
    private final Tensor master;
    private final Tensor grad;
    /** The master rounded for the gathers, or null (rounded at each gather). */
    private final Tensor keptCopy;
    /** The gradient shard holds zeros that have not been written yet. */
    private boolean gradIsZero;
    /** The master was written since the kept copy was last rounded from it (by a load). */
    private boolean keptCopyStale = true;

    /** @param keptCopy the type of a copy of the master kept for the gathers (bf16, fp16), or null for none */
    DeviceShards(Backend backend, UnitLayout layout, int shardNumel, long shardStart, DType keptCopy) {
        super(backend, layout, shardNumel, shardStart);
        try {
            this.master = backend.allocate(DType.F32, shardNumel);
            this.grad = backend.allocate(DType.F32, shardNumel);
        } catch (OutOfDeviceMemory e) {
            throw e.naming("the fp32 master and gradient shards of unit " + layout.name());
        }
        try {
            this.keptCopy = keptCopy == null ? null : backend.allocate(keptCopy, shardNumel);
        } catch (OutOfDeviceMemory e) {
            throw e.naming("the " + keptCopy + " copy of unit " + layout.name() + "'s master shard (fsdp.param_copy "
                    + "kept; per_gather needs none)");
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
        return new OnDevice(master, grad(), keptCopy);
    }

    @Override
    public void load(float[] values) {
        try (var staging = backend.newScope(); var entered = staging.enter()) {
            backend.copy(backend.upload(values, values.length), master.view(0, values.length));
        }
        keptCopyStale = true;
    }

    @Override
    public float[] values() {
        return backend.toFloats(master);
    }

    /** The kept copy, rounded from the master first if a load changed the master since; else the master. */
    @Override
    public Tensor gatherSource() {
        if (keptCopy == null) {
            return master;
        }
        if (keptCopyStale) {
            backend.copy(master, keptCopy);
            keptCopyStale = false;
        }
        return keptCopy;
    }

    @Override
    public long paramBytes() {
        return super.paramBytes() + (keptCopy == null ? 0 : keptCopy.numel() * keptCopy.dtype().bytes());
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
