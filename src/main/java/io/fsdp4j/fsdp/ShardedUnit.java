package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.config.Precision;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;

/**
 * One unit's flat buffer as one rank holds it. The buffer is padded at its end to a multiple of the shard
 * group's size S; rank s of the group owns elements [s * shardNumel, (s+1) * shardNumel). Lifetimes:
 * <ul>
 *   <li>the shard: for the whole job, held by a {@link ShardStorage} (fp32 master and gradient shards on the device
 *       or in host memory, or a frozen shard with no gradient);</li>
 *   <li>the gathered full parameters: from {@link #gather} until {@link #free};</li>
 *   <li>the full-size gradient accumulator: from the unit's first backward until {@link #reduceGradients},
 *       so micro-batches accumulate without communication.</li>
 * </ul>
 * With a shard group of one rank (no_shard, or a single rank) and the shard on the device, the shard is the whole
 * unit: the gather is the (rounded) shard itself and backward accumulates straight into the gradient shard.
 */
public final class ShardedUnit implements FsdpUnit {
    private final UnitLayout layout;
    private final Backend backend;
    private final ProcessGroup shardGroup;
    private final ProcessGroup replicateGroup;
    private final long paddedNumel;
    private final int shardNumel;
    private final long shardStart;
    private final ShardStorage storage;
    private Tensor full;
    private MemoryScope fullScope;
    private ProcessGroup.Pending gathering;
    private Tensor fullGrad;
    private MemoryScope fullGradScope;
    private Tensor reducing;
    private ProcessGroup.Pending reduction;

    /** Which {@link ShardStorage} holds a unit's shard. */
    public sealed interface Holding {
        /**
         * fp32 master and gradient shards on the device, and a copy of the master in {@code keptCopy} (bf16, fp16)
         * that the gathers send, unless null ({@code fsdp.param_copy}).
         */
        record Device(DType keptCopy) implements Holding {}

        /** fp32 master and gradient shards in host memory ({@code fsdp.cpu_offload}). */
        record Host() implements Holding {}

        /** The parameters only, frozen, in {@code dtype} on the device. */
        record Frozen(DType dtype) implements Holding {}

        /** The parameters only, frozen, in fp32 in host memory (forwards only, {@code fsdp.cpu_offload}). */
        record FrozenInHost() implements Holding {}

        /** Device or host, as {@code fsdp.cpu_offload} says, with no kept copy. */
        public static Holding training(boolean offload) {
            return offload ? new Host() : new Device(null);
        }

        /** Device or host, as the policy says, with the kept copy it asks for on the device. */
        public static Holding training(FsdpPolicy policy) {
            return policy.cpuOffload() ? new Host() : new Device(policy.keptCopyDtype());
        }
    }

    public ShardedUnit(UnitLayout layout, Backend backend, ProcessGroup shardGroup, ProcessGroup replicateGroup) {
        this(layout, backend, shardGroup, replicateGroup, false);
    }

    /** @param offload whether the master and gradient shards live in host memory */
    public ShardedUnit(UnitLayout layout, Backend backend, ProcessGroup shardGroup, ProcessGroup replicateGroup,
                       boolean offload) {
        this(layout, backend, shardGroup, replicateGroup, Holding.training(offload));
    }

    public ShardedUnit(UnitLayout layout, Backend backend, ProcessGroup shardGroup, ProcessGroup replicateGroup,
                       Holding holding) {
        this.layout = layout;
        this.backend = backend;
        this.shardGroup = shardGroup;
        this.replicateGroup = replicateGroup;
        int groupSize = shardGroup.size();
        this.shardNumel = Math.toIntExact((layout.numel() + groupSize - 1) / groupSize);
        this.paddedNumel = (long) shardNumel * groupSize;
        this.shardStart = (long) shardGroup.rank() * shardNumel;
        this.storage = switch (holding) {
            case Holding.Device d -> new DeviceShards(backend, layout, shardNumel, shardStart, d.keptCopy());
            case Holding.Host h -> new HostShards(backend, layout, shardNumel, shardStart);
            case Holding.Frozen f -> new FrozenShard(backend, layout, shardNumel, f.dtype());
            case Holding.FrozenInHost f -> new FrozenHostShard(backend, shardNumel);
        };
    }

