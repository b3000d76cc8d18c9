package io.fsdp4j.dist;

import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.cuda.Nccl;
import io.fsdp4j.cuda.NcclComm;
import io.fsdp4j.tensor.Tensor;

/**
 * A group's collectives through NCCL, on the rank's compute stream (so they are ordered with the ops around them
 * without the host waiting). Host values (counts, loss sums, squared norms) travel as doubles through a small
 * device buffer, which makes the host wait for the stream.
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

    @Override
    public void allGather(Tensor shard, Tensor full) {
        if (full.numel() != shard.numel() * size() || full.dtype() != shard.dtype()) {
            throw new IllegalArgumentException("all-gather of " + shard + " into " + full);
        }
        comm.allGather(CudaBackend.ptr(shard), CudaBackend.ptr(full), shard.numel(), type(shard), backend.stream());
    }

    @Override
    public void reduceScatter(Tensor full, Tensor shard) {
        if (full.numel() != shard.numel() * size() || full.dtype() != shard.dtype()) {
            throw new IllegalArgumentException("reduce-scatter of " + full + " into " + shard);
        }
        comm.reduceScatter(CudaBackend.ptr(full), CudaBackend.ptr(shard), shard.numel(), type(full), Nccl.RedOp.SUM,
                backend.stream());
    }

    @Override
    public void allReduce(Tensor t) {
        comm.allReduce(CudaBackend.ptr(t), CudaBackend.ptr(t), t.numel(), type(t), Nccl.RedOp.SUM, backend.stream());
    }

    @Override
    public void broadcast(Tensor t, int root) {
        comm.broadcast(CudaBackend.ptr(t), CudaBackend.ptr(t), t.numel(), type(t), root, backend.stream());
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
                    Nccl.RedOp.SUM, backend.stream());
            float[] back = backend.toFloats(buffer);
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
