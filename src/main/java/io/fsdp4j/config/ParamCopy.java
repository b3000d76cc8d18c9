package io.fsdp4j.config;

/**
 * {@code fsdp.param_copy}: where the parameters a gather sends in {@code fsdp.param_dtype} (bf16, fp16; fp8 gathers
 * bf16) come from, when that is not fp32. Either way they are the fp32 master weights rounded to nearest even: the
 * same bits, so the same training.
 */
public enum ParamCopy implements ConfigChoice {
    /**
     * Rounded from the fp32 master shard at every gather (PyTorch FSDP2's way): no memory beyond the gathered units,
     * a pass over the master shard (4 bytes read, 2 written a parameter) at each of the step's gathers (two a step
     * under activation checkpointing or with resharding after forward).
     */
    PER_GATHER,
    /**
     * Kept beside the master shard, written by the optimizer in the same pass that updates the master (2 more bytes
     * a parameter written once a step), and sent by every gather as it is: 2 bytes a parameter more on each rank,
     * divided by the ranks a shard is spread over; no rounding pass at the gathers. (Megatron's distributed
     * optimizer keeps its parameters the same way.) Applies to master shards on the device; offloaded
     * ({@code fsdp.cpu_offload}) and frozen shards are as before.
     */
    KEPT;

    @Override
    public String toString() {
        return spelling();
    }
}