    @Override
    public UnitLayout layout() {
        return layout;
    }

    /** What holds this rank's shard. */
    public ShardStorage storage() {
        return storage;
    }

    /** Whether the shard lives in host memory ({@code fsdp.cpu_offload}). */
    public boolean offloaded() {
        return storage.inHostMemory();
    }

    /** Whether the unit trains (has master weights and a gradient), and not frozen. */
    @Override
    public boolean trains() {
        return storage instanceof MasterShards;
    }

    /** The master and gradient shards the optimizer updates; the unit must train. */
    @Override
    public MasterShards trainable() {
        if (storage instanceof MasterShards m) {
            return m;
        }
        throw new IllegalStateException("unit " + layout.name() + " is frozen: it has no master weights or gradient");
    }

    /**
     * fp32 master weights of this rank's shard, on the device (not offloaded). Written only through
     * {@link #loadMaster} and the optimizer, which keep a kept copy ({@code fsdp.param_copy}) in step.
     */
    public Tensor master() {
        return device().master();
    }

    /** Reduced gradient of this rank's shard (summed over micro-batches and ranks), on the device (not offloaded). */
    public Tensor grad() {
        return device().grad();
    }

    private DeviceShards device() {
        if (storage instanceof DeviceShards d) {
            return d;
        }
        throw new IllegalStateException("unit " + layout.name() + " holds no fp32 shards on the device ("
                + storage.getClass().getSimpleName() + ")");
    }

    /** A shard group of one rank, the shard on the device: the shard is the whole unit. */
    private boolean unsharded() {
        return shardGroup.size() == 1 && !storage.inHostMemory();
    }

    /** Sets the shard: its first values.length elements (the rest stays as it is). */
    public void loadMaster(float[] values) {
        storage.load(values);
    }

    /** The shard's values (shardNumel floats), wherever it lives. */
    public float[] masterValues() {
        return storage.values();
    }

    /** The shard on the device in fp32: itself, or a copy in the current scope. */
    public Tensor masterOnDevice() {
        return storage.fp32OnDevice();
    }

    /** Squared norm of the gradient shard, accumulated in double. */
    public double gradSumOfSquares() {
        return trainable().gradSumOfSquares();
    }

    /** Multiplies the gradient shard by {@code factor} (clipping). */
    public void scaleGrad(float factor) {
        trainable().scaleGrad(factor);
    }

