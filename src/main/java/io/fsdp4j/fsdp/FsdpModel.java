package io.fsdp4j.fsdp;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.BaseQuantization;
import io.fsdp4j.config.Precision;
import io.fsdp4j.model.ActivationSizes;
import io.fsdp4j.model.BlockActivations;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * A single-device {@link CausalLM} made fully sharded on one rank: each unit (embeddings, every block, the
 * head) is a {@link FsdpUnit}, gathered just before the model computes with it and freed after, with
 * gradients reduced when its last backward of the step is done. The model itself is unchanged: it sees whole
 * flat buffers.
 */
public final class FsdpModel {
    private final CausalLM model;
    private final RankContext rank;
    private final FsdpPolicy policy;
    private final List<FsdpUnit> units;
    /** The units in the order the forward computes them (embeddings, blocks, head), and the blocks in the order the
     * backward does (last first; the head's backward comes with its loss): what {@link #prefetchAfter} walks. */
    private final List<FsdpUnit> forwardOrder = new ArrayList<>(), backwardOrder = new ArrayList<>();
    private long keptActivationBytes;

    private FsdpModel(CausalLM model, RankContext rank, FsdpPolicy policy, List<FsdpUnit> units) {
        this.model = model;
        this.rank = rank;
        this.policy = policy;
        this.units = units;
        forwardOrder.add(units.get(0));
        for (int layer = 0; layer < model.blockCount(); layer++) {
            forwardOrder.add(units.get(model.blockUnit(layer)));
            backwardOrder.addFirst(units.get(model.blockUnit(layer)));
        }
        forwardOrder.add(units.get(model.headUnit()));
    }

    /**
     * Shards a model on this rank: lays out each unit, allocates only this rank's shard and fills it from
     * {@code source}.
     */
    public static FsdpModel apply(CausalLM model, RankContext rank, FsdpPolicy policy, ParamSource source) {
        return apply(model, rank, policy, source, source);
    }

    /**
     * Shards a model whose units may be frozen in part ({@link CausalLM#frozenNumel}: a base under LoRA): each unit
     * that trains all through is a training {@link ShardedUnit}, each frozen all through a frozen one (its
     * parameters only, in {@code fsdp.param_dtype}), and a block frozen in part a {@link LoraUnit}. Frozen
     * parameters are read from {@code frozen} (by unit, at their offsets in the unit), the ones that train from
     * {@code trained}, numbered and laid out as {@link #trainableShards} are (without LoRA, both are the unit and
     * its layout).
     */
    public static FsdpModel apply(CausalLM model, RankContext rank, FsdpPolicy policy, ParamSource frozen,
                                  ParamSource trained) {
        return apply(model, rank, policy, frozen, trained, BaseQuantization.NONE);
    }

    /**
     * As {@link #apply(CausalLM, RankContext, FsdpPolicy, ParamSource, ParamSource)}, each block's frozen base held
     * as {@code quantize} says ({@code lora.quantize}): under {@code nf4} an {@link Nf4Unit}, its linears quantized
     * from {@code frozen} as they are read (the embeddings and the head stay frozen units in fsdp.param_dtype).
     */
    public static FsdpModel apply(CausalLM model, RankContext rank, FsdpPolicy policy, ParamSource frozen,
                                  ParamSource trained, BaseQuantization quantize) {
        return apply(model, rank, policy, frozen, trained, ShardedUnit.Holding.training(policy),
                quantize);
    }

    /**
     * Refuses, with a one-line error, a model whose frozen base {@code lora.quantize: nf4} cannot hold: a block linear
     * whose elements are not whole blocks of 64.
     */
    public static void requireQuantizable(CausalLM model) {
        for (int u = 0; u < model.units().size(); u++) {
            long frozenNumel = model.frozenNumel(u);
            UnitLayout layout = model.units().get(u);
            if (frozenNumel > 0 && frozenNumel < layout.numel()) {
                String problem = Nf4Unit.quantizable(prefix(layout, frozenNumel));
                if (problem != null) {
                    throw new UserError("config key 'lora.quantize' is nf4, but " + problem + " (NF4 holds each "
                            + "block linear in blocks of 64 elements, as bitsandbytes); use lora.quantize=none for "
                            + "this model");
                }
            }
        }
    }

