package io.fsdp4j.model;

import io.fsdp4j.tensor.Tensor;
import java.util.List;

/**
 * The keys and values of every block for one sequence being generated: (capacity, NKV*HS) each, filled from row 0
 * as tokens are processed.
 */
public record KvCache(List<Tensor> keys, List<Tensor> values, int capacity) {
    public KvCache {
        keys = List.copyOf(keys);
        values = List.copyOf(values);
    }
}
