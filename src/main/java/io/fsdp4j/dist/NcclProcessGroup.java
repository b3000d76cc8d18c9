package io.fsdp4j.dist;

import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.Nccl;
import io.fsdp4j.cuda.NcclComm;
import io.fsdp4j.tensor.Tensor;

/**
 * A group's collectives through NCCL. Every collective of a rank runs on that rank's communication stream, after
 * the compute work queued before it (an event), so that it overlaps with the compute queued after it; the compute
 * stream waits for a collective's result only when {@link Pending#await} says so. The synchronous forms await at
 * once. Host values (counts, loss sums, squared norms) travel as doubles and make the host wait.
 *
 * <p>Memory: a buffer a collective uses must not be freed (and so reused by the allocator) before the compute
 * stream has awaited the collective; the FSDP engine frees gathered parameters and gradient buffers only after.
 */
public final class NcclProcessGroup implements ProcessGroup {
    private final NcclComm comm;
    private final CudaBackend backend;

    public NcclProcessGroup(NcclComm comm, CudaBackend backend) {
        this.comm = comm;
        this.backend = backend;
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

    /** Makes the communication stream wait for the compute work queued so far. */
    private long afterCompute() {
        long ready = Cuda.eventCreate(false);
        Cuda.eventRecord(ready, backend.stream());
        Cuda.streamWaitEvent(backend.commStream(), ready);
        Cuda.eventDestroy(ready); // released once recorded work completes
        return backend.commStream();
    }

    /** A handle on what the communication stream has queued so far. */
    private Pending pending() {
        long done = Cuda.eventCreate(false);
        Cuda.eventRecord(done, backend.commStream());
        return new Pending() {
            private boolean awaited;

            @Override
            public void await() {
                if (!awaited) {
                    awaited = true;
                    Cuda.streamWaitEvent(backend.stream(), done);
                    Cuda.eventDestroy(done);
                }
            }
        };
    }

    @Override
    public Pending allGatherAsync(Tensor shard, Tensor full) {
        if (full.numel() != shard.numel() * size() || full.dtype() != shard.dtype()) {
            throw new IllegalArgumentException("all-gather of " + shard + " into " + full);
        }
        comm.allGather(CudaBackend.ptr(shard), CudaBackend.ptr(full), shard.numel(), type(shard), afterCompute());
        return pending();
    }

    @Override
    public Pending reduceScatterAsync(Tensor full, Tensor shard) {
        if (full.numel() != shard.numel() * size() || full.dtype() != shard.dtype()) {
            throw new IllegalArgumentException("reduce-scatter of " + full + " into " + shard);
        }
        comm.reduceScatter(CudaBackend.ptr(full), CudaBackend.ptr(shard), shard.numel(), type(full), Nccl.RedOp.SUM,
                afterCompute());
        return pending();
    }

    @Override
    public Pending allReduceAsync(Tensor t) {
        comm.allReduce(CudaBackend.ptr(t), CudaBackend.ptr(t), t.numel(), type(t), Nccl.RedOp.SUM, afterCompute());
        return pending();
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
        comm.broadcast(CudaBackend.ptr(t), CudaBackend.ptr(t), t.numel(), type(t), root, afterCompute());
        pending().await();
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
            comm.allReduce(CudaBackend.ptr(buffer), CudaBackend.ptr(buffer), values.length, Nccl.DataType.FLOAT64,
                    Nccl.RedOp.SUM, afterCompute());
            pending().await();
            float[] back = backend.toFloats(buffer); // waits for the compute stream, which waited for the sum
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