    /**
     * Shards a model that only computes forwards ({@code eval}, {@code score}): as {@link #apply(CausalLM,
     * RankContext, FsdpPolicy, ParamSource)}, but every shard is a {@link FrozenShard}, its parameters in
     * {@code fsdp.param_dtype} and no fp32 master or gradient: the same gathered values, in a quarter to a half of
     * the memory. With {@code fsdp.cpu_offload} the shards stay in host memory, as training holds them there, but as
     * the parameters alone, in fp32 ({@link FrozenHostShard}): no gradient shard.
     */
    public static FsdpModel forwardOnly(CausalLM model, RankContext rank, FsdpPolicy policy, ParamSource source) {
        return forwardOnly(model, rank, policy, source, source, BaseQuantization.NONE);
    }

    /**
     * As {@link #forwardOnly(CausalLM, RankContext, FsdpPolicy, ParamSource)} for a model frozen in part (a base with
     * adapters, {@code eval --adapter}): the base from {@code frozen} (held as {@code quantize} says), the adapters
     * from {@code trained} as {@link #apply} numbers them, and the adapters' shards frozen as well: no master, no
     * gradient, no optimizer state.
     */
    public static FsdpModel forwardOnly(CausalLM model, RankContext rank, FsdpPolicy policy, ParamSource frozen,
                                        ParamSource trained, BaseQuantization quantize) {
        ShardedUnit.Holding holding = policy.cpuOffload() ? new ShardedUnit.Holding.FrozenInHost()
                : new ShardedUnit.Holding.Frozen(frozenDtype(policy));
        return apply(model, rank, policy, frozen, trained, holding, quantize);
    }

    /** {@code trains}: what holds the shards of what trains (the frozen ones are {@link FrozenShard}s). */
    private static FsdpModel apply(CausalLM model, RankContext rank, FsdpPolicy policy, ParamSource frozen,
                                   ParamSource trained, ShardedUnit.Holding trains, BaseQuantization quantize) {
        if (rank.mesh().shardSize() != rank.shardGroup().size()) {
            throw new IllegalStateException("mesh and shard group disagree");
        }
        List<FsdpUnit> units = new ArrayList<>();
        List<UnitLayout> layouts = model.units();
        DType frozenDtype = frozenDtype(policy);
        int trainIndex = 0;
        for (int u = 0; u < layouts.size(); u++) {
            UnitLayout layout = layouts.get(u);
            long frozenNumel = model.frozenNumel(u);
            if (frozenNumel == 0) {
                units.add(loaded(shardedUnit(layout, rank, trains), trained, trainIndex++));
            } else if (frozenNumel == layout.numel()) {
                units.add(loaded(shardedUnit(layout, rank, new ShardedUnit.Holding.Frozen(frozenDtype)), frozen, u));
            } else {
                UnitLayout baseLayout = prefix(layout, frozenNumel);
                FsdpUnit base = quantize == BaseQuantization.NF4
                        ? new Nf4Unit(baseLayout, rank.backend(), rank.shardGroup(), rank.replicateGroup(), frozenDtype,
                                frozen, u)
                        : loaded(shardedUnit(baseLayout, rank, new ShardedUnit.Holding.Frozen(frozenDtype)), frozen, u);
                ShardedUnit adapters = loaded(shardedUnit(suffix(layout, frozenNumel), rank, trains), trained,
                        trainIndex++);
                units.add(new LoraUnit(layout, rank.backend(), base, adapters));
            }
        }
        return new FsdpModel(model, rank, policy, List.copyOf(units));
    }

