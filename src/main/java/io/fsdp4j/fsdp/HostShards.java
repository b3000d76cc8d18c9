package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.backend.cpu.HostFloats;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.MemorySegment;

/**
 * fp32 master and gradient shards in host memory ({@code fsdp.cpu_offload}; page-locked on CUDA). Before a gather
 * the master shard is copied to a device buffer a unit ahead ({@link HostStaging}). The reduced gradient shard is
 * copied back into the host gradient shard on the device-to-host stream; the host waits for those copies once per
 * step, before the host optimizer reads them ({@link Backend#waitForHostCopies}). A step reduces each unit once (the
 * engine reduces after the last micro-batch only), so the copy is the shard's gradient for the step: the host shard
 * is never zeroed.
 */
public final class HostShards extends MasterShards {
    private final HostStaging master;
    private final MemorySegment grad;
    /** Whether this step's reduced gradient has been copied into {@link #grad}. */
    private boolean reducedThisStep;
    private Backend.HostCopy copyingBack; // the reduced gradient shard on its way to host memory
    private MemoryScope copyBackScope; // the device buffers that copy reads, freed by releaseReducedGradient

    HostShards(Backend backend, UnitLayout layout, int shardNumel, long shardStart) {
        super(backend, layout, shardNumel, shardStart);
        this.master = new HostStaging(backend, shardNumel);
        this.grad = backend.allocateHost(shardNumel);
    }

    /** The fp32 master shard (shardNumel floats of host memory). */
    public MemorySegment master() {
        return master.segment();
    }

    /** The gradient shard (shardNumel floats of host memory), complete after the step's host wait. */
    public MemorySegment grad() {
        return grad;
    }

    @Override
    public boolean inHostMemory() {
        return true;
    }

    @Override
    public Buffers buffers() {
        return new InHost(master.segment(), grad);
    }

    @Override
    public void load(float[] values) {
        master.load(values);
    }

    @Override
    public float[] values() {
        return master.toArray();
    }

    @Override
    public void startHostCopy() {
        master.startCopy();
    }

    @Override
    public Tensor gatherSource() {
        return master.onDevice();
    }

    @Override
    public void releaseStaged() {
        master.release();
    }

    @Override
    public Tensor fp32OnDevice() {
        return master.copyInScope();
    }

    @Override
    void zeroGrad() {
        // no fill: the step's one reduction overwrites the whole host shard (and gradSumOfSquares, which precedes
        // any use, checks that it happened)
        releaseReducedGradient(); // normally done already by the engine
        reducedThisStep = false;
    }

    /**
     * The shard's gradient goes to host memory; its buffers stay until {@link #releaseReducedGradient}, which the
     * engine calls one unit later, so that the copy overlaps the next block's backward.
     */
    @Override
    void receiveReduced(Tensor reduced, MemoryScope buffers) {
        if (reducedThisStep) {
            throw new IllegalStateException("unit " + layout.name() + " reduced twice in one step");
        }
        reducedThisStep = true;
        if (reduced.dtype() != DType.F32) { // reduced in bf16: widened on the device, as add() does
            try (var entered = buffers.enter()) {
                Tensor widened = backend.allocate(DType.F32, shardNumel);
                backend.copy(reduced, widened);
                reduced = widened;
            }
        }
        copyingBack = backend.copyToHost(reduced, grad);
        copyBackScope = buffers;
    }

    @Override
    void releaseReducedGradient() {
        if (copyBackScope != null) {
            copyingBack.await();
            copyBackScope.close();
        }
        copyingBack = null;
        copyBackScope = null;
    }

    @Override
    double gradSumOfSquares() {
        if (!reducedThisStep) {
            throw new IllegalStateException("unit " + layout.name() + " has no gradient in host memory for this step");
        }
        return HostFloats.sumOfSquares(grad, 0, shardNumel);
    }

    @Override
    void scaleGrad(float factor) {
        HostFloats.scale(grad, 0, shardNumel, factor);
    }
}
