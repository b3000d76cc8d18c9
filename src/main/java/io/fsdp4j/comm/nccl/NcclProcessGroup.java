package io.fsdp4j.comm.nccl;

import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.comm.CollectiveWatchdog;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.Nccl;
import io.fsdp4j.cuda.NcclComm;
import io.fsdp4j.tensor.Tensor;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongConsumer;
import java.util.function.Supplier;

/**
 * A group's collectives through NCCL. Every collective of a rank runs on that rank's communication stream, after
 * the compute work queued before it (an event), so that it overlaps with the compute queued after it; the compute
 * stream waits for a collective's result only when {@link Pending#await} says so. The synchronous forms await at
 * once. Host values (counts, loss sums, squared norms) travel as doubles and make the host wait.
 *
 * <p>Memory: a buffer a collective uses must not be freed (and so reused by the allocator) before the compute
 * stream has awaited the collective; the FSDP engine frees gathered parameters and gradient buffers only after.
 *
 * <p>Watched ({@link Watch}), every collective is handed to the process's {@link CollectiveWatchdog} with two
 * events, one after its inputs and one after the collective, which the watchdog polls and releases; once the job is
 * stopping, a collective throws {@link CollectiveAbortedException} with the reason instead of being queued.
 */
public final class NcclProcessGroup implements ProcessGroup {
    /** How a rank's collectives are watched: its rank in the job, the watchdog, and why the job stops (null: it runs). */
    public record Watch(int rank, CollectiveWatchdog watchdog, Supplier<String> stopping) {}

    private final String name;
    private final NcclComm comm;
    private final CudaBackend backend;
    private final Watch watch; // null: unwatched

    /** Group {@code name} of the mesh ("world", "shard.0", ...) through {@code comm}, watched by {@code watch}. */
    public NcclProcessGroup(String name, NcclComm comm, CudaBackend backend, Watch watch) {
        this.name = name;
        this.comm = comm;
        this.backend = backend;
        this.watch = watch;
    }

    public NcclComm comm() {
        return comm;
    }

    @Override
    public int rank() {
        return comm.rank();
    }

    @Override
    public int size() {
        return comm.size();
    }

    private static Nccl.DataType type(Tensor t) {
        return Nccl.DataType.of(t.dtype());
    }

    /** An event that the caller's {@link Pending} and the watchdog both hold; destroyed when both let go. */
    private static final class SharedEvent {
        final long handle;
        private final AtomicInteger holders;

        SharedEvent(long handle, int holders) {
            this.handle = handle;
            this.holders = new AtomicInteger(holders);
        }

        void release() {
            if (holders.decrementAndGet() == 0) {
                Cuda.eventDestroy(handle);
            }
        }
    }

    private void throwIfStopping() {
        String reason = watch == null ? null : watch.stopping().get();
        if (reason != null) {
            throw new CollectiveAbortedException(reason);
        }
    }

    /**
     * Queues collective {@code what} ({@code call}, given the communication stream) after the compute work queued
     * so far (an event the communication stream waits for), so that it overlaps with the compute queued after it;
     * returns a handle on it. Watched, the collective is tracked before NCCL is called: queuing it can itself wait on
     * the host for the peers (NCCL connects lazily), and a peer that never comes must time out there too.
     */
    private Pending queue(String what, LongConsumer call) {
        throwIfStopping();
        long inputs = Cuda.eventCreate(false);
        Cuda.eventRecord(inputs, backend.stream());
        Cuda.streamWaitEvent(backend.commStream(), inputs);
        SharedEvent done = new SharedEvent(Cuda.eventCreate(false), watch == null ? 1 : 2);
        AtomicInteger state = new AtomicInteger(BEING_QUEUED);
        if (watch != null) {
            int device = comm.device();
            watch.watchdog().track(watch.rank(), what + " on group '" + name + "'",
                    onDevice(device, inputs, () -> Cuda.eventDestroy(inputs), null),
                    onDevice(device, done.handle, done::release, state));
        }
        try {
            call.accept(backend.commStream());
        } catch (RuntimeException e) {
            state.set(FAILED); // the watchdog, if it tracks it, releases its events
            if (watch == null) {
                Cuda.eventDestroy(inputs);
            }
            done.release();
            throwIfStopping(); // aborted while queuing: say why
            throw e;
        }
        Cuda.eventRecord(done.handle, backend.commStream());
        state.set(QUEUED);
        if (watch == null) {
            Cuda.eventDestroy(inputs); // released once recorded work completes
        }
        return new Pending() {
            private boolean awaited;

            @Override
            public void await() {
                if (!awaited) {
                    awaited = true;
                    Cuda.streamWaitEvent(backend.stream(), done.handle);
                    done.release();
                }
            }
        };
    }

