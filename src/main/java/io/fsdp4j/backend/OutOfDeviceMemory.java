package io.fsdp4j.backend;

import io.fsdp4j.UserError;

/**
 * A device ran out of memory: reported as one line that names the allocation (what it was for, where the caller
 * knows, its type, shape and size) and what to change, as a {@link UserError} since the remedy is in the config.
 */
public final class OutOfDeviceMemory extends UserError {
    static final String REMEDY = "try fsdp.cpu_offload=true (parameter, gradient and optimizer shards in host memory), "
            + "more GPUs (dist.ranks, dist.nnodes), fsdp.activation_checkpointing=full, or a smaller data.seq_len or "
            + "train.batch_size";

    private final String allocation;
    private final String cause;

    OutOfDeviceMemory(String allocation, String cause) {
        super("out of GPU memory allocating " + allocation + " (" + cause + "); " + REMEDY);
        this.allocation = allocation;
        this.cause = cause;
    }

    /** The same error, saying what the allocation was for. */
    public OutOfDeviceMemory naming(String purpose) {
        return new OutOfDeviceMemory(purpose + ", " + allocation, cause);
    }
}
