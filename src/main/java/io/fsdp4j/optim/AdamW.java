package io.fsdp4j.optim;

import io.fsdp4j.backend.AdamWSegment;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.OutOfDeviceMemory;
import io.fsdp4j.backend.cpu.HostFloats;
import io.fsdp4j.config.DecayRule;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * AdamW with PyTorch's semantics ({@code torch.optim.AdamW}: decoupled weight decay, bias-corrected moments),
 * run on each rank's fp32 master shards ({@link TrainableShard}). The moments share the shards' layout. Which
 * parameters decay is a rule on their shape, never a list: with {@link DecayRule#MATRICES}, parameters of two or
 * more dimensions (linear weights, embeddings) decay and biases and norm weights do not.
 *
 * <p>Each shard's state is one object ({@link ShardState}): its moments where its master lives. On the device, every
 * parameter of the shard is updated in one call (one kernel on the GPU); in host memory ({@code fsdp.cpu_offload}),
 * the update runs on the host in parallel Java ({@link HostAdamW}), after the engine has waited for the gradient
 * shards' copies.
 */
public final class AdamW {
    private final Backend backend;
    private final List<ShardState> states = new ArrayList<>(); // one per shard, in the shards' order
    private final float beta1;
    private final float beta2;
    private final float eps;
    private final float weightDecay;
    private long step;

    /** The hyperparameters of one step, with the clipping factor that scales the gradients as they are read. */
    private record Step(float lr, float beta1, float beta2, float eps, float weightDecay, long step, float gradScale) {}

    /** One shard's optimizer state: the shard, its parameters' decay, and its two moments where its master lives. */
    private sealed interface ShardState permits DeviceMoments, HostMoments {
        TrainableShard shard();

        void update(Step s);

        float[] firstMoments();

        float[] secondMoments();

        /** Sets both moments from shardNumel values each. */
        void restore(float[] first, float[] second);
    }

    /** Moments on the device, beside the master shard. */
    private record DeviceMoments(Backend backend, TrainableShard shard, List<AdamWSegment> segments, Tensor m, Tensor v)
            implements ShardState {
        @Override
        public void update(Step s) { // every parameter of the shard in one call (one kernel on the GPU)
            var b = (TrainableShard.OnDevice) shard.buffers();
            if (b.keptCopy() != null) { // the gathers' copy written in the same pass
                backend.adamw(b.master(), b.grad(), m, v, segments, s.lr(), s.beta1(), s.beta2(), s.eps(),
                        s.weightDecay(), s.step(), s.gradScale(), b.keptCopy());
                return;
            }
            backend.adamw(b.master(), b.grad(), m, v, segments, s.lr(), s.beta1(), s.beta2(), s.eps(),
                    s.weightDecay(), s.step(), s.gradScale());
        }

        @Override
        public float[] firstMoments() {
            return backend.toFloats(m);
        }

        @Override
        public float[] secondMoments() {
            return backend.toFloats(v);
        }

        @Override
        public void restore(float[] first, float[] second) {
            try (var staging = backend.newScope(); var entered = staging.enter()) {
                backend.copy(backend.upload(first, first.length), m);
                backend.copy(backend.upload(second, second.length), v);
            }
        }
    }

    /** Moments in host memory, beside an offloaded master shard (plain native memory: they never travel). */
    private record HostMoments(TrainableShard shard, List<AdamWSegment> segments, MemorySegment m, MemorySegment v)
            implements ShardState {
        @Override
        public void update(Step s) {
            var b = (TrainableShard.InHost) shard.buffers();
            if (s.gradScale() != 1f) {
                HostFloats.scale(b.grad(), 0, shard.shardNumel(), s.gradScale()); // one pass before the update
            }
            for (AdamWSegment seg : segments) {
                HostAdamW.step(b.master(), b.grad(), m, v, seg.offset(), seg.length(), s.lr(), s.beta1(), s.beta2(),
                        s.eps(), seg.decays() ? s.weightDecay() : 0f, s.step());
            }
        }

        @Override
        public float[] firstMoments() {
            return m.toArray(ValueLayout.JAVA_FLOAT);
        }

        @Override
        public float[] secondMoments() {
            return v.toArray(ValueLayout.JAVA_FLOAT);
        }

        @Override
        public void restore(float[] first, float[] second) {
            MemorySegment.copy(first, 0, m, ValueLayout.JAVA_FLOAT, 0, first.length);
            MemorySegment.copy(second, 0, v, ValueLayout.JAVA_FLOAT, 0, second.length);
        }
    }

    public AdamW(Backend backend, List<? extends TrainableShard> shards, float beta1, float beta2, float eps,
                 float weightDecay, DecayRule decayRule) {
        this.backend = backend;
        this.beta1 = beta1;
        this.beta2 = beta2;
        this.eps = eps;
        this.weightDecay = weightDecay;
        for (TrainableShard shard : shards) {
            List<AdamWSegment> segments = segmentsOf(shard, decayRule);
            int n = shard.shardNumel();
            if (shard.inHostMemory()) {
                states.add(new HostMoments(shard, segments, Arena.ofAuto().allocate(ValueLayout.JAVA_FLOAT, n),
                        Arena.ofAuto().allocate(ValueLayout.JAVA_FLOAT, n)));
                continue;
            }
            try {
                states.add(new DeviceMoments(backend, shard, segments, backend.allocate(DType.F32, n),
                        backend.allocate(DType.F32, n)));
            } catch (OutOfDeviceMemory e) {
                throw e.naming("the AdamW moments of unit " + shard.layout().name());
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
        Step s = new Step(lr, beta1, beta2, eps, weightDecay, step, gradScale);
        for (ShardState state : states) {
            state.update(s);
        }
    }

    /** The pieces of parameters in a shard, each decaying or not by the decay rule. */
    private static List<AdamWSegment> segmentsOf(TrainableShard shard, DecayRule rule) {
        List<AdamWSegment> result = new ArrayList<>();
        for (ShardSegment s : shard.segments()) {
            boolean decays = switch (rule) {
                case MATRICES -> s.param().isMatrix();
                case ALL -> true;
            };
            result.add(new AdamWSegment(s.shardOffset(), s.length(), decays));
        }
        return List.copyOf(result);
    }

    /** The first moments (exp_avg) of shard {@code shard} (shardNumel values), wherever they live. */
    public float[] firstMomentValues(int shard) {
        return states.get(shard).firstMoments();
    }

    /** The second moments (exp_avg_sq) of shard {@code shard} (shardNumel values), wherever they live. */
    public float[] secondMomentValues(int shard) {
        return states.get(shard).secondMoments();
    }

    /**
     * Restores the step count and the moments of this rank's shards (from a checkpoint; the sources number the
     * shards as this optimizer does).
     */
    public void restore(long stepsTaken, ParamSource expAvg, ParamSource expAvgSq) {
        this.step = stepsTaken;
        for (int i = 0; i < states.size(); i++) {
            TrainableShard shard = states.get(i).shard();
            states.get(i).restore(read(expAvg, i, shard), read(expAvgSq, i, shard));
        }
    }

    private static float[] read(ParamSource source, int index, TrainableShard shard) {
        float[] values = new float[shard.shardNumel()];
        int owned = shard.ownedElements();
        if (owned > 0) {
            source.read(index, shard.shardStart(), values, 0, owned);
        }
        return values;
    }

    /** Bytes of optimizer state this rank holds (two fp32 moments per shard element). */
    public long stateBytes() {
        long bytes = 0;
        for (ShardState s : states) {
            bytes += 2 * 4L * s.shard().shardNumel();
        }
        return bytes;
    }
}
