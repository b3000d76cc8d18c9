package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;

/**
 * A model's units run forward for generation, however their parameters are held: whole on one device
 * ({@link SingleDeviceModel}) or sharded and gathered a unit at a time ({@code fsdp.ShardedForward}).
 */
public interface ForwardPass {
    CausalLM model();

    Backend backend();

    /** The type of the activations, and so of the KV cache. */
    DType activationType();

    /**
     * Runs the batch through every unit, each block reading and extending {@code cache}, and returns the logits
     * (R,V) of the rows named in {@code rows} (R) I32 (each sequence's last token), in the current scope. With a
     * null batch (a sharded model whose rank has nothing to generate in this round) nothing is computed, the rank only
     * takes part in what the units need of it (their gathers), and the result is null.
     */
    Tensor logits(TokenBatch batch, KvCache cache, Tensor rows);
}
