package io.fsdp4j.comm.inprocess;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.cpu.Parallel;
import io.fsdp4j.comm.AbortableBarrier;
import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.time.Duration;
import java.util.List;

/**
 * Collectives between ranks that are threads of one process. Each member publishes its input, all meet at a
 * barrier, each computes its own output from the published inputs (in rank order), and all meet again before inputs
 * may change. A member that does not arrive within the timeout, or an {@link #abort}, releases everyone with a
 * {@link CollectiveAbortedException}. Members on CPU tensors ({@link #member}) compute on the host; members that are
 * CUDA ranks ({@link #gpuMember}) copy and sum on their devices ({@link InProcessGpuMember}).
 */
public final class InProcessGroup {
    private final String name;
    private final List<Integer> globalRanks;
    private final AbortableBarrier barrier;
    private final Duration timeout;
    private final Object[] slots;
    private volatile Runnable beforeWait; // tests only: a delay between deciding to wait and waiting

    public InProcessGroup(String name, List<Integer> globalRanks, Duration timeout) {
        this.name = name;
        this.globalRanks = List.copyOf(globalRanks);
        this.barrier = new AbortableBarrier(globalRanks.size());
        this.timeout = timeout;
        this.slots = new Object[globalRanks.size()];
    }

    public String name() {
        return name;
    }

    public List<Integer> globalRanks() {
        return globalRanks;
    }

    /** Releases every member waiting now or later with the given reason (the first abort's reason stands). */
    public void abort(String reason) {
        barrier.abort(reason);
    }

    /** Tests: runs {@code hook} in every member just before it waits for the others (null: nothing). */
    public void beforeEveryWait(Runnable hook) {
        beforeWait = hook;
    }

    /** The view of the group for one member whose tensors are CPU tensors. */
    public ProcessGroup member(int rank) {
        return new Member(rank);
    }

    /** The view of the group for one member that is a CUDA rank (several may share a GPU). */
    public ProcessGroup gpuMember(int rank, io.fsdp4j.backend.CudaBackend backend) {
        return new InProcessGpuMember(this, rank, backend);
    }

    int size() {
        return slots.length;
    }

    /** Publishes member {@code rank}'s input and waits for every member's: the inputs, by rank. */
    Object[] exchange(int rank, Object mine) {
        slots[rank] = mine;
        await();
        return slots;
    }

    /** Member {@code rank}'s part in an all-reduce of host values: their sums, in rank order. */
    double[] sumHostValues(int rank, double[] values) {
        Object[] all = exchange(rank, values);
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

    /** Waits until every member has arrived here (or the group is aborted or times out). */
    void await() {
        Runnable hook = beforeWait;
        if (hook != null) {
            hook.run();
        }
        if (!Parallel.lendingCore(() -> barrier.await(timeout))) { // CPU ranks' loops may use this core meanwhile
            abort("collective on group '" + name + "' timed out after " + timeout.toSeconds()
                    + " s: a rank of " + globalRanks + " did not arrive");
            throw new CollectiveAbortedException(barrier.abortReason().orElseThrow());
        }
    }

    private static float get(Tensor t, int i) {
        return t.dtype() != DType.F32 ? Half.fromBits(t.dtype(), CpuBackend.halves(t)[CpuBackend.off(t) + i])
                : CpuBackend.f32(t)[CpuBackend.off(t) + i];
    }

    private static void set(Tensor t, int i, float v) {
        if (t.dtype() != DType.F32) {
            CpuBackend.halves(t)[CpuBackend.off(t) + i] = Half.toBits(t.dtype(), v);
        } else {
            CpuBackend.f32(t)[CpuBackend.off(t) + i] = v;
        }
    }

    private static boolean allF32(Object[] all) {
        for (Object o : all) {
            if (((Tensor) o).dtype() != DType.F32) {
                return false;
            }
        }
        return true;
    }

    /** Values for which {@link #sumF32} sums in a buffer of its own before writing. */
    private static final int SUM_CHUNK = 4096;
    private static final ThreadLocal<float[]> SUM_BUFFER = ThreadLocal.withInitial(() -> new float[SUM_CHUNK]);

    /**
     * out[oo + i] = 0f + in_0[base + i] + in_1[base + i] + ... (rank order; the same bits as one value at a time),
     * for F32 inputs, a chunk at a time in a buffer: out may be a view of this member's own input.
     */
    private static void sumF32(Object[] all, int base, float[] out, int oo, int n) {
        float[] acc = SUM_BUFFER.get();
        for (int c0 = 0; c0 < n; c0 += SUM_CHUNK) {
            int len = Math.min(SUM_CHUNK, n - c0);
            java.util.Arrays.fill(acc, 0, len, 0f);
            for (Object o : all) {
                Tensor t = (Tensor) o;
                float[] in = CpuBackend.f32(t);
                int io = CpuBackend.off(t) + base + c0;
                for (int i = 0; i < len; i++) {
                    acc[i] += in[io + i];
                }
            }
            System.arraycopy(acc, 0, out, oo + c0, len);
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
            return InProcessGroup.this.exchange(rank, mine);
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
            if (allF32(all) && shard.dtype() == DType.F32) {
                sumF32(all, base, CpuBackend.f32(shard), CpuBackend.off(shard), n);
            } else {
                for (int i = 0; i < n; i++) {
                    float sum = 0f;
                    for (Object t : all) {
                        sum += get((Tensor) t, base + i);
                    }
                    set(shard, i, sum);
                }
            }
            await();
        }

        @Override
        public void allReduce(Tensor t) {
            Object[] all = exchange(t);
            int n = Math.toIntExact(t.numel());
            float[] sum = new float[n];
            if (allF32(all)) {
                sumF32(all, 0, sum, 0, n);
            } else {
                for (Object o : all) {
                    Tensor other = (Tensor) o;
                    for (int i = 0; i < n; i++) {
                        sum[i] += get(other, i);
                    }
                }
            }
            await(); // everyone has read the inputs before anyone overwrites its own
            if (t.dtype() == DType.F32) {
                System.arraycopy(sum, 0, CpuBackend.f32(t), CpuBackend.off(t), n);
            } else {
                for (int i = 0; i < n; i++) {
                    set(t, i, sum[i]);
                }
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
            return sumHostValues(rank, values);
        }

        @Override
        public void barrier() {
            await();
        }
    }
}
