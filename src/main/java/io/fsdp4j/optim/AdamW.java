package io.fsdp4j.optim;

import io.fsdp4j.backend.AdamWSegment;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.OutOfDeviceMemory;
import io.fsdp4j.config.DecayRule;
import io.fsdp4j.fsdp.ShardSegment;
import io.fsdp4j.fsdp.ShardedUnit;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * AdamW with PyTorch's semantics ({@code torch.optim.AdamW}: decoupled weight decay, bias-corrected moments),
 * run on each rank's fp32 master shards. The moments share the shards' layout. Which parameters decay is a
 * rule on their shape, never a list: with {@link DecayRule#MATRICES}, parameters of two or more dimensions
 * (linear weights, embeddings) decay and biases and norm weights do not.
 *
 * <p>Offloaded units ({@link ShardedUnit#offloaded}): the moments live in host memory beside the shards and the
 * update runs on the host, in parallel Java ({@link HostAdamW}), after the engine has waited for the gradient shards'
 * copies.
 */
public final class AdamW {
    private final Backend backend;
    private final List<ShardedUnit> units;
    private final List<Tensor> firstMoments = new ArrayList<>(); // per unit; null for an offloaded unit
    private final List<Tensor> secondMoments = new ArrayList<>();
    private final List<MemorySegment> hostFirstMoments = new ArrayList<>(); // per unit; null unless offloaded
    private final List<MemorySegment> hostSecondMoments = new ArrayList<>();
    private final List<List<AdamWSegment>> segments = new ArrayList<>(); // per unit: its parameters in its shard
    private final float beta1;
    private final float beta2;
    private final float eps;
    private final float weightDecay;
    private final DecayRule decayRule;
    private long step;

    public AdamW(Backend backend, List<ShardedUnit> units, float beta1, float beta2, float eps, float weightDecay,
                 DecayRule decayRule) {
        this.backend = backend;
        this.units = List.copyOf(units);
        this.beta1 = beta1;
        this.beta2 = beta2;
        this.eps = eps;
        this.weightDecay = weightDecay;
        this.decayRule = decayRule;
        for (ShardedUnit u : units) {
            segments.add(segmentsOf(u, decayRule));
            boolean host = u.offloaded();
            // moments never travel: plain native memory, not page-locked
            hostFirstMoments.add(host ? Arena.ofAuto().allocate(ValueLayout.JAVA_FLOAT, u.shardNumel()) : null);
            hostSecondMoments.add(host ? Arena.ofAuto().allocate(ValueLayout.JAVA_FLOAT, u.shardNumel()) : null);
            try {
                firstMoments.add(host ? null : backend.allocate(DType.F32, u.shardNumel()));
                secondMoments.add(host ? null : backend.allocate(DType.F32, u.shardNumel()));
            } catch (OutOfDeviceMemory e) {
                throw e.naming("the AdamW moments of unit " + u.layout().name());
            }
        }
    }

    /** Optimizer steps taken so far. */
    public long stepsTaken() {
        return step;
    }

    /** One update of every shard with the given learning rate. */
    public void step(float lr) {
        step(lr, 1f);
    }

    /**
     * One update of every shard with the given learning rate, the gradients multiplied by {@code gradScale} (the
     * clipping factor) as they are read: no separate pass over them on the device.
     */
    public void step(float lr, float gradScale) {
        step++;
        for (int i = 0; i < units.size(); i++) {
            ShardedUnit u = units.get(i);
            Tensor m = firstMoments.get(i), v = secondMoments.get(i);
            if (!u.offloaded()) { // every parameter of the unit in one call (one kernel on the GPU)
                backend.adamw(u.master(), u.grad(), m, v, segments.get(i), lr, beta1, beta2, eps, weightDecay, step,
                        gradScale);
                continue;
            }
            if (gradScale != 1f) {
                u.scaleGrad(gradScale); // host memory: one pass of parallel Java before the host update
            }
            for (AdamWSegment s : segments.get(i)) {
                HostAdamW.step(u.hostMaster(), u.hostGrad(), hostFirstMoments.get(i), hostSecondMoments.get(i),
                        s.offset(), s.length(), lr, beta1, beta2, eps, s.decays() ? weightDecay : 0f, step);
            }
        }
    }

    /** The pieces of parameters in a unit's shard, each decaying or not by the decay rule. */
    private static List<AdamWSegment> segmentsOf(ShardedUnit unit, DecayRule rule) {
        List<AdamWSegment> result = new ArrayList<>();
        for (ShardSegment s : unit.segments()) {
            boolean decays = switch (rule) {
                case MATRICES -> s.param().isMatrix();
                case ALL -> true;
            };
            result.add(new AdamWSegment(s.shardOffset(), s.length(), decays));
        }
        return List.copyOf(result);
    }

    /** The first moments (exp_avg) of unit {@code unit}'s shard (shardNumel values), wherever they live. */
    public float[] firstMomentValues(int unit) {
        return values(firstMoments.get(unit), hostFirstMoments.get(unit));
    }

    /** The second moments (exp_avg_sq) of unit {@code unit}'s shard (shardNumel values), wherever they live. */
    public float[] secondMomentValues(int unit) {
        return values(secondMoments.get(unit), hostSecondMoments.get(unit));
    }

    private float[] values(Tensor onDevice, MemorySegment onHost) {
        return onHost != null ? onHost.toArray(ValueLayout.JAVA_FLOAT) : backend.toFloats(onDevice);
    }

    /** Restores the step count and the moments of this rank's shards (from a checkpoint). */
    public void restore(long stepsTaken, io.fsdp4j.model.ParamSource expAvg, io.fsdp4j.model.ParamSource expAvgSq) {
        this.step = stepsTaken;
        for (int i = 0; i < units.size(); i++) {
            ShardedUnit u = units.get(i);
            int owned = u.ownedParamElements();
            for (int k = 0; k < 2; k++) {
                io.fsdp4j.model.ParamSource source = k == 0 ? expAvg : expAvgSq;
                float[] values = new float[u.shardNumel()];
                if (owned > 0) {
                    source.read(i, u.shardStart(), values, 0, owned);
                }
                MemorySegment host = (k == 0 ? hostFirstMoments : hostSecondMoments).get(i);
                if (host != null) {
                    MemorySegment.copy(values, 0, host, ValueLayout.JAVA_FLOAT, 0, values.length);
                    continue;
                }
                try (var staging = backend.newScope(); var entered = staging.enter()) {
                    backend.copy(backend.upload(values, values.length), (k == 0 ? firstMoments : secondMoments).get(i));
                }
            }
        }
    }

    /** Bytes of optimizer state this rank holds (two fp32 moments per shard element). */
    public long stateBytes() {
        long bytes = 0;
        for (ShardedUnit u : units) {
            bytes += 2 * 4L * u.shardNumel();
        }
        return bytes;
    }
}