    /**
     * The layouts of what trains, numbered as {@link #trainableShards} and the {@code trained} source of
     * {@link #apply} number them: each unit that trains all through, and the adapters of each block frozen in part
     * (named {@code <unit>.lora}, from offset 0).
     */
    public static List<UnitLayout> trainableLayouts(CausalLM model) {
        List<UnitLayout> result = new ArrayList<>();
        for (int u = 0; u < model.units().size(); u++) {
            UnitLayout layout = model.units().get(u);
            long frozenNumel = model.frozenNumel(u);
            if (frozenNumel == 0) {
                result.add(layout);
            } else if (frozenNumel < layout.numel()) {
                result.add(suffix(layout, frozenNumel));
            }
        }
        return List.copyOf(result);
    }

    /** The precision frozen shards are held in: the gather's. */
    private static DType frozenDtype(FsdpPolicy policy) {
        return policy.paramDtype().dtype();
    }

    private static ShardedUnit shardedUnit(UnitLayout layout, RankContext rank, ShardedUnit.Holding holding) {
        return new ShardedUnit(layout, rank.backend(), rank.shardGroup(), rank.replicateGroup(), holding);
    }

    /** The unit with its shard read from {@code source}'s unit {@code index}. */
    private static ShardedUnit loaded(ShardedUnit unit, ParamSource source, int index) {
        int owned = unit.ownedParamElements();
        if (owned > 0) {
            float[] values = new float[owned];
            source.read(index, unit.shardStart(), values, 0, owned);
            unit.loadMaster(values);
        }
        return unit;
    }

    /** The layout's parameters before {@code numel}: a LoRA block's frozen base. */
    private static UnitLayout prefix(UnitLayout layout, long numel) {
        List<ParamSpec> params = layout.params().stream().filter(p -> p.end() <= numel).toList();
        return new UnitLayout(layout.name(), params, numel);
    }

    /** The layout's parameters from {@code numel} on, from offset 0: a LoRA block's adapters. */
    private static UnitLayout suffix(UnitLayout layout, long numel) {
        List<ParamSpec> params = new ArrayList<>();
        for (ParamSpec p : layout.params()) {
            if (p.offset() >= numel) {
                params.add(new ParamSpec(p.name(), p.offset() - numel, p.shape(), p.kind()));
            } else if (p.end() > numel) {
                throw new IllegalArgumentException("parameter " + p + " of unit " + layout.name()
                        + " straddles the frozen part's end at " + numel);
            }
        }
        return new UnitLayout(layout.name() + ".lora", params, layout.numel() - numel);
    }

    public CausalLM model() {
        return model;
    }

    public RankContext rank() {
        return rank;
    }

    public FsdpPolicy policy() {
        return policy;
    }

    /** Every unit, in the model's order. */
    public List<FsdpUnit> units() {
        return units;
    }

    public void zeroGrad() {
        units.forEach(FsdpUnit::zeroGrad);
    }

    private Tensor gathered(FsdpUnit unit) {
        return unit.gather(policy.paramDtype());
    }

    /**
     * Forward and backward over this rank's micro-batches of one step. Gradients are of d(loss sum * gradScale):
     * with gradScale = 1 / (targets in the global batch) they are those of the token-weighted mean loss over the
     * whole global batch. Reduction happens once, after the last micro-batch. Returns this rank's loss sum.
     */
    public double forwardBackward(List<TokenBatch> microBatches, float gradScale) {
        double lossSum = 0;
        for (int m = 0; m < microBatches.size(); m++) {
            boolean reduce = m == microBatches.size() - 1; // no communication of gradients before the last
            MemoryScope microBatchScope = rank.backend().newScope();
            try (microBatchScope; var entered = microBatchScope.enter()) {
                lossSum += microBatch(microBatches.get(m), gradScale, reduce);
            }
        }
        if (policy.cpuOffload()) {
            rank.backend().waitForHostCopies(); // the host optimizer reads the gradient shards copied back
        }
        return lossSum;
    }

