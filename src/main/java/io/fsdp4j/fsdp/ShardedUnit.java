package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.config.Precision;
import io.fsdp4j.dist.ProcessGroup;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * One unit's flat buffer as one rank holds it. The buffer is padded at its end to a multiple of the shard
 * group's size S; rank s of the group owns elements [s * shardNumel, (s+1) * shardNumel). Lifetimes:
 * <ul>
 *   <li>master (fp32) and grad (fp32) shards: for the whole job;</li>
 *   <li>the gathered full parameters: from {@link #gather} until {@link #free};</li>
 *   <li>the full-size gradient accumulator: from the unit's first backward until {@link #reduceGradients},
 *       so micro-batches accumulate without communication.</li>
 * </ul>
 */
public final class ShardedUnit {
    private final UnitLayout layout;
    private final Backend backend;
    private final ProcessGroup shardGroup;
    private final ProcessGroup replicateGroup;
    private final long paddedNumel;
    private final int shardNumel;
    private final long shardStart;
    private final Tensor master;
    private final Tensor grad;
    private Tensor full;
    private MemoryScope fullScope;
    private Tensor fullGrad;
    private MemoryScope fullGradScope;

    public ShardedUnit(UnitLayout layout, Backend backend, ProcessGroup shardGroup, ProcessGroup replicateGroup) {
        this.layout = layout;
        this.backend = backend;
        this.shardGroup = shardGroup;
        this.replicateGroup = replicateGroup;
        int groupSize = shardGroup.size();
        this.shardNumel = Math.toIntExact((layout.numel() + groupSize - 1) / groupSize);
        this.paddedNumel = (long) shardNumel * groupSize;
        this.shardStart = (long) shardGroup.rank() * shardNumel;
        this.master = backend.allocate(DType.F32, shardNumel);
        this.grad = backend.allocate(DType.F32, shardNumel);
    }

    public UnitLayout layout() {
        return layout;
    }

    /** fp32 master weights of this rank's shard. */
    public Tensor master() {
        return master;
    }

    /** Reduced gradient of this rank's shard (summed over micro-batches and ranks). */
    public Tensor grad() {
        return grad;
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

    public boolean isGathered() {
        return full != null;
    }

    /** The unit's full parameters in fp32 for compute, all-gathered across the shard group in paramDtype. */
    public Tensor gather(Precision paramDtype) {
        if (full != null) {
            return full;
        }
        fullScope = backend.newScope();
        try (var entered = fullScope.enter()) {
            Tensor send = master;
            if (paramDtype == Precision.BF16) {
                send = backend.allocate(DType.BF16, shardNumel);
                backend.copy(master, send); // round the master weights to bf16 before they travel
            }
            Tensor gathered = backend.allocate(send.dtype(), Math.toIntExact(paddedNumel));
            shardGroup.allGather(send, gathered);
            if (!backend.computesIn(gathered.dtype())) {
                Tensor widened = backend.allocate(DType.F32, Math.toIntExact(paddedNumel));
                backend.copy(gathered, widened);
                gathered = widened;
            }
            full = gathered;
        }
        return full;
    }

    /** Frees the gathered parameters. */
    public void free() {
        if (fullScope != null) {
            fullScope.close();
        }
        full = null;
        fullScope = null;
    }

    /** The full-size fp32 gradient buffer that backward accumulates into, zeroed when first asked for. */
    public Tensor gradAccumulator() {
        if (fullGrad == null) {
            fullGradScope = backend.newScope();
            try (var entered = fullGradScope.enter()) {
                fullGrad = backend.allocate(DType.F32, Math.toIntExact(paddedNumel));
            }
        }
        return fullGrad;
    }

    /**
     * Reduce-scatters the accumulated gradient across the shard group (in reduceDtype), all-reduces it across
     * replicas (hybrid and no-shard strategies), adds it to this rank's gradient shard and drops the accumulator.
     */
    public void reduceGradients(Precision reduceDtype) {
        Tensor send = gradAccumulator();
        try (var entered = fullGradScope.enter()) {
            if (reduceDtype == Precision.BF16) {
                Tensor rounded = backend.allocate(DType.BF16, Math.toIntExact(paddedNumel));
                backend.copy(send, rounded);
                send = rounded;
            }
            Tensor reduced = backend.allocate(send.dtype(), shardNumel);
            shardGroup.reduceScatter(send, reduced);
            if (replicateGroup.size() > 1) {
                replicateGroup.allReduce(reduced);
            }
            backend.add(grad, reduced);
        }
        fullGradScope.close();
        fullGrad = null;
        fullGradScope = null;
    }

    public void zeroGrad() {
        backend.fill(grad, 0f);
    }
}
