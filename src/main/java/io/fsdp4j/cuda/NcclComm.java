package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Native.INT;
import static io.fsdp4j.cuda.Native.LONG;
import static io.fsdp4j.cuda.Native.PTR;
import static io.fsdp4j.cuda.Native.lazy;

import io.fsdp4j.cuda.Nccl.DataType;
import io.fsdp4j.cuda.Nccl.RedOp;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * One rank's NCCL communicator, on the device that was current when it was made ({@link Nccl#initRank}). The
 * collectives are queued on a stream and return at once; buffers are device pointers and counts are elements.
 * Every rank must call the same collectives in the same order.
 *
 * <p>{@link #abort} may come from another thread (a watchdog, a failure heard from another process) while the
 * rank's thread queues collectives: a collective is queued under a read lock that abort takes for writing, so none
 * is queued on a freed communicator; one called after the abort throws an {@link IllegalStateException}.
 */
public final class NcclComm implements AutoCloseable {
    private static final MethodHandle ncclAllReduce = lazy(Nccl.LIB, "ncclAllReduce", INT,
            LONG, LONG, LONG, INT, INT, LONG, LONG);
    private static final MethodHandle ncclAllGather = lazy(Nccl.LIB, "ncclAllGather", INT,
            LONG, LONG, LONG, INT, LONG, LONG);
    private static final MethodHandle ncclReduceScatter = lazy(Nccl.LIB, "ncclReduceScatter", INT,
            LONG, LONG, LONG, INT, INT, LONG, LONG);
    private static final MethodHandle ncclBroadcast = lazy(Nccl.LIB, "ncclBroadcast", INT,
            LONG, LONG, LONG, INT, INT, LONG, LONG);
    private static final MethodHandle ncclCommGetAsyncError = lazy(Nccl.LIB, "ncclCommGetAsyncError", INT, LONG, PTR);
    private static final MethodHandle ncclCommAbort = lazy(Nccl.LIB, "ncclCommAbort", INT, LONG);
    private static final MethodHandle ncclCommDestroy = lazy(Nccl.LIB, "ncclCommDestroy", INT, LONG);
    /** How long {@link #abort} waits for a collective being queued (NCCL may block there, connecting to a stuck peer). */
    private static final long ABORT_WAIT_MS = 2000;

    private final long handle;
    private final int rank;
    private final int size;
    private final int device;
    private final ReentrantReadWriteLock use = new ReentrantReadWriteLock();
    private volatile boolean closed;

    NcclComm(long handle, int rank, int size, int device) {
        this.handle = handle;
        this.rank = rank;
        this.size = size;
        this.device = device;
    }

    public int rank() {
        return rank;
    }

    public int size() {
        return size;
    }

    public int device() {
        return device;
    }

    /** The ncclComm_t. */
    public long handle() {
        return handle;
    }

    /** recv (count) = op over ranks of send (count); in place when send == recv. */
    public void allReduce(long send, long recv, long count, DataType type, RedOp op, long stream) {
        queue(() -> OpTimeline.around("nccl all-reduce " + type, stream, () -> {
            try {
                Nccl.check("ncclAllReduce", (int) ncclAllReduce.invokeExact(send, recv, count, type.code, op.code, handle,
                        stream), handle);
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
        }));
    }

    /** recv (size * sendCount) = the ranks' send (sendCount) buffers in rank order; in place when send == recv + rank * sendCount. */
    public void allGather(long send, long recv, long sendCount, DataType type, long stream) {
        queue(() -> OpTimeline.around("nccl all-gather " + type, stream, () -> {
            try {
                Nccl.check("ncclAllGather", (int) ncclAllGather.invokeExact(send, recv, sendCount, type.code, handle,
                        stream), handle);
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
        }));
    }

    /** recv (recvCount) = this rank's slice of op over ranks of send (size * recvCount). */
    public void reduceScatter(long send, long recv, long recvCount, DataType type, RedOp op, long stream) {
        queue(() -> OpTimeline.around("nccl reduce-scatter " + type, stream, () -> {
            try {
                Nccl.check("ncclReduceScatter", (int) ncclReduceScatter.invokeExact(send, recv, recvCount, type.code,
                        op.code, handle, stream), handle);
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
        }));
    }

    /** recv (count) on every rank = send (count) of {@code root}. */
    public void broadcast(long send, long recv, long count, DataType type, int root, long stream) {
        queue(() -> OpTimeline.around("nccl broadcast " + type, stream, () -> {
            try {
                Nccl.check("ncclBroadcast", (int) ncclBroadcast.invokeExact(send, recv, count, type.code, root, handle,
                        stream), handle);
            } catch (Throwable t) {
                throw Native.rethrow(t);
            }
        }));
    }

    /** Queues a collective unless the communicator was aborted or closed. */
    private void queue(Runnable call) {
        if (!use.readLock().tryLock()) {
            throw aborted();
        }
        try {
            if (closed) {
                throw aborted();
            }
            call.run();
        } finally {
            use.readLock().unlock();
        }
    }

    private IllegalStateException aborted() {
        return new IllegalStateException("NCCL communicator (rank " + rank + " of " + size + ") was aborted");
    }

    /** Throws the communicator's asynchronous error (a failed peer, a network error), if it has one. */
    public void checkAsyncError() {
        if (closed) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(INT);
            Nccl.check("ncclCommGetAsyncError", (int) ncclCommGetAsyncError.invokeExact(handle, out), handle);
            int async = out.get(INT, 0);
            if (async != 0 && async != 7) { // 7 = ncclInProgress
                Nccl.check("NCCL communicator (rank " + rank + ")", async, handle);
            }
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /**
     * Frees the communicator at once, abandoning queued work and releasing the collectives running on the device:
     * for error paths (a peer failed or hangs). Any thread may call it, once or more.
     */
    public void abort() {
        boolean locked = false;
        try {
            locked = use.writeLock().tryLock(ABORT_WAIT_MS, TimeUnit.MILLISECONDS); // else abort all the same
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            if (!release()) {
                return;
            }
            Nccl.check("ncclCommAbort", (int) ncclCommAbort.invokeExact(handle), 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            if (locked) {
                use.writeLock().unlock();
            }
        }
    }

    /** Waits for queued work and frees the communicator (ncclCommDestroy); nothing when it was aborted. */
    @Override
    public void close() {
        use.writeLock().lock();
        try {
            if (!release()) {
                return;
            }
            Nccl.check("ncclCommDestroy", (int) ncclCommDestroy.invokeExact(handle), 0);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        } finally {
            use.writeLock().unlock();
        }
    }

    /** Marks the communicator freed: true the first time. */
    private synchronized boolean release() {
        if (closed) {
            return false;
        }
        closed = true;
        return true;
    }
}