    /**
     * One micro-batch. Communication overlaps computation: the next unit's all-gather is started before this
     * unit computes (prefetch), and a unit's gradient reduction runs while the next block down computes its
     * backward, finished one block later. The last block keeps its gathered parameters from its forward to its
     * backward, which comes first (it would be gathered again during the head's loss anyway: no more memory).
     * Memory: each block's forward activations live in a scope of their own until that block's backward is done
     * (under full checkpointing only the block's input is kept, in the micro-batch's scope; keeping attention, its
     * output and attention's output and lse; under selective, what the model keeps, its cheap activations freed as
     * soon as the forward returns), and each block's backward
     * temporaries (recomputed activations included) until it returns, its input gradient copied out first.
     */
    private double microBatch(TokenBatch batch, float gradScale, boolean reduce) {
        Backend be = rank.backend();
        boolean reshardAfterForward = policy.strategy().reshardAfterForward();
        FsdpUnit embedding = units.get(0), head = units.get(model.headUnit());
        int blocks = model.blockCount();
        // forward: embeddings, then each block (keeping its input, and its activations unless recomputed); each
        // unit's gather is started policy.prefetch() units ahead of its compute (forwardOrder, backwardOrder)
        embedding.startGather(policy.paramDtype()); // what computes now is gathered first, then what comes next
        prefetchAfter(forwardOrder, 0);
        Tensor x = model.embedForward(gathered(embedding), batch);
        if (reshardAfterForward) {
            embedding.free();
        }
        Tensor[] blockInputs = new Tensor[blocks];
        BlockActivations[] saved = new BlockActivations[blocks];
        MemoryScope[] forwardScopes = new MemoryScope[blocks];
        for (int layer = 0; layer < blocks; layer++) {
            FsdpUnit unit = units.get(model.blockUnit(layer));
            unit.startGather(policy.paramDtype()); // prefetched already unless fsdp.prefetch is 0
            prefetchAfter(forwardOrder, 1 + layer);
            blockInputs[layer] = x;
            forwardScopes[layer] = be.newScope();
            BlockActivations a;
            ActivationCheckpointing checkpointing = policy.checkpointing(layer, blocks);
            if (checkpointing == ActivationCheckpointing.FULL_KEEP_ATTENTION) {
                // attention's output and lse, and the block's output, in the block's forward scope; the rest freed
                try (MemoryScope dropped = be.newScope(); var entered = dropped.enter()) {
                    a = model.blockForwardKeepingAttention(layer, gathered(unit), x, batch, forwardScopes[layer]);
                }
            } else {
                try (var entered = forwardScopes[layer].enter()) {
                    if (checkpointing == ActivationCheckpointing.SELECTIVE) { // what it can recompute, freed on return
                        try (MemoryScope recomputable = be.newScope()) {
                            a = model.blockForwardSelective(layer, gathered(unit), x, batch, recomputable);
                        }
                    } else {
                        a = model.blockForward(layer, gathered(unit), x, batch);
                    }
                }
            }
            if (checkpointing == ActivationCheckpointing.FULL) { // keep only the output, as the next block's input
                x = be.allocateForWrite(a.output().dtype(), a.output().shape());
                be.copy(a.output(), x);
                forwardScopes[layer].close();
            } else {
                saved[layer] = a;
                x = a.output();
            }
            if (reshardAfterForward && layer < blocks - 1) { // the last block's backward comes first: keep it
                unit.free();
            }
        }
        keptActivationBytes = keptBytes(blockInputs, saved, x);
        // head: loss and its backward in one stage
        boolean tied = model.headUsesEmbedding();
        head.startGather(policy.paramDtype());
        if (tied) {
            embedding.startGather(policy.paramDtype()); // again, if freed after the forward
        }
        prefetchAfter(backwardOrder, -1); // the head computes before the first of the backward order
        Tensor dx = be.allocate(x.dtype(), x.shape());
        double lossSum;
        try (MemoryScope headScope = be.newScope(); var entered = headScope.enter()) {
            lossSum = model.headLoss(gathered(head), tied ? gathered(embedding) : null, x, batch, gradScale,
                    gradients(head), tied ? gradients(embedding) : null, dx, null);
        }
        head.free();
        embedding.free();
        FsdpUnit reducing = null; // the unit whose reduction overlaps the block being computed
        FsdpUnit copying = null; // offloaded: the unit whose gradient shard is on its way to host memory
        if (reduce && head.trains()) {
            head.startReduction(policy.reduceDtype());
            reducing = head;
        }
        // backward through the blocks, first recomputing what checkpointing dropped of a block's forward. A block's
        // input gradient is copied out of its backward scope, into the one of two micro-batch buffers that the block
        // did not read, so that the scope (the recomputed activations and every backward temporary) is freed as soon
        // as the block returns: only one block's temporaries exist at a time (at seq 32768 on a 7B model, ~10 GB).
        Tensor[] inputGradients = {dx, null};
        for (int layer = blocks - 1; layer >= 0; layer--) {
            FsdpUnit unit = units.get(model.blockUnit(layer));
            unit.startGather(policy.paramDtype());
            prefetchAfter(backwardOrder, blocks - 1 - layer);
            Tensor params = gathered(unit);
            Tensor blockDx;
            ActivationCheckpointing checkpointing = policy.checkpointing(layer, blocks);
            try (MemoryScope backwardScope = be.newScope()) {
                try (var entered = backwardScope.enter()) {
                    BlockActivations a = switch (checkpointing) {
                        case NONE -> saved[layer];
                        case SELECTIVE -> model.recomputeCheap(layer, params, saved[layer], batch);
                        case FULL -> model.blockRecompute(layer, params, blockInputs[layer], batch);
                        case FULL_KEEP_ATTENTION ->
                                model.blockRecompute(layer, params, blockInputs[layer], batch, saved[layer]);
                    };
                    ShardedUnit.GradTarget grads = unit.blockGradTarget();
                    blockDx = model.blockBackward(layer, params, grads.buffer(), a, dx, batch, grads.accumulate());
                }
                int free = dx == inputGradients[0] ? 1 : 0;
                if (inputGradients[free] == null || inputGradients[free].dtype() != blockDx.dtype()
                        || !Arrays.equals(inputGradients[free].shape(), blockDx.shape())) {
                    inputGradients[free] = be.allocateForWrite(blockDx.dtype(), blockDx.shape());
                }
                be.copy(blockDx, inputGradients[free]);
                dx = inputGradients[free];
            }
            if (checkpointing != ActivationCheckpointing.FULL) {
                saved[layer] = null;
                forwardScopes[layer].close();
            }
            unit.free();
            if (reduce && unit.trains()) {
                if (reducing != null) {
                    reducing.finishReduction(); // the previous unit's, which overlapped this block's backward
                }
                if (copying != null) {
                    copying.releaseReducedGradient(); // its copy to the host overlapped this block's backward
                }
                copying = reducing;
                unit.startReduction(policy.reduceDtype());
                reducing = unit;
            }
        }
        if (embedding.trains()) {
            model.embedBackward(embedding.gradAccumulator(), batch, dx);
        }
        if (reduce) {
            if (reducing != null) {
                reducing.finishReduction();
                reducing.releaseReducedGradient();
            }
            if (copying != null) {
                copying.releaseReducedGradient();
            }
            if (embedding.trains()) {
                embedding.reduceGradients(policy.reduceDtype());
            }
        }
        return lossSum;
    }

