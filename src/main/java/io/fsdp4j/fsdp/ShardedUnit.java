package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.backend.OutOfDeviceMemory;
import io.fsdp4j.backend.cpu.HostFloats;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.config.Precision;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * One unit's flat buffer as one rank holds it. The buffer is padded at its end to a multiple of the shard
 * group's size S; rank s of the group owns elements [s * shardNumel, (s+1) * shardNumel). Lifetimes:
 * <ul>
 *   <li>master (fp32) and grad (fp32) shards: for the whole job, on the device, or in host memory when offloaded
 *       ({@code fsdp.cpu_offload}; see below);</li>
 *   <li>the gathered full parameters: from {@link #gather} until {@link #free};</li>
 *   <li>the full-size gradient accumulator: from the unit's first backward until {@link #reduceGradients},
 *       so micro-batches accumulate without communication.</li>
 * </ul>
 * No work that changes no number: a zeroed gradient shard is only marked zero, and the reduction writes into it
 * directly instead of into a temporary that is then added; with a shard group of one rank (no_shard, or a single
 * rank) the shard is the whole unit, so the gather is the (rounded) master itself and backward accumulates straight
 * into the gradient shard.
 *
 * <p>Offloaded ({@code fsdp.cpu_offload}): the master and gradient shards live in host memory (page-locked on CUDA).
 * Before a gather, the master shard is copied to a device buffer on the backend's host-to-device stream
 * ({@link #startHostCopy}, which the engine calls one unit ahead of the gather, so that the copy overlaps compute);
 * the gather's compute waits for it by an event, not the host. After the reduce-scatter, the reduced shard is copied
 * back into the host gradient shard on the device-to-host stream; the host waits for those copies once per step,
 * before the host optimizer reads them ({@link Backend#waitForHostCopies}). A step reduces each unit once (the
 * engine reduces after the last micro-batch only), so the copy is the shard's gradient for the step.
 */
public final class ShardedUnit {
    private final UnitLayout layout;
    private final Backend backend;
    private final ProcessGroup shardGroup;
    private final ProcessGroup replicateGroup;
    private final long paddedNumel;
    private final int shardNumel;
    private final long shardStart;
    private final Tensor master; // null when offloaded
    private final Tensor grad;
    private final MemorySegment hostMaster; // null unless offloaded
    private final MemorySegment hostGrad;
    private boolean reducedThisStep;
    private Tensor staged; // the master shard copied to the device ahead of a gather (offloaded only)
    private MemoryScope stagedScope;
    private Backend.HostCopy staging;
    private Backend.HostCopy copyingBack; // the reduced gradient shard on its way to host memory (offloaded only)
    private MemoryScope copyBackScope; // the device buffers that copy reads, freed by releaseReducedGradient
    private Tensor full;
    private MemoryScope fullScope;
    private ProcessGroup.Pending gathering;
    private Tensor fullGrad;
    private MemoryScope fullGradScope;
    private Tensor reducing;
    private ProcessGroup.Pending reduction;
    /** The gradient shard holds zeros that have not been written yet (see {@link #grad}). */
    private boolean gradIsZero;

    public ShardedUnit(UnitLayout layout, Backend backend, ProcessGroup shardGroup, ProcessGroup replicateGroup) {
        this(layout, backend, shardGroup, replicateGroup, false);
    }

    /** @param offload whether the master and gradient shards live in host memory */
    public ShardedUnit(UnitLayout layout, Backend backend, ProcessGroup shardGroup, ProcessGroup replicateGroup,
                       boolean offload) {
        this.layout = layout;
        this.backend = backend;
        this.shardGroup = shardGroup;
        this.replicateGroup = replicateGroup;
        int groupSize = shardGroup.size();
        this.shardNumel = Math.toIntExact((layout.numel() + groupSize - 1) / groupSize);
        this.paddedNumel = (long) shardNumel * groupSize;
        this.shardStart = (long) shardGroup.rank() * shardNumel;
        if (offload) {
            this.master = null;
            this.grad = null;
            this.hostMaster = backend.allocateHost(shardNumel);
            this.hostGrad = backend.allocateHost(shardNumel);
        } else {
            try {
                this.master = backend.allocate(DType.F32, shardNumel);
                this.grad = backend.allocate(DType.F32, shardNumel);
            } catch (OutOfDeviceMemory e) {
                throw e.naming("the fp32 master and gradient shards of unit " + layout.name());
            }
            this.hostMaster = null;
            this.hostGrad = null;
        }
    }

    /** Whether the master and gradient shards live in host memory ({@code fsdp.cpu_offload}). */
    public boolean offloaded() {
        return hostMaster != null;
    }

    public UnitLayout layout() {
        return layout;
    }

    /** fp32 master weights of this rank's shard, on the device (not offloaded). */
    public Tensor master() {
        requireOnDevice();
        return master;
    }

    /** Reduced gradient of this rank's shard (summed over micro-batches and ranks), on the device (not offloaded). */
    public Tensor grad() {
        requireOnDevice();
        if (gradIsZero) { // zeroed since the last step and not reduced into: write the zeros now
            backend.fill(grad, 0f);
            gradIsZero = false;
        }
        return grad;
    }

    /**
     * A shard group of one rank, not offloaded: the shard is the whole unit and nothing needs to travel inside the
     * group.
     */
    private boolean unsharded() {
        return shardGroup.size() == 1 && !offloaded();
    }

    /** The offloaded fp32 master shard (shardNumel floats of host memory). */
    public MemorySegment hostMaster() {
        requireOffloaded();
        return hostMaster;
    }

    /** The offloaded gradient shard (shardNumel floats of host memory), complete after the step's host wait. */
    public MemorySegment hostGrad() {
        requireOffloaded();
        return hostGrad;
    }

    private void requireOnDevice() {
        if (offloaded()) {
            throw new IllegalStateException("unit " + layout.name() + " is offloaded: its shards are in host memory");
        }
    }

    private void requireOffloaded() {
        if (!offloaded()) {
            throw new IllegalStateException("unit " + layout.name() + " is not offloaded");
        }
    }

    /** Sets the master shard: its first values.length elements (the rest stays as it is). */
    public void loadMaster(float[] values) {
        if (offloaded()) {
            MemorySegment.copy(values, 0, hostMaster, ValueLayout.JAVA_FLOAT, 0, values.length);
            return;
        }
        try (var staging = backend.newScope(); var entered = staging.enter()) {
            backend.copy(backend.upload(values, values.length), master.view(0, values.length));
        }
    }

    /** The master shard's values (shardNumel floats), wherever it lives. */
    public float[] masterValues() {
        return offloaded() ? hostMaster.asSlice(0, 4L * shardNumel).toArray(ValueLayout.JAVA_FLOAT)
                : backend.toFloats(master);
    }

    /** The master shard on the device: itself, or (offloaded) a copy in the current scope. */
    public Tensor masterOnDevice() {
        if (!offloaded()) {
            return master;
        }
        Tensor copy = backend.allocateForWrite(DType.F32, shardNumel);
        backend.copyFromHost(hostMaster, copy).await();
        return copy;
    }

    /** Squared norm of the gradient shard, accumulated in double. */
    public double gradSumOfSquares() {
        if (offloaded() && !reducedThisStep) {
            throw new IllegalStateException("unit " + layout.name() + " has no gradient in host memory for this step");
        }
        return offloaded() ? HostFloats.sumOfSquares(hostGrad, 0, shardNumel) : backend.sumOfSquares(grad());
    }

    /** Multiplies the gradient shard by {@code factor} (clipping). */
    public void scaleGrad(float factor) {
        if (offloaded()) {
            HostFloats.scale(hostGrad, 0, shardNumel, factor);
        } else {
            backend.scale(grad(), factor);
        }
    }

    /**
     * Offloaded: starts copying the master shard to the device for the next gather, without waiting (the engine
     * calls it one unit ahead). Does nothing when the unit is not offloaded, gathered already, or on its way.
     */
    public void startHostCopy() {
        if (!offloaded() || fullScope != null || staged != null) {
            return;
        }
        stagedScope = backend.newScope();
        try (var entered = stagedScope.enter()) {
            staged = backend.allocateForWrite(DType.F32, shardNumel);
            staging = backend.copyFromHost(hostMaster, staged);
        }
    }

    public int shardNumel() {
        return shardNumel;
    }

    /** First element of this rank's shard in the unit's flat buffer. */
    public long shardStart() {
        return shardStart;
    }

    public long paddedNumel() {
        return paddedNumel;
    }

    /** Elements of the shard that hold parameters (the rest is padding). */
    public int ownedParamElements() {
        return (int) Math.max(0, Math.min(shardNumel, layout.numel() - shardStart));
    }

    /** The pieces of parameters inside this rank's shard, in layout order. */
    public List<ShardSegment> segments() {
        List<ShardSegment> result = new ArrayList<>();
        long end = shardStart + shardNumel;
        for (ParamSpec p : layout.params()) {
            long from = Math.max(p.offset(), shardStart), to = Math.min(p.end(), end);
            if (from < to) {
                result.add(new ShardSegment(p, (int) (from - shardStart), (int) (to - from)));
            }
        }
        return result;
    }

    /** Whether the full parameters are held (gathered, or on their way). */
    public boolean isGathered() {
        return full != null;
    }

    /**
     * Starts gathering the unit's full parameters (in paramDtype) without waiting for them, so that the gather
     * overlaps with the computation queued before the unit is needed: the prefetch. Does nothing if they are
     * gathered or on their way.
     */
    public void startGather(Precision paramDtype) {
        if (fullScope != null) {
            return;
        }
        Tensor send = master;
        if (offloaded()) {
            startHostCopy(); // unless the engine started it a unit ahead
            staging.await(); // the compute stream, and the collective queued after it, wait for the copy
            send = staged;
        }
        fullScope = backend.newScope();
        try (var entered = fullScope.enter()) {
            if (paramDtype == Precision.BF16) {
                Tensor rounded = backend.allocateForWrite(DType.BF16, shardNumel);
                backend.copy(send, rounded); // round the master weights to bf16 before they travel
                send = rounded;
            }
            if (unsharded()) {
                full = send; // the shard is the whole unit (read only while computing)
                return;
            }
            full = backend.allocateForWrite(send.dtype(), Math.toIntExact(paddedNumel));
            gathering = shardGroup.allGatherAsync(send, full);
        }
    }

    /** The unit's full parameters for compute, gathered across the shard group in paramDtype. */
    public Tensor gather(Precision paramDtype) {
        startGather(paramDtype);
        if (gathering != null) {
            gathering.await();
            gathering = null;
            releaseStaged(); // the gather has read it
        }
        if (!backend.computesIn(full.dtype())) { // the CPU backend computes in fp32 only
            try (var entered = fullScope.enter()) {
                Tensor widened = backend.allocateForWrite(DType.F32, Math.toIntExact(paddedNumel));
                backend.copy(full, widened);
                full = widened;
            }
        }
        return full;
    }

    /** Frees the gathered parameters (after waiting for a gather still on its way). */
    public void free() {
        if (gathering != null) {
            gathering.await();
            gathering = null;
        }
        if (fullScope != null) {
            fullScope.close();
        }
        releaseStaged();
        full = null;
        fullScope = null;
    }

    /** Frees the device copy of an offloaded master shard, once the copy and anything queued before are done. */
    private void releaseStaged() {
        if (stagedScope != null) {
            staging.await(); // a copy still on its way must land before its buffer can be reused
            stagedScope.close();
        }
        staged = null;
        stagedScope = null;
        staging = null;
    }

    /**
     * Where a block's backward puts its gradients: the {@link #gradAccumulator} buffer, and whether to add to it.
     * The step's first backward into a buffer nobody has written gets {@code accumulate} false and writes every
     * element (the model's contract for a block), so the buffer is not zeroed first: a zeroed gradient shard
     * (unsharded) is handed over as it is, a new full-size accumulator is allocated without zeroing but for its
     * padding past the unit's parameters.
     */
    public record GradTarget(Tensor buffer, boolean accumulate) {}

    /** The gradient buffer of a block's backward and whether to add to it (see {@link GradTarget}). */
    public GradTarget blockGradTarget() {
        if (unsharded()) {
            if (gradIsZero) {
                gradIsZero = false; // written whole by this backward
                return new GradTarget(grad, false);
            }
            return new GradTarget(grad, true);
        }
        if (fullGrad == null) {
            newFullGrad(false);
            return new GradTarget(fullGrad, false);
        }
        return new GradTarget(fullGrad, true);
    }

    /** A new full-size fp32 accumulator for this step: zeroed, or with only its padding zeroed (it is reduced too). */
    private void newFullGrad(boolean zeroed) {
        fullGradScope = backend.newScope();
        try (var entered = fullGradScope.enter()) {
            int n = Math.toIntExact(paddedNumel);
            fullGrad = zeroed ? backend.allocate(DType.F32, n) : backend.allocateForWrite(DType.F32, n);
            if (!zeroed && paddedNumel > layout.numel()) {
                backend.fill(fullGrad.view(layout.numel(), Math.toIntExact(paddedNumel - layout.numel())), 0f);
            }
        }
    }

    /**
     * The full-size fp32 gradient buffer that backward accumulates into, zeroed when first asked for. Unsharded,
     * that is the gradient shard itself (the reduction then only crosses replicas).
     */
    public Tensor gradAccumulator() {
        if (unsharded()) {
            return grad();
        }
        if (fullGrad == null) {
            newFullGrad(true);
        }
        return fullGrad;
    }

    /**
     * Reduce-scatters the accumulated gradient across the shard group (in reduceDtype) and all-reduces it across
     * replicas (hybrid and no-shard strategies), without waiting: the reduction overlaps with the computation
     * queued after it until {@link #finishReduction}.
     */
    public void startReduction(Precision reduceDtype) {
        releaseReducedGradient();
        if (unsharded()) {
            startReplicaReduction(reduceDtype);
            return;
        }
        Tensor send = gradAccumulator();
        try (var entered = fullGradScope.enter()) {
            if (reduceDtype == Precision.BF16) {
                Tensor rounded = backend.allocateForWrite(DType.BF16, Math.toIntExact(paddedNumel));
                backend.copy(send, rounded);
                send = rounded;
            }
            if (gradIsZero && send.dtype() == DType.F32) { // 0 + reduced = reduced: write it in place
                gradIsZero = false;
                reducing = grad;
            } else {
                reducing = backend.allocateForWrite(send.dtype(), shardNumel);
            }
            reduction = shardGroup.reduceScatterAsync(send, reducing);
            if (replicateGroup.size() > 1) {
                reduction = replicateGroup.allReduceAsync(reducing); // queued after the reduce-scatter
            }
        }
    }

    /**
     * Unsharded: the micro-batches' gradients are already summed in the shard. In fp32 they are all-reduced across
     * the replicas (if any) in place. In bf16 they are rounded, all-reduced in bf16 (half the bytes) and widened
     * back into the shard by {@link #finishReduction}: the numbers of a bf16 reduction of a full-size accumulator.
     */
    private void startReplicaReduction(Precision reduceDtype) {
        Tensor summed = grad();
        if (reduceDtype != Precision.BF16) {
            if (replicateGroup.size() > 1) {
                reduction = replicateGroup.allReduceAsync(summed);
            }
            return;
        }
        fullGradScope = backend.newScope();
        try (var entered = fullGradScope.enter()) {
            reducing = backend.allocateForWrite(DType.BF16, shardNumel);
            backend.copy(summed, reducing);
        }
        if (replicateGroup.size() > 1) {
            reduction = replicateGroup.allReduceAsync(reducing);
        } else {
            widenReplicaReduction();
        }
    }

    /** Unsharded, bf16: the reduced gradient replaces the shard's local sum. */
    private void widenReplicaReduction() {
        backend.copy(reducing, grad);
        fullGradScope.close();
        reducing = null;
        fullGradScope = null;
    }

    /** Waits for the reduction, adds it to this rank's gradient shard and frees the full-size buffers. */
    public void finishReduction() {
        if (reduction == null) {
            return;
        }
        reduction.await();
        reduction = null;
        if (fullGradScope == null) { // unsharded, fp32: reduced in place
            return;
        }
        if (unsharded()) {
            widenReplicaReduction();
            return;
        }
        if (offloaded()) {
            if (reducedThisStep) {
                throw new IllegalStateException("unit " + layout.name() + " reduced twice in one step");
            }
            reducedThisStep = true;
            // the shard's gradient goes to host memory; its buffers stay until releaseReducedGradient, which the
            // engine calls one unit later, so that the copy overlaps the next block's backward
            Tensor reduced = reducing;
            if (reduced.dtype() != DType.F32) { // reduced in bf16: widened on the device, as add() does
                try (var entered = fullGradScope.enter()) {
                    reduced = backend.allocate(DType.F32, shardNumel);
                    backend.copy(reducing, reduced);
                }
            }
            copyingBack = backend.copyToHost(reduced, hostGrad);
            copyBackScope = fullGradScope;
        } else {
            if (reducing != grad) {
                backend.add(grad(), reducing);
            }
            fullGradScope.close();
        }
        reducing = null;
        fullGrad = null;
        fullGradScope = null;
    }

    /**
     * Offloaded: orders the compute stream after the copy of the reduced gradient shard to the host and frees the
     * device buffers it reads. Nothing to do otherwise (or twice).
     */
    public void releaseReducedGradient() {
        if (copyBackScope != null) {
            copyingBack.await();
            copyBackScope.close();
        }
        copyingBack = null;
        copyBackScope = null;
    }

    /** Reduces the accumulated gradient into this rank's shard now (start, finish and release). */
    public void reduceGradients(Precision reduceDtype) {
        startReduction(reduceDtype);
        finishReduction();
        releaseReducedGradient();
    }

    /** Starts a step: marks the gradient shard zero (written only if nothing is reduced into it first); offloaded, the step's reduction will overwrite the host shard. */
    public void zeroGrad() {
        if (offloaded()) {
            // no fill: the step's one reduction overwrites the whole host shard (and gradSumOfSquares, which
            // precedes any use, checks that it happened)
            releaseReducedGradient(); // normally done already by the engine
            reducedThisStep = false;
        } else {
            gradIsZero = true;
        }
    }
}
