package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaBackend.ptr;
import static io.fsdp4j.backend.CudaLaunches.ROWS_PER_CHUNK;
import static io.fsdp4j.backend.CudaLaunches.chunks;
import static io.fsdp4j.backend.CudaLaunches.suffix;

import io.fsdp4j.cuda.CublasLt;
import io.fsdp4j.cuda.Kernel;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;

/**
 * {@link CudaBackend}'s linear layers: the matrix products on cuBLASLt (the forward's bias in its epilogue), a bias's
 * gradient by bias.cu's column sums.
 */
final class CudaLinear implements AutoCloseable {
    private final CublasLt blas = new CublasLt();
    private final CudaLaunches launches;
    private final CudaMemory memory;
    private final long stream;

    CudaLinear(CudaLaunches launches, CudaMemory memory) {
        this.launches = launches;
        this.memory = memory;
        this.stream = launches.stream();
    }

    void linearForward(Tensor out, Tensor x, Tensor weight, Tensor bias) {
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        blas.linearForward(ptr(out), out.dtype(), ptr(x), ptr(weight), weight.dtype(), ptr(bias), n, in, o, stream);
    }

    /** The weight gradient's product writes (beta 0) instead of adding when not accumulating: no read, no zeroing. */
    void linearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                        boolean accumulate) {
        int o = weight.dim(0), in = weight.dim(1), n = Math.toIntExact(x.numel() / in);
        if (dx != null) {
            blas.linearBackwardInput(ptr(dx), dx.dtype(), ptr(dOut), ptr(weight), weight.dtype(), n, in, o, 0f, stream);
        }
        if (CpuBackend.frozenWeight(dWeight, dBias)) { // no weight gradient wanted: no dW product, no bias reduction
            return;
        }
        blas.linearBackwardWeight(ptr(dWeight), dWeight.dtype(), ptr(dOut), ptr(x), x.dtype(), n, in, o,
                accumulate ? 1f : 0f, stream);
        if (dBias != null) {
            int chunks = chunks(n);
            try (MemoryScope scratch = memory.newScope(); var entered = scratch.enter()) {
                Tensor partials = memory.allocateForWrite(DType.F32, chunks, o); // every (chunk, column) written
                launches.launch("bias", "bias_grad_partial_" + suffix(dOut),
                        new Kernel.Dim3((o + 255) / 256, chunks, 1), 256, ptr(partials), ptr(dOut), n, o,
                        ROWS_PER_CHUNK);
                launches.launch("bias", "bias_grad_finish", (o + 255) / 256, 256, ptr(dBias), ptr(partials), chunks, o,
                        accumulate ? 1 : 0); // not accumulating: written, no zeroing first
            }
        }
    }

    @Override
    public void close() {
        blas.close();
    }
}
