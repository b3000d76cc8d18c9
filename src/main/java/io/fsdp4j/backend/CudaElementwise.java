package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaBackend.ptr;
import static io.fsdp4j.backend.CudaLaunches.aligned16;
import static io.fsdp4j.backend.CudaLaunches.bf16x8;
import static io.fsdp4j.backend.CudaLaunches.gridFor;
import static io.fsdp4j.backend.CudaLaunches.suffix;

import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.List;

/**
 * {@link CudaBackend}'s element-wise ops (elementwise.cu, swiglu.cu, gelu.cu, dropout.cu): fill, copies and the casts
 * between fp32 and bf16 or fp16, add, scale, sums of squares, the MLPs' gated activations and GELU, soft caps and
 * dropout. A kernel a type; bf16 rows of whole 8s, 16-byte aligned, go to the _x8 kernels.
 */
final class CudaElementwise {
    /** Blocks of one tensor's partial sums of squares (at most). */
    private static final int SUMSQ_BLOCKS = 1024;
    private final CudaLaunches launches;
    private final CudaMemory memory;

    CudaElementwise(CudaLaunches launches, CudaMemory memory) {
        this.launches = launches;
        this.memory = memory;
    }

    void fill(Tensor t, float value) {
        long n = t.numel();
        Object v = t.dtype() == DType.I32 ? (Object) (int) value : (Object) value;
        launches.launch("elementwise", "fill_" + suffix(t), gridFor(n), 256, ptr(t), n, v);
    }

    void copy(Tensor src, Tensor dst) {
        if (src.numel() != dst.numel()) {
            throw new IllegalArgumentException("size mismatch: " + src + " vs " + dst);
        }
        long n = src.numel();
        if (src.dtype() == dst.dtype()) {
            Cuda.copyOnDeviceAsync(ptr(dst), ptr(src), n * src.dtype().bytes(), launches.stream());
        } else if (src.dtype() == DType.F32 && dst.dtype() == DType.BF16) {
            if (ptr(src) % 16 == 0 && ptr(dst) % 8 == 0) { // vector loads and stores: the master shards' casts
                launches.launch("elementwise", "cast_f32_to_bf16_x4", gridFor((n + 3) / 4), 256, ptr(dst), ptr(src), n);
            } else {
                launches.launch("elementwise", "cast_f32_to_bf16", gridFor(n), 256, ptr(dst), ptr(src), n);
            }
        } else if (src.dtype() == DType.BF16 && dst.dtype() == DType.F32) {
            launches.launch("elementwise", "cast_bf16_to_f32", gridFor(n), 256, ptr(dst), ptr(src), n);
        } else if (src.dtype() == DType.F32 && dst.dtype() == DType.F16) {
            launches.launch("elementwise", "cast_f32_to_f16", gridFor(n), 256, ptr(dst), ptr(src), n);
        } else if (src.dtype() == DType.F16 && dst.dtype() == DType.F32) {
            launches.launch("elementwise", "cast_f16_to_f32", gridFor(n), 256, ptr(dst), ptr(src), n);
        } else {
            throw new IllegalArgumentException("cannot copy " + src + " to " + dst);
        }
    }

    void add(Tensor dst, Tensor src) {
        long n = src.numel();
        if (dst.dtype() == DType.BF16 && src.dtype() == DType.BF16 && aligned16(dst, src)) {
            launches.launch("elementwise", "add_bf16_bf16_x8", gridFor((n + 7) / 8), 256, ptr(dst), ptr(src), n);
            return;
        }
        launches.launch("elementwise", "add_" + suffix(dst) + "_" + suffix(src), gridFor(n), 256, ptr(dst), ptr(src),
                n);
    }

    void scale(Tensor t, float factor) {
        long n = t.numel();
        launches.launch("elementwise", "scale_" + suffix(t), gridFor(n), 256, ptr(t), n, factor);
    }