    /** Where a collective is: NCCL is queuing it, it is queued (its event says when it is done), or queuing failed. */
    private static final int BEING_QUEUED = 0, QUEUED = 1, FAILED = 2;

    /**
     * An event of {@code device} as the watchdog polls it, from its own thread; with {@code state} (not null), not
     * done while its collective is being queued (the event is not recorded yet) and done once queuing failed.
     */
    private static CollectiveWatchdog.Completion onDevice(int device, long event, Runnable destroy, AtomicInteger state) {
        return new CollectiveWatchdog.Completion() {
            @Override
            public boolean done() {
                int now = state == null ? QUEUED : state.get();
                if (now != QUEUED) {
                    return now == FAILED;
                }
                Cuda.setDevice(device);
                return Cuda.eventQuery(event);
            }

            @Override
            public void release() {
                Cuda.setDevice(device);
                destroy.run();
            }
        };
    }

    private static String of(long count, Tensor t) {
        return " of " + count + " " + t.dtype().toString().toLowerCase(java.util.Locale.ROOT);
    }

    @Override
    public Pending allGatherAsync(Tensor shard, Tensor full) {
        if (full.numel() != shard.numel() * size() || full.dtype() != shard.dtype()) {
            throw new IllegalArgumentException("all-gather of " + shard + " into " + full);
        }
        return queue("all-gather" + of(shard.numel(), shard), stream -> comm.allGather(CudaBackend.ptr(shard),
                CudaBackend.ptr(full), shard.numel(), type(shard), stream));
    }

    @Override
    public Pending reduceScatterAsync(Tensor full, Tensor shard) {
        if (full.numel() != shard.numel() * size() || full.dtype() != shard.dtype()) {
            throw new IllegalArgumentException("reduce-scatter of " + full + " into " + shard);
        }
        return queue("reduce-scatter" + of(full.numel(), full), stream -> comm.reduceScatter(CudaBackend.ptr(full),
                CudaBackend.ptr(shard), shard.numel(), type(full), Nccl.RedOp.SUM, stream));
    }

    @Override
    public Pending allReduceAsync(Tensor t) {
        return queue("all-reduce" + of(t.numel(), t), stream -> comm.allReduce(CudaBackend.ptr(t), CudaBackend.ptr(t),
                t.numel(), type(t), Nccl.RedOp.SUM, stream));
    }

    @Override
    public void allGather(Tensor shard, Tensor full) {
        allGatherAsync(shard, full).await();
    }

    @Override
    public void reduceScatter(Tensor full, Tensor shard) {
        reduceScatterAsync(full, shard).await();
    }

    @Override
    public void allReduce(Tensor t) {
        allReduceAsync(t).await();
    }

    @Override
    public void broadcast(Tensor t, int root) {
        queue("broadcast" + of(t.numel(), t) + " from " + root, stream -> comm.broadcast(CudaBackend.ptr(t),
                CudaBackend.ptr(t), t.numel(), type(t), root, stream)).await();
    }

    @Override
    public double[] allReduce(double[] values) {
        if (size() == 1) {
            return values.clone();
        }
        try (var scratch = backend.newScope(); var entered = scratch.enter()) {
            float[] asFloats = new float[2 * values.length]; // doubles travel as pairs of 32-bit words
            for (int i = 0; i < values.length; i++) {
                long bits = Double.doubleToRawLongBits(values[i]);
                asFloats[2 * i] = Float.intBitsToFloat((int) bits);
                asFloats[2 * i + 1] = Float.intBitsToFloat((int) (bits >>> 32));
            }
            Tensor buffer = backend.upload(asFloats, asFloats.length);
            queue("all-reduce of " + values.length + " host values", stream -> comm.allReduce(CudaBackend.ptr(buffer),
                    CudaBackend.ptr(buffer), values.length, Nccl.DataType.FLOAT64, Nccl.RedOp.SUM, stream)).await();
            float[] back = backend.toFloats(buffer); // waits for the compute stream, which waited for the sum
            throwIfStopping(); // released by an abort: the sum is not one
            double[] result = new double[values.length];
            for (int i = 0; i < values.length; i++) {
                long lo = Float.floatToRawIntBits(back[2 * i]) & 0xffffffffL;
                long hi = Float.floatToRawIntBits(back[2 * i + 1]) & 0xffffffffL;
                result[i] = Double.longBitsToDouble(lo | hi << 32);
            }
            return result;
        }
    }

    @Override
    public void barrier() {
        allReduce(new double[] {0});
    }
}
