package io.fsdp4j.model;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * The keys and values of every block for a batch of sequences being generated: per block, keys and values
 * (B, capacity, width), row p of sequence b holding what its token at position p gave, on the model's device and
 * in the type its activations have. A block's forward given the cache ({@link CausalLM#blockForward(int, Tensor,
 * Tensor, TokenBatch, KvCache)}) writes the rows of the batch's tokens and attends over the rows before them.
 */
public record KvCache(List<Tensor> keys, List<Tensor> values, int batch, int capacity) {
    public KvCache {
        keys = List.copyOf(keys);
        values = List.copyOf(values);
    }

    /** Empty caches of {@code layers} blocks for {@code batch} sequences of up to {@code capacity} tokens. */
    public static KvCache allocate(Backend backend, int layers, int batch, int capacity, int width, DType dtype) {
        List<Tensor> keys = new ArrayList<>(), values = new ArrayList<>();
        for (int i = 0; i < layers; i++) {
            keys.add(backend.allocate(dtype, batch, capacity, width));
            values.add(backend.allocate(dtype, batch, capacity, width));
        }
        return new KvCache(keys, values, batch, capacity);
    }

    /**
     * A block's attention over the cache: the keys and values of the batch's rows (in qkv, at the batch's positions)
     * written into block {@code layer}'s cache, then each query attending to its sequence's rows up to its own
     * position: out (N, NH*HS).
     */
    public void attend(Backend backend, int layer, Tensor out, Tensor qkv, TokenBatch batch, AttentionShape shape) {
        if (batch.batch() != this.batch) {
            throw new IllegalArgumentException("a batch of " + batch.batch() + " sequences for a cache of " + this.batch);
        }
        backend.kvCacheAppend(keys.get(layer), values.get(layer), qkv, batch.positions(), shape);
        backend.attentionCached(out, qkv, keys.get(layer), values.get(layer), batch.positions(), shape);
    }
}