    /**
     * The buffer a head's (or tied embeddings') backward accumulates into: the unit's gradient accumulator, or none
     * (null) for a frozen unit: its gradient is not computed.
     */
    private static Tensor gradients(FsdpUnit unit) {
        return unit.trains() ? unit.gradAccumulator() : null;
    }

    /**
     * Bytes of activations the last micro-batch kept from its forward to its backward, measured: the block inputs,
     * every tensor of the saved activations and the head's input, each counted once (a block's output is the next
     * block's input). What the model states it keeps is {@link #statedKeptActivationBytes}; a test holds the two equal.
     */
    public long keptActivationBytes() {
        return keptActivationBytes;
    }

    /**
     * Bytes of activations a micro-batch of {@code batch}'s shape keeps from its forward to its backward, as the
     * model states them ({@link ActivationSizes#keptBytes}, the planner's figures), in the dtype this rank computes
     * in: the gathered parameters' where the backend computes in it, else fp32.
     */
    public long statedKeptActivationBytes(TokenBatch batch) {
        DType gathered = policy.paramDtype().dtype();
        int elementBytes = rank.backend().computesIn(gathered) ? gathered.bytes() : DType.F32.bytes();
        ActivationSizes sizes = CausalLMs.activationSizes(model.config(), batch.seqLen(), batch.batch(), elementBytes);
        return sizes.keptBytes(policy.checkpointing(), model.blockCount(), policy.blocksNotCheckpointed(),
                policy.blocksSelective());
    }

