package io.fsdp4j.dist;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Collectives between ranks that are threads of one process, on CPU tensors. Each member publishes its
 * input, all meet at a barrier, each computes its own output from the published inputs (in rank order), and
 * all meet again before inputs may change. A member that does not arrive within the timeout, or an
 * {@link #abort}, releases everyone with a {@link CollectiveAbortedException}.
 */
public final class InProcessGroup {
    private final String name;
    private final List<Integer> globalRanks;
    private final CyclicBarrier barrier;
    private final Duration timeout;
    private final Object[] slots;
    private volatile String abortReason;

    public InProcessGroup(String name, List<Integer> globalRanks, Duration timeout) {
        this.name = name;
        this.globalRanks = List.copyOf(globalRanks);
        this.barrier = new CyclicBarrier(globalRanks.size());
        this.timeout = timeout;
        this.slots = new Object[globalRanks.size()];
    }

    public String name() {
        return name;
    }

    public List<Integer> globalRanks() {
        return globalRanks;
    }

    /** Releases every member waiting now or later with the given reason. */
    public void abort(String reason) {
        abortReason = reason;
        barrier.reset();
    }

    /** The view of the group for one member. */
    public ProcessGroup member(int rank) {
        return new Member(rank);
    }

    private void await() {
        if (abortReason != null) {
            throw new CollectiveAbortedException(abortReason);
        }
        try {
            barrier.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            abort("collective on group '" + name + "' timed out after " + timeout.toSeconds()
                    + " s: a rank of " + globalRanks + " did not arrive");
            throw new CollectiveAbortedException(abortReason);
        } catch (BrokenBarrierException e) {
            throw new CollectiveAbortedException(abortReason != null ? abortReason
                    : "collective on group '" + name + "' was broken by another rank");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CollectiveAbortedException("interrupted while waiting on group '" + name + "'");
        }
    }

    private static float get(Tensor t, int i) {
        return t.dtype() == DType.BF16 ? Half.fromBf16(CpuBackend.bf16(t)[CpuBackend.off(t) + i])
                : CpuBackend.f32(t)[CpuBackend.off(t) + i];
    }

    private static void set(Tensor t, int i, float v) {
        if (t.dtype() == DType.BF16) {
            CpuBackend.bf16(t)[CpuBackend.off(t) + i] = Half.toBf16(v);
        } else {
            CpuBackend.f32(t)[CpuBackend.off(t) + i] = v;
        }
    }

    private final class Member implements ProcessGroup {
        private final int rank;

        Member(int rank) {
            this.rank = rank;
        }

        @Override
        public int rank() {
            return rank;
        }

        @Override
        public int size() {
            return slots.length;
        }

        private Object[] exchange(Object mine) {
            slots[rank] = mine;
            await();
            return slots;
        }

        @Override
        public void allGather(Tensor shard, Tensor full) {
            Object[] all = exchange(shard);
            long n = shard.numel();
            if (full.numel() != n * size()) {
                throw new IllegalArgumentException("all-gather of " + shard + " into " + full);
            }
            for (int r = 0; r < size(); r++) {
                CpuBackend.INSTANCE.copy((Tensor) all[r], full.view(r * n, Math.toIntExact(n)));
            }
            await();
        }

        @Override
        public void reduceScatter(Tensor full, Tensor shard) {
            Object[] all = exchange(full);
            int n = Math.toIntExact(shard.numel());
            if (full.numel() != (long) n * size()) {
                throw new IllegalArgumentException("reduce-scatter of " + full + " into " + shard);
            }
            int base = rank * n;
            for (int i = 0; i < n; i++) {
                float sum = 0f;
                for (Object t : all) {
                    sum += get((Tensor) t, base + i);
                }
                set(shard, i, sum);
            }
            await();
        }

        @Override
        public void allReduce(Tensor t) {
            Object[] all = exchange(t);
            int n = Math.toIntExact(t.numel());
            float[] sum = new float[n];
            for (Object o : all) {
                Tensor other = (Tensor) o;
                for (int i = 0; i < n; i++) {
                    sum[i] += get(other, i);
                }
            }
            await(); // everyone has read the inputs before anyone overwrites its own
            for (int i = 0; i < n; i++) {
                set(t, i, sum[i]);
            }
        }

        @Override
        public void broadcast(Tensor t, int root) {
            Object[] all = exchange(t);
            if (rank != root) {
                CpuBackend.INSTANCE.copy((Tensor) all[root], t);
            }
            await();
        }

        @Override
        public double[] allReduce(double[] values) {
            Object[] all = exchange(values);
            double[] sum = new double[values.length];
            for (Object o : all) {
                double[] other = (double[]) o;
                for (int i = 0; i < sum.length; i++) {
                    sum[i] += other[i];
                }
            }
            await();
            return sum;
        }

        @Override
        public void barrier() {
            await();
        }
    }
}
