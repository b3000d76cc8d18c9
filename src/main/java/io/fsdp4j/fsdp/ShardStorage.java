package io.fsdp4j.fsdp;

import io.fsdp4j.tensor.Tensor;

/**
 * What one rank holds of a unit's flat buffer for the job's lifetime, a mode as a type:
 * <ul>
 *   <li>{@link DeviceShards}: fp32 master and gradient shards on the device (the default);</li>
 *   <li>{@link HostShards}: the same in host memory ({@code fsdp.cpu_offload}), copied to the device for each
 *       gather and the reduced gradient copied back;</li>
 *   <li>{@link FrozenShard}: the parameters only, in the gather's precision, on the device: no master copy, no
 *       gradient and no optimizer state (a frozen base under LoRA, a model that computes forwards only);</li>
 *   <li>{@link FrozenHostShard}: the parameters only, in fp32 in host memory (a model that computes forwards only,
 *       offloaded), copied to the device for each gather.</li>
 * </ul>
 * The gathered parameters and the full-size gradient accumulator are the unit's ({@link ShardedUnit}), whatever
 * holds the shard.
 */
public sealed interface ShardStorage permits FrozenShard, FrozenHostShard, MasterShards {

    /** Whether the shard lives in host memory ({@code fsdp.cpu_offload}), copied to the device for each gather. */
    boolean inHostMemory();

    /** Sets the shard's first {@code values.length} elements (the rest stays as it is). */
    void load(float[] values);

    /** The shard's values as fp32 (shardNumel floats). */
    float[] values();

    /**
     * The shard on the device for a gather to send, in the precision it is held: the shard itself, or (offloaded)
     * its copy on the device, which the compute stream waits for; valid until {@link #releaseStaged}.
     */
    Tensor gatherSource();

    /** Offloaded: starts copying the shard to the device for the next gather, unless on its way already. */
    default void startHostCopy() {}

    /** Offloaded: frees the shard's copy on the device once the copy and anything queued before are done. */
    default void releaseStaged() {}

    /** The shard as fp32 on the device: itself, or a copy in the current scope. */
    Tensor fp32OnDevice();

    /** Bytes of parameters this storage holds for the job. */
    long paramBytes();

    /** Bytes of gradients this storage holds for the job. */
    long gradBytes();
}