    private static long keptBytes(Tensor[] blockInputs, BlockActivations[] saved, Tensor headInput) {
        Set<Tensor> kept = Collections.newSetFromMap(new IdentityHashMap<>());
        kept.addAll(Arrays.asList(blockInputs));
        kept.add(headInput); // under full checkpointing a copy of the last block's output, else its own
        for (BlockActivations a : saved) {
            if (a != null) {
                kept.addAll(a.tensors());
            }
        }
        long bytes = 0;
        for (Tensor t : kept) {
            bytes += t.numel() * t.dtype().bytes();
        }
        return bytes;
    }

    /**
     * Before the unit at {@code at} of {@code order} computes: starts the all-gathers of the next
     * {@code policy.prefetch()} units, so that they run while it and the ones after it compute (a unit gathered or
     * on its way already is left alone), and, offloaded, the copy of the master shard of the unit after those to the
     * device, so that the copy runs a unit ahead of that unit's gather (nothing without offload).
     */
    private void prefetchAfter(List<FsdpUnit> order, int at) {
        int depth = policy.prefetch();
        for (int i = at + 1; i <= at + depth && i < order.size(); i++) {
            order.get(i).startGather(policy.paramDtype());
        }
        if (at + depth + 1 < order.size()) {
            order.get(at + depth + 1).startHostCopy();
        }
    }

    /**
     * Squared global norm of the reduced gradients: over this rank's shards, summed over its shard group. The
     * shards on the device are summed in one pass, the host waiting for the device once; each unit's sum is added
     * in unit order, offloaded units' (summed in host memory) among them.
     */
    public double gradNormSquared() {
        List<MasterShards> trained = trainableShards();
        List<Tensor> onDevice = new ArrayList<>();
        for (MasterShards s : trained) {
            if (s instanceof DeviceShards d) {
                onDevice.add(d.grad());
            }
        }
        double[] deviceSums = rank.backend().sumsOfSquares(onDevice);
        double local = 0;
        int next = 0;
        for (MasterShards s : trained) {
            local += switch (s) {
                case DeviceShards d -> deviceSums[next++];
                case HostShards h -> h.gradSumOfSquares();
            };
        }
        // replicas hold identical shards after their all-reduce, so the shard group covers every element once
        return rank.shardGroup().allReduce(new double[] {local})[0];
    }

    /** What the optimizer updates: the master and gradient shards of every unit that trains, in unit order. */
    public List<MasterShards> trainableShards() {
        List<MasterShards> result = new ArrayList<>();
        for (FsdpUnit u : units) {
            if (u.trains()) {
                result.add(u.trainable());
            }
        }
        return result;
    }

    /**
     * Bytes this rank holds for the job's lifetime: parameter shards (fp32 masters, or frozen shards in their
     * precision) and gradient shards, in host memory when offloaded, else on the device.
     */
    public ShardBytes shardBytes() {
        long params = 0, grads = 0;
        for (FsdpUnit u : units) {
            params += u.paramBytes();
            grads += u.gradBytes();
        }
        return new ShardBytes(params, grads, policy.cpuOffload());
    }

    /** Sizes of the sharded state of one rank, in bytes; {@code inHostMemory}: offloaded. */
    public record ShardBytes(long params, long grads, boolean inHostMemory) {}

    /**
     * The full fp32 parameters of one unit, as the model lays it out (a LoRA block's: base, then adapters; gathered
     * across the shard group: every member must call).
     */
    public float[] fullParameters(int unit) {
        return units.get(unit).fullParameters();
    }
}
