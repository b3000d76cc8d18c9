package io.fsdp4j.backend;

import io.fsdp4j.gpu.CudaOpsFixture;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The CUDA LayerNorm and GELU kernels (BLOOM's ops) against the CPU backend on random inputs: fp32 within 1e-5 and
 * bf16 within 1e-2 of the tensor's scale (the attention gradient, a longer chain of bf16 roundings, within 3e-2);
 * and BLOOM's attention (per-head qkv layout, ALiBi) likewise. Tagged gpu: skipped (and counted so)
 * where no GPU is visible; run on the GPU machine by tools/gpu/run.sh tests.
 */
@Tag("gpu")
class CudaLayerNormGeluTest extends CudaOpsFixture {
    CudaLayerNormGeluTest() {
        super(7);
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void layerNormForwardAndBackward(Precision p) {
        int n = 150, c = 96; // n > 64: more than one row chunk in the parameter-gradient reduction
        float[] x = randoms(n * c, 0.7, 2, p), w = randoms(c, 1, 0.5, p), b = randoms(c, 0, 0.3, p);
        float[] g = randoms(n * c, 0, 1, p);
        Tensor cOut = CPU.allocate(DType.F32, n, c), cMean = CPU.allocate(DType.F32, n), cRstd = CPU.allocate(DType.F32, n);
        CPU.layerNormForward(cOut, cMean, cRstd, CPU.upload(x, n, c), CPU.upload(w, c), CPU.upload(b, c), 1e-5f);
        Tensor gOut = gpu.allocate(p.dtype, n, c), gMean = gpu.allocate(DType.F32, n), gRstd = gpu.allocate(DType.F32, n);
        gpu.layerNormForward(gOut, gMean, gRstd, onGpu(x, p, n, c), onGpu(w, p, c), onGpu(b, p, c), 1e-5f);
        near(gOut, cOut, p.tolerance, "layernorm forward");
        near(gMean, cMean, 1e-5, "layernorm mean");
        near(gRstd, cRstd, 1e-5, "layernorm rstd");
        float[] dw0 = randoms(c, 0, 1, Precision.FP32), db0 = randoms(c, 0, 1, Precision.FP32);
        Tensor cDx = CPU.allocate(DType.F32, n, c), cDw = CPU.upload(dw0, c), cDb = CPU.upload(db0, c);
        CPU.layerNormBackward(cDx, cDw, cDb, CPU.upload(g, n, c), CPU.upload(x, n, c), CPU.upload(w, c), cMean, cRstd);
        Tensor gDx = gpu.allocate(p.dtype, n, c), gDw = gpu.upload(dw0, c), gDb = gpu.upload(db0, c);
        gpu.layerNormBackward(gDx, gDw, gDb, onGpu(g, p, n, c), onGpu(x, p, n, c), onGpu(w, p, c), gMean, gRstd);
        near(gDx, cDx, p.tolerance, "layernorm dx");
        near(gDw, cDw, p.tolerance, "layernorm dWeight (accumulated)");
        near(gDb, cDb, p.tolerance, "layernorm dBias (accumulated)");
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void geluForwardAndBackward(Precision p) {
        int n = 70_001; // not a multiple of the block
        float[] x = randoms(n, 0, 5, p), g = randoms(n, 0, 1, p);
        Tensor cOut = CPU.allocate(DType.F32, n), gOut = gpu.allocate(p.dtype, n);
        CPU.geluForward(cOut, CPU.upload(x, n));
        gpu.geluForward(gOut, onGpu(x, p, n));
        near(gOut, cOut, p.tolerance, "gelu forward");
        Tensor cDx = CPU.allocate(DType.F32, n), gDx = gpu.allocate(p.dtype, n);
        CPU.geluBackward(cDx, CPU.upload(g, n), CPU.upload(x, n));
        gpu.geluBackward(gDx, onGpu(g, p, n), onGpu(x, p, n));
        near(gDx, cDx, p.tolerance, "gelu backward");
    }

    /**
     * BLOOM's attention (per-head qkv layout, ALiBi) on the general kernels' _ext variants: 6 heads (not a power of
     * two, so both of BLOOM's slope rules), T = 150 (three query and key tiles, a partial last one), head sizes 8
     * (the golden model's) and 64, fp32 and bf16: out and lse, then dQkv, against the CPU backend. Also the grouped
     * layout with ALiBi alone, to show the two flags are independent.
     */
    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void bloomAttentionForwardAndBackward(Precision p) {
        for (int hs : new int[] {8, 64}) {
            for (var layout : AttentionShape.QkvLayout.values()) {
                var shape = new AttentionShape(2, 150, 6, 6, hs, 0, layout, true);
                int n = shape.batch() * shape.seqLen(), w = shape.qkvWidth(), c = shape.heads() * hs;
                String what = layout + " HS=" + hs + " " + p;
                float[] qkv = randoms(n * w, 0, 1, p), dOut = randoms(n * c, 0, 1, p);
                Tensor cOut = CPU.allocate(DType.F32, n, c), cLse = CPU.allocate(DType.F32, 2, 6, 150);
                CPU.attentionForward(cOut, cLse, CPU.upload(qkv, n, w), null, shape);
                Tensor gQkv = onGpu(qkv, p, n, w);
                Tensor gOut = gpu.allocate(p.dtype, n, c), gLse = gpu.allocate(DType.F32, 2, 6, 150);
                gpu.attentionForward(gOut, gLse, gQkv, null, shape);
                near(gOut, cOut, p.tolerance, "attention out " + what);
                near(gLse, cLse, p == Precision.FP32 ? 1e-5 : 1e-2, "attention lse " + what);
                Tensor cDqkv = CPU.allocate(DType.F32, n, w), gDqkv = gpu.allocate(p.dtype, n, w);
                CPU.attentionBackward(cDqkv, CPU.upload(dOut, n, c), CPU.upload(qkv, n, w), cOut, cLse, null, shape);
                gpu.attentionBackward(gDqkv, onGpu(dOut, p, n, c), gQkv, gOut, gLse, null, shape);
                near(gDqkv, cDqkv, p == Precision.FP32 ? 1e-5 : 3e-2, "attention dQkv " + what);
            }
        }
    }
}
