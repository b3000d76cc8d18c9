package io.fsdp4j.optim;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.config.DecayRule;
import io.fsdp4j.fsdp.ShardSegment;
import io.fsdp4j.fsdp.ShardedUnit;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * AdamW with PyTorch's semantics ({@code torch.optim.AdamW}: decoupled weight decay, bias-corrected moments),
 * run on each rank's fp32 master shards. The moments share the shards' layout. Which parameters decay is a
 * rule on their shape, never a list: with {@link DecayRule#MATRICES}, parameters of two or more dimensions
 * (linear weights, embeddings) decay and biases and norm weights do not.
 */
public final class AdamW {
    private final Backend backend;
    private final List<ShardedUnit> units;
    private final List<Tensor> firstMoments = new ArrayList<>();
    private final List<Tensor> secondMoments = new ArrayList<>();
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
            firstMoments.add(backend.allocate(DType.F32, u.shardNumel()));
            secondMoments.add(backend.allocate(DType.F32, u.shardNumel()));
        }
    }

    /** Optimizer steps taken so far. */
    public long stepsTaken() {
        return step;
    }

    /** One update of every shard with the given learning rate. */
    public void step(float lr) {
        step++;
        for (int i = 0; i < units.size(); i++) {
            ShardedUnit u = units.get(i);
            Tensor m = firstMoments.get(i), v = secondMoments.get(i);
            for (ShardSegment s : u.segments()) {
                boolean decays = switch (decayRule) {
                    case MATRICES -> s.param().isMatrix();
                    case ALL -> true;
                };
                backend.adamw(u.master().view(s.shardOffset(), s.length()), u.grad().view(s.shardOffset(), s.length()),
                        m.view(s.shardOffset(), s.length()), v.view(s.shardOffset(), s.length()), lr, beta1, beta2,
                        eps, decays ? weightDecay : 0f, step);
            }
        }
    }

    /** The first moments (exp_avg) of unit {@code unit}'s shard. */
    public Tensor firstMoment(int unit) {
        return firstMoments.get(unit);
    }

    /** The second moments (exp_avg_sq) of unit {@code unit}'s shard. */
    public Tensor secondMoment(int unit) {
        return secondMoments.get(unit);
    }

    /** Restores the step count and the moments of this rank's shards (from a checkpoint). */
    public void restore(long stepsTaken, io.fsdp4j.fsdp.ParamSource expAvg, io.fsdp4j.fsdp.ParamSource expAvgSq) {
        this.step = stepsTaken;
        for (int i = 0; i < units.size(); i++) {
            ShardedUnit u = units.get(i);
            int owned = u.ownedParamElements();
            for (var pair : java.util.List.of(java.util.Map.entry(expAvg, firstMoments.get(i)),
                    java.util.Map.entry(expAvgSq, secondMoments.get(i)))) {
                float[] values = new float[u.shardNumel()];
                if (owned > 0) {
                    pair.getKey().read(i, u.shardStart(), values, 0, owned);
                }
                try (var staging = backend.newScope(); var entered = staging.enter()) {
                    backend.copy(backend.upload(values, values.length), pair.getValue());
                }
            }
        }
    }

    /** Bytes of optimizer state this rank holds (two fp32 moments per shard element). */
    public long stateBytes() {
        long bytes = 0;
        for (Tensor m : firstMoments) {
            bytes += 2 * 4 * m.numel();
        }
        return bytes;
    }
}
