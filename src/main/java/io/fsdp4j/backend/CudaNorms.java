package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaBackend.ptr;
import static io.fsdp4j.backend.CudaLaunches.ROWS_PER_CHUNK;
import static io.fsdp4j.backend.CudaLaunches.bf16x8;
import static io.fsdp4j.backend.CudaLaunches.chunks;
import static io.fsdp4j.backend.CudaLaunches.rowThreads;
import static io.fsdp4j.backend.CudaLaunches.suffix;

import io.fsdp4j.cuda.Kernel;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;

/**
 * {@link CudaBackend}'s norms (rmsnorm.cu, layernorm.cu): RMSNorm of rows and of single heads (Qwen3's and Gemma 3's
 * q_norm and k_norm), LayerNorm. A block a row; a weight's gradient in two launches, each chunk of rows summed into a
 * partial row of fp32 scratch ({@link CudaLaunches#chunks}), then the partials into the gradient (added, or written
 * when not accumulating).
 */
final class CudaNorms {
    private final CudaLaunches launches;
    private final CudaMemory memory;

    CudaNorms(CudaLaunches launches, CudaMemory memory) {
        this.launches = launches;
        this.memory = memory;
    }

    void rmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps) {
        int c = weight.dim(0), n = Math.toIntExact(x.numel() / c);
        if (bf16x8(c, x, out, weight)) {
            launches.launch("rmsnorm", "rmsnorm_forward_bf16_x8", n, rowThreads(c / 8), ptr(out), ptr(rstd), ptr(x),
                    ptr(weight), n, c, eps);
        } else {
            launches.launch("rmsnorm", "rmsnorm_forward_" + suffix(x), n, 256, ptr(out), ptr(rstd), ptr(x),
                    ptr(weight), n, c, eps);
        }
    }

    /** Not accumulating, the weight gradient's last kernel writes it: no zeroing first. */
    void rmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd,
                         boolean accumulate) {
        int c = weight.dim(0), n = Math.toIntExact(x.numel() / c);
        String t = suffix(x);
        if (bf16x8(c, x, dx, dOut, weight)) {
            launches.launch("rmsnorm", "rmsnorm_backward_bf16_x8", n, rowThreads(c / 8), ptr(dx), ptr(dOut), ptr(x),
                    ptr(weight), ptr(rstd), n, c);
        } else {
            launches.launch("rmsnorm", "rmsnorm_backward_" + t, n, 256, ptr(dx), ptr(dOut), ptr(x), ptr(weight),
                    ptr(rstd), n, c);
        }
        int chunks = chunks(n);
        try (MemoryScope scratch = memory.newScope(); var in = scratch.enter()) {
            Tensor partials = memory.allocateForWrite(DType.F32, chunks, c); // every (chunk, column) written
            launches.launch("rmsnorm", "rmsnorm_dweight_partial_" + t, new Kernel.Dim3((c + 255) / 256, chunks, 1),
                    256, ptr(partials), ptr(dOut), ptr(x), ptr(rstd), n, c, ROWS_PER_CHUNK);
            launches.launch("rmsnorm", "rmsnorm_dweight_finish", (c + 255) / 256, 256, ptr(dWeight), ptr(partials),
                    chunks, c, accumulate ? 1 : 0);
        }
    }

    void headRmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, int firstHead, float eps) {
        int hs = weight.dim(0), n = rstd.dim(0), heads = rstd.dim(1), width = Math.toIntExact(x.numel() / n);
        launches.launch("rmsnorm", "head_rmsnorm_forward_" + suffix(x), n, 256, ptr(out), ptr(rstd), ptr(x),
                ptr(weight), n, width, firstHead, heads, hs, eps);
    }

    /** The weight gradient first: dx may be dOut, which it reads. */
    void headRmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd,
                             int firstHead, boolean accumulate) {
        int hs = weight.dim(0), n = rstd.dim(0), heads = rstd.dim(1), width = Math.toIntExact(x.numel() / n);
        String t = suffix(x);
        int chunks = chunks(n);
        try (MemoryScope scratch = memory.newScope(); var in = scratch.enter()) {
            Tensor partials = memory.allocateForWrite(DType.F32, chunks, hs); // every (chunk, column) written
            launches.launch("rmsnorm", "head_rmsnorm_dweight_partial_" + t,
                    new Kernel.Dim3((hs + 255) / 256, chunks, 1), 256, ptr(partials), ptr(dOut), ptr(x), ptr(rstd), n,
                    width, firstHead, heads, hs, ROWS_PER_CHUNK);
            launches.launch("rmsnorm", "rmsnorm_dweight_finish", (hs + 255) / 256, 256, ptr(dWeight), ptr(partials),
                    chunks, hs, accumulate ? 1 : 0);
        }
        launches.launch("rmsnorm", "head_rmsnorm_backward_" + t, n, 256, ptr(dx), ptr(dOut), ptr(x), ptr(weight),
                ptr(rstd), n, width, firstHead, heads, hs);
    }

    void layerNormForward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias, float eps) {
        int c = weight.dim(0), n = Math.toIntExact(x.numel() / c);
        launches.launch("layernorm", "layernorm_forward_" + suffix(x), n, 256, ptr(out), ptr(mean), ptr(rstd), ptr(x),
                ptr(weight), ptr(bias), n, c, eps);
    }

    void layerNormBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                           Tensor mean, Tensor rstd) {
        int c = weight.dim(0), n = Math.toIntExact(x.numel() / c);
        String t = suffix(x);
        launches.launch("layernorm", "layernorm_backward_" + t, n, 256, ptr(dx), ptr(dOut), ptr(x), ptr(weight),
                ptr(mean), ptr(rstd), n, c);
        int chunks = chunks(n);
        try (MemoryScope scratch = memory.newScope(); var in = scratch.enter()) {
            // every (chunk, column) written
            Tensor partialsW = memory.allocateForWrite(DType.F32, chunks, c);
            Tensor partialsB = memory.allocateForWrite(DType.F32, chunks, c);
            launches.launch("layernorm", "layernorm_dparams_partial_" + t, new Kernel.Dim3((c + 255) / 256, chunks, 1),
                    256, ptr(partialsW), ptr(partialsB), ptr(dOut), ptr(x), ptr(mean), ptr(rstd), n, c,
                    ROWS_PER_CHUNK);
            launches.launch("layernorm", "layernorm_dparams_finish", (c + 255) / 256, 256, ptr(dWeight), ptr(dBias),
                    ptr(partialsW), ptr(partialsB), chunks, c);
        }
    }
}