    /**
     * Offloaded: starts copying the master shard to the device for the next gather, without waiting (the engine
     * calls it one unit ahead). Does nothing when the unit is not offloaded, gathered already, or on its way.
     */
    @Override
    public void startHostCopy() {
        if (fullScope == null) {
            storage.startHostCopy();
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

    /** Whether the full parameters are held (gathered, or on their way). */
    @Override
    public boolean isGathered() {
        return full != null;
    }

    /**
     * Starts gathering the unit's full parameters (in paramDtype) without waiting for them, so that the gather
     * overlaps with the computation queued before the unit is needed: the prefetch. Does nothing if they are
     * gathered or on their way.
     */
    @Override
    public void startGather(Precision paramDtype) {
        if (fullScope != null) {
            return;
        }
        Tensor send = storage.gatherSource();
        fullScope = backend.newScope();
        try (var entered = fullScope.enter()) {
            if (paramDtype.isHalf() && send.dtype() != paramDtype.dtype()) {
                Tensor rounded = backend.allocateForWrite(paramDtype.dtype(), shardNumel);
                backend.copy(send, rounded); // round the master weights to bf16 (fp16) before they travel
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
    @Override
    public Tensor gather(Precision paramDtype) {
        startGather(paramDtype);
        if (gathering != null) {
            gathering.await();
            gathering = null;
            storage.releaseStaged(); // the gather has read it
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
    @Override
    public void free() {
        if (gathering != null) {
            gathering.await();
            gathering = null;
        }
        if (fullScope != null) {
            fullScope.close();
        }
        storage.releaseStaged();
        full = null;
        fullScope = null;
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
    @Override
    public GradTarget blockGradTarget() {
        trainable();
        if (unsharded()) {
            DeviceShards shards = device();
            Tensor zeroed = shards.takeZeroed(); // written whole by this backward
            return zeroed != null ? new GradTarget(zeroed, false) : new GradTarget(shards.grad(), true);
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
    @Override
    public Tensor gradAccumulator() {
        trainable();
        if (unsharded()) {
            return device().grad();
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
    @Override
    public void startReduction(Precision reduceDtype) {
        MasterShards shards = trainable();
        shards.releaseReducedGradient();
        if (unsharded()) {
            startReplicaReduction(reduceDtype);
            return;
        }
        Tensor send = gradAccumulator();
        try (var entered = fullGradScope.enter()) {
            if (reduceDtype.isHalf()) {
                Tensor rounded = backend.allocateForWrite(reduceDtype.dtype(), Math.toIntExact(paddedNumel));
                backend.copy(send, rounded);
                send = rounded;
            }
            Tensor zeroed = send.dtype() == DType.F32 && shards instanceof DeviceShards d ? d.takeZeroed() : null;
            // 0 + reduced = reduced: a zeroed gradient shard is written in place
            reducing = zeroed != null ? zeroed : backend.allocateForWrite(send.dtype(), shardNumel);
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
        Tensor summed = device().grad();
        if (!reduceDtype.isHalf()) {
            if (replicateGroup.size() > 1) {
                reduction = replicateGroup.allReduceAsync(summed);
            }
            return;
        }
        fullGradScope = backend.newScope();
        try (var entered = fullGradScope.enter()) {
            reducing = backend.allocateForWrite(reduceDtype.dtype(), shardNumel);
            backend.copy(summed, reducing);
        }
        if (replicateGroup.size() > 1) {
            reduction = replicateGroup.allReduceAsync(reducing);
        } else {
            finishReduction();
        }
    }

    /**
     * Waits for the reduction and hands the reduced shard to the storage (unsharded: the reduced local sum replaces
     * the gradient shard; else it is added to it, or copied to host memory), which frees the full-size buffers.
     */
    @Override
    public void finishReduction() {
        if (reduction != null) {
            reduction.await();
            reduction = null;
        }
        if (reducing == null) { // nothing on its way, or reduced in place in the gradient shard (unsharded, fp32)
            return;
        }
        if (unsharded()) {
            device().replaceWithReduced(reducing, fullGradScope);
        } else {
            trainable().receiveReduced(reducing, fullGradScope);
        }
        reducing = null;
        fullGrad = null;
        fullGradScope = null;
    }

    /**
     * Offloaded: orders the compute stream after the copy of the reduced gradient shard to the host and frees the
     * device buffers it reads. Nothing to do otherwise (or twice).
     */
    @Override
    public void releaseReducedGradient() {
        trainable().releaseReducedGradient();
    }

    /** Reduces the accumulated gradient into this rank's shard now (start, finish and release). */
    @Override
    public void reduceGradients(Precision reduceDtype) {
        startReduction(reduceDtype);
        finishReduction();
        releaseReducedGradient();
    }

    /**
     * Starts a step: the gradient shard is zero until the step's reduction (on the device, only marked zero;
     * offloaded, the step's one reduction overwrites the host shard). Nothing for a frozen unit.
     */
    @Override
    public void zeroGrad() {
        if (storage instanceof MasterShards shards) {
            shards.zeroGrad();
        }
    }

    @Override
    public long paramBytes() {
        return storage.paramBytes();
    }

    @Override
    public long gradBytes() {
        return storage.gradBytes();
    }

    @Override
    public float[] fullParameters() {
        try (MemoryScope scope = backend.newScope(); var entered = scope.enter()) {
            Tensor all = backend.allocate(DType.F32, Math.toIntExact(paddedNumel));
            shardGroup.allGather(storage.fp32OnDevice(), all);
            return java.util.Arrays.copyOf(backend.toFloats(all), Math.toIntExact(layout.numel()));
        }
    }
}
