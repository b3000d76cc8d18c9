package io.fsdp4j.optim;

import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * One rank's shard of a flat parameter buffer that the optimizer updates: its fp32 master weights and its reduced
 * gradient, on the device or in host memory. Rank s of a shard group of S ranks holds elements
 * {@code [shardStart, shardStart + shardNumel)} of the buffer padded to {@code S * shardNumel}.
 */
public interface TrainableShard {

    /** The flat buffer this is a shard of (its parameters and their names). */
    UnitLayout layout();

    /** First element of this shard in the flat buffer. */
    long shardStart();

    /** Elements of the shard, padding included. */
    int shardNumel();

    /** Whether the master and gradient shards live in host memory (the update then runs on the host). */
    boolean inHostMemory();

    /** The master and gradient shards for an update now (the gradient complete for the step). */
    Buffers buffers();

    /** The master shard's values (shardNumel floats), wherever it lives. */
    float[] masterValues();

    /** Where the master and gradient shards are. */
    sealed interface Buffers permits OnDevice, InHost {}

    /**
     * On the device: fp32 tensors of shardNumel elements, and the master's copy in half precision that the gathers
     * send ({@code fsdp.param_copy: kept}), which the update writes too, or null.
     */
    record OnDevice(Tensor master, Tensor grad, Tensor keptCopy) implements Buffers {}

    /** In host memory: shardNumel fp32 values each. */
    record InHost(MemorySegment master, MemorySegment grad) implements Buffers {}

    /** Elements of the shard that hold parameters (the rest is padding). */
    default int ownedElements() {
        return (int) Math.max(0, Math.min(shardNumel(), layout().numel() - shardStart()));
    }

    /** The pieces of parameters inside this shard, in layout order. */
    default List<ShardSegment> segments() {
        List<ShardSegment> result = new ArrayList<>();
        long start = shardStart(), end = start + shardNumel();
        for (ParamSpec p : layout().params()) {
            long from = Math.max(p.offset(), start), to = Math.min(p.end(), end);
            if (from < to) {
                result.add(new ShardSegment(p, (int) (from - start), (int) (to - from)));
            }
        }
        return result;
    }
}
