package io.fsdp4j.fsdp;

import io.fsdp4j.config.Precision;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.Tensor;

/**
 * One unit of a model as the engine runs it on one rank: gathered whole for its stage, freed after, its gradients
 * reduced after the step's last backward. A {@link ShardedUnit} is one flat buffer held in one storage (training,
 * or frozen); a {@link LoraUnit} is a frozen base and its trainable adapters, gathered together into the model's one
 * buffer for the block; an {@link Nf4Unit} is a frozen base whose linears are held in NF4 (QLoRA).
 */
public sealed interface FsdpUnit permits ShardedUnit, LoraUnit, Nf4Unit {

    /** The flat buffer the model computes with (a LoRA block's: base, then adapters). */
    UnitLayout layout();

    /** Starts the gather of the full parameters without waiting (nothing if gathered or on its way). */
    void startGather(Precision paramDtype);

    /** The full parameters for compute, in paramDtype (fp32 where the backend computes only in fp32). */
    Tensor gather(Precision paramDtype);

    /** Frees the gathered parameters. */
    void free();

    /** Whether the full parameters are held (gathered, or on their way). */
    boolean isGathered();

    /** Offloaded: starts copying the master shard to the device a unit ahead of its gather (else nothing). */
    void startHostCopy();

    /** Whether any of the unit's parameters train. */
    boolean trains();

    /** The master and gradient shards the optimizer updates; the unit must train. */
    MasterShards trainable();

    /** Where a block's backward writes its gradients (of what trains: a LoRA block's adapters'), and whether to add. */
    ShardedUnit.GradTarget blockGradTarget();

    /** The full-size gradient buffer the head's or the embeddings' backward accumulates into. */
    Tensor gradAccumulator();

    void startReduction(Precision reduceDtype);

    void finishReduction();

    void releaseReducedGradient();

    void reduceGradients(Precision reduceDtype);

    /** Starts a step: the gradient shard is zero until the step's reduction. */
    void zeroGrad();

    /** Bytes of parameter shards held for the job. */
    long paramBytes();

    /** Bytes of gradient shards held for the job. */
    long gradBytes();

    /** The unit's full parameters in fp32, numel of {@link #layout} (gathered across the shard group: every member calls). */
    float[] fullParameters();
}