    /**
     * Each tensor's partial sums (a block's grid-stride share, in double) and their total, every total into one
     * device buffer, read back with one wait for the stream.
     */
    double[] sumsOfSquares(List<Tensor> tensors) {
        int count = tensors.size();
        if (count == 0) {
            return new double[0];
        }
        try (MemoryScope scratch = memory.newScope(); var in = scratch.enter()) {
            // scratch the kernels write whole: no zeroing
            Tensor partials = memory.allocateForWrite(DType.F32, 2 * SUMSQ_BLOCKS); // doubles, reused tensor by tensor
            Tensor totals = memory.allocateForWrite(DType.F32, 2 * count); // doubles
            for (int i = 0; i < count; i++) {
                Tensor t = tensors.get(i);
                long n = t.numel();
                int blocks = (int) Math.max(1, Math.min((n + 255) / 256, SUMSQ_BLOCKS));
                launches.launch("elementwise", "sumsq_partial_" + suffix(t), blocks, 256, ptr(partials), ptr(t), n);
                launches.launch("elementwise", "sumsq_final", 1, 256, ptr(totals) + 8L * i, ptr(partials), blocks);
            }
            return memory.readDoubles(totals, count);
        }
    }

    /**
     * swiglu.cu's forward; with {@code amax} (a zeroed slot's address, else 0) on the eight-wide bf16 kernel, out's
     * amax maxed into it too. Returns whether it was.
     */
    boolean swigluForward(Tensor out, Tensor gateUp, long amax) {
        int f = gateUp.dim(-1) / 2, n = Math.toIntExact(gateUp.numel() / (2L * f));
        boolean x8 = bf16x8(f, gateUp, out);
        if (x8 && amax != 0) {
            launches.launch("swiglu", "swiglu_forward_bf16_x8_amax", n, 256, ptr(out), ptr(gateUp), n, f, amax);
            return true;
        }
        launches.launch("swiglu", "swiglu_forward_" + suffix(gateUp) + (x8 ? "_x8" : ""), n, 256, ptr(out),
                ptr(gateUp), n, f);
        return false;
    }

    /** swiglu.cu's backward; {@code amax} as {@link #swigluForward}'s, for dGateUp's. */
    boolean swigluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp, long amax) {
        int f = gateUp.dim(-1) / 2, n = Math.toIntExact(gateUp.numel() / (2L * f));
        boolean x8 = bf16x8(f, gateUp, dGateUp, dOut);
        if (x8 && amax != 0) {
            launches.launch("swiglu", "swiglu_backward_bf16_x8_amax", n, 256, ptr(dGateUp), ptr(dOut), ptr(gateUp), n,
                    f, amax);
            return true;
        }
        launches.launch("swiglu", "swiglu_backward_" + suffix(gateUp) + (x8 ? "_x8" : ""), n, 256, ptr(dGateUp),
                ptr(dOut), ptr(gateUp), n, f);
        return false;
    }

    void gegluForward(Tensor out, Tensor gateUp) {
        int f = gateUp.dim(-1) / 2, n = Math.toIntExact(gateUp.numel() / (2L * f));
        launches.launch("swiglu", "geglu_forward_" + suffix(gateUp), n, 256, ptr(out), ptr(gateUp), n, f);
    }

    void gegluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp) {
        int f = gateUp.dim(-1) / 2, n = Math.toIntExact(gateUp.numel() / (2L * f));
        launches.launch("swiglu", "geglu_backward_" + suffix(gateUp), n, 256, ptr(dGateUp), ptr(dOut), ptr(gateUp), n,
                f);
    }

    void geluForward(Tensor out, Tensor x) {
        long n = x.numel();
        launches.launch("gelu", "gelu_forward_" + suffix(x), gridFor(n), 256, ptr(out), ptr(x), n);
    }

    void geluBackward(Tensor dx, Tensor dOut, Tensor x) {
        long n = x.numel();
        launches.launch("gelu", "gelu_backward_" + suffix(x), gridFor(n), 256, ptr(dx), ptr(dOut), ptr(x), n);
    }

    void softcapForward(Tensor x, float cap) {
        long n = x.numel();
        launches.launch("elementwise", "softcap_" + suffix(x), gridFor(n), 256, ptr(x), n, cap);
    }

    void softcapBackward(Tensor dx, Tensor capped, float cap) {
        long n = dx.numel();
        launches.launch("elementwise", "softcap_backward_" + suffix(dx), gridFor(n), 256, ptr(dx), ptr(capped), n,
                cap);
    }

    void dropout(Tensor out, Tensor x, double p, long seed, long firstIndex) {
        if (out.numel() != x.numel() || out.dtype() != x.dtype()) {
            throw new IllegalArgumentException("dropout of " + x + " into " + out);
        }
        long n = x.numel();
        launches.launch("dropout", "dropout_" + suffix(x), gridFor(n), 256, ptr(out), ptr(x), n, seed, firstIndex,
                DropoutMask.threshold(p), DropoutMask.scale(p));
    }
}
