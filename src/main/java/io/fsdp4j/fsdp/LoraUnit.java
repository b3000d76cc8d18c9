package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.config.Precision;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.Tensor;

/**
 * A block under LoRA: its base parameters frozen ({@link FrozenShard}: no master, no gradient, no optimizer state)
 * and its adapters training (fp32 masters and gradients, on the device or offloaded), each sharded over the shard
 * group on its own. The model sees one flat buffer, base then adapters ({@link #layout}): both are gathered at once
 * ({@link #startGather} starts both all-gathers) and laid side by side when the block computes. The block's backward
 * computes no gradient for the base and writes the adapters' straight into their unit's buffer, which accumulates and
 * reduces them as any training unit does.
 */
public final class LoraUnit implements FsdpUnit {
    private final UnitLayout layout;
    private final Backend backend;
    private final FsdpUnit base;
    private final ShardedUnit adapters;
    private Tensor full;
    private MemoryScope fullScope;

    /**
     * @param layout   the block's buffer as the model lays it out: base, then adapters
     * @param base     the frozen base (the layout's first base.layout().numel() elements): a frozen
     *                 {@link ShardedUnit}, or under QLoRA an {@link Nf4Unit}
     * @param adapters the adapters (the rest of the layout, from offset 0): trainable, or frozen in a model that only
     *                 computes forwards ({@link FsdpModel#forwardOnly(io.fsdp4j.model.CausalLM,
     *                 io.fsdp4j.comm.RankContext, FsdpPolicy, ParamSource, ParamSource,
     *                 io.fsdp4j.config.BaseQuantization)})
     */
    LoraUnit(UnitLayout layout, Backend backend, FsdpUnit base, ShardedUnit adapters) {
        if (base.trains() || base.layout().numel() + adapters.layout().numel() != layout.numel()) {
            throw new IllegalArgumentException("unit " + layout.name() + ": a frozen base and its adapters "
                    + "must make up the layout");
        }
        this.layout = layout;
        this.backend = backend;
        this.base = base;
        this.adapters = adapters;
    }

    @Override
    public UnitLayout layout() {
        return layout;
    }

    /** The frozen base. */
    public FsdpUnit base() {
        return base;
    }

    /** The adapters. */
    public ShardedUnit adapters() {
        return adapters;
    }

    @Override
    public void startGather(Precision paramDtype) {
        if (full == null) {
            base.startGather(paramDtype);
            adapters.startGather(paramDtype);
        }
    }

    /**
     * Base and adapters gathered, then copied side by side into the block's buffer (an NF4 base dequantized straight
     * into it); the gathered halves freed.
     */
    @Override
    public Tensor gather(Precision paramDtype) {
        if (full != null) {
            return full;
        }
        Tensor a = adapters.gather(paramDtype);
        long baseNumel = base.layout().numel(), adapterNumel = adapters.layout().numel();
        fullScope = backend.newScope();
        try (var entered = fullScope.enter()) {
            full = backend.allocateForWrite(a.dtype(), Math.toIntExact(layout.numel()));
            if (base instanceof Nf4Unit quantized) {
                quantized.gatherInto(full.view(0, Math.toIntExact(baseNumel)), paramDtype);
            } else {
                Tensor b = base.gather(paramDtype);
                backend.copy(b.view(0, Math.toIntExact(baseNumel)), full.view(0, Math.toIntExact(baseNumel)));
            }
            backend.copy(a.view(0, Math.toIntExact(adapterNumel)), full.view(baseNumel, Math.toIntExact(adapterNumel)));
        }
        base.free();
        adapters.free();
        return full;
    }

    @Override
    public void free() {
        if (fullScope != null) {
            fullScope.close();
        }
        full = null;
        fullScope = null;
        base.free();
        adapters.free();
    }

    @Override
    public boolean isGathered() {
        return full != null || base.isGathered() || adapters.isGathered();
    }

    @Override
    public void startHostCopy() {
        if (full == null) {
            adapters.startHostCopy();
        }
    }

    /** Whether the adapters train (a model sharded for forwards only holds them frozen too). */
    @Override
    public boolean trains() {
        return adapters.trains();
    }

    @Override
    public MasterShards trainable() {
        return adapters.trainable();
    }

    /** The adapters' gradients (the block's backward computes none for the frozen base: CausalLM#blockBackward). */
    @Override
    public ShardedUnit.GradTarget blockGradTarget() {
        return adapters.blockGradTarget();
    }

    @Override
    public Tensor gradAccumulator() {
        throw new IllegalStateException("unit " + layout.name() + ": a LoRA block's gradients go through blockGradTarget");
    }

    @Override
    public void startReduction(Precision reduceDtype) {
        adapters.startReduction(reduceDtype);
    }

    @Override
    public void finishReduction() {
        adapters.finishReduction();
    }

    @Override
    public void releaseReducedGradient() {
        adapters.releaseReducedGradient();
    }

    @Override
    public void reduceGradients(Precision reduceDtype) {
        adapters.reduceGradients(reduceDtype);
    }

    @Override
    public void zeroGrad() {
        adapters.zeroGrad();
    }

    @Override
    public long paramBytes() {
        return base.paramBytes() + adapters.paramBytes();
    }

    @Override
    public long gradBytes() {
        return base.gradBytes() + adapters.gradBytes();
    }

    @Override
    public float[] fullParameters() {
        float[] b = base.fullParameters(), a = adapters.fullParameters();
        float[] result = new float[Math.toIntExact(layout.numel())];
        System.arraycopy(b, 0, result, 0, b.length);
        System.arraycopy(a, 0, result, b.length, a.length);
        return result;
    }
}
