package io.fsdp4j.comm.inprocess;

import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;

/**
 * One member's collectives in an {@link InProcessGroup} whose members are CUDA ranks on one GPU
 * ({@code dist.share_gpu}): each reads the others' published tensors straight from device memory on its own compute
 * stream. Sums are taken in fp32 in rank order and rounded once to the destination's type, as the CPU members' are.
 *
 * <p>Every collective is synchronous: a member waits for its compute stream before it publishes an input (the input
 * is then complete on the device) and again before the closing meeting (its reads of the others' inputs are done, so
 * they may change them). That costs the overlap NCCL gives; these groups exist to check what several ranks compute,
 * not to time it.
 */
final class InProcessGpuMember implements ProcessGroup {
    private final InProcessGroup group;
    private final int rank;
    private final CudaBackend backend;

    InProcessGpuMember(InProcessGroup group, int rank, CudaBackend backend) {
        this.group = group;
        this.rank = rank;
        this.backend = backend;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return group.size();
    }

    /** This member's input once its compute stream has written it, and every member's. */
    private Tensor[] exchange(Tensor mine) {
        backend.synchronize();
        Object[] all = group.exchange(rank, mine);
        Tensor[] inputs = new Tensor[all.length];
        for (int r = 0; r < all.length; r++) {
            inputs[r] = (Tensor) all[r];
        }
        return inputs;
    }

    /** Waits for this member's reads of the others' inputs, then for every member's. */
    private void finish() {
        backend.synchronize();
        group.await();
    }

    private static void requireSizes(String what, Tensor shard, Tensor full, int members) {
        if (full.numel() != shard.numel() * members || full.dtype() != shard.dtype()) {
            throw new IllegalArgumentException(what + " of " + shard + " and " + full + " across " + members);
        }
    }

    @Override
    public void allGather(Tensor shard, Tensor full) {
        requireSizes("all-gather", shard, full, size());
        Tensor[] all = exchange(shard);
        int n = Math.toIntExact(shard.numel());
        for (int r = 0; r < all.length; r++) {
            backend.copy(all[r], full.view((long) r * n, n));
        }
        finish();
    }

    /** The fp32 sum, in rank order, of elements [offset, offset + n) of every member's input, in this rank's scope. */
    private Tensor sum(Tensor[] all, long offset, int n) {
        Tensor total = backend.allocateForWrite(DType.F32, n);
        backend.copy(all[0].view(offset, n), total);
        for (int r = 1; r < all.length; r++) {
            backend.add(total, all[r].view(offset, n));
        }
        return total;
    }

    @Override
    public void reduceScatter(Tensor full, Tensor shard) {
        requireSizes("reduce-scatter", shard, full, size());
        int n = Math.toIntExact(shard.numel());
        try (var scratch = backend.newScope(); var entered = scratch.enter()) {
            Tensor[] all = exchange(full);
            backend.copy(sum(all, (long) rank * n, n), shard);
            finish();
        }
    }

    @Override
    public void allReduce(Tensor t) {
        try (var scratch = backend.newScope(); var entered = scratch.enter()) {
            Tensor total = sum(exchange(t), 0, Math.toIntExact(t.numel()));
            finish(); // every member has read the inputs before any overwrites its own
            backend.copy(total, t);
            backend.synchronize(); // before the scratch sum is released
        }
    }

    @Override
    public void broadcast(Tensor t, int root) {
        Tensor[] all = exchange(t);
        if (rank != root) {
            backend.copy(all[root], t);
        }
        finish();
    }

    @Override
    public double[] allReduce(double[] values) {
        return group.sumHostValues(rank, values);
    }

    @Override
    public void barrier() {
        group.await();
    }
}
