package io.fsdp4j.comm;

import io.fsdp4j.tensor.Tensor;

/**
 * The collectives of one group of ranks, seen from one member. Every member calls the same collectives in the
 * same order; sums are taken in rank order, so results are the same on every member and on every run.
 */
public interface ProcessGroup {

    /** This member's index in the group, 0..size-1. */
    int rank();

    int size();

    /** full (size * shard.numel) = the members' shards concatenated in rank order. */
    void allGather(Tensor shard, Tensor full);

    /** shard = this member's slice of the element-wise sum of every member's full tensor. */
    void reduceScatter(Tensor full, Tensor shard);

    /** t = element-wise sum over the members, in place. */
    void allReduce(Tensor t);

    /** t = root's t. */
    void broadcast(Tensor t, int root);

    /** Element-wise sums of small host values (token counts, loss sums, squared norms). */
    double[] allReduce(double[] values);

    void barrier();

    /**
     * A collective that may still be running. {@link #await()} orders the caller's later computation after it
     * (on a GPU, the compute stream waits for the collective's stream; the host does not wait).
     */
    interface Pending {
        void await();

        Pending DONE = () -> { };
    }

    /** All-gather that may overlap with computation queued after it; the result is usable after await. */
    default Pending allGatherAsync(Tensor shard, Tensor full) {
        allGather(shard, full);
        return Pending.DONE;
    }

    /** Reduce-scatter that may overlap with computation queued after it; the result is usable after await. */
    default Pending reduceScatterAsync(Tensor full, Tensor shard) {
        reduceScatter(full, shard);
        return Pending.DONE;
    }

    /** All-reduce that may overlap with computation queued after it; the result is usable after await. */
    default Pending allReduceAsync(Tensor t) {
        allReduce(t);
        return Pending.DONE;
    }
}
