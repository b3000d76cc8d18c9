package io.fsdp4j.backend;

import io.fsdp4j.gpu.CudaOpsFixture;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The CUDA per-head RMSNorm (Qwen3's q_norm and k_norm: rmsnorm.cu's head_rmsnorm_* kernels) against the CPU
 * backend, in place as the model calls it, on a Qwen3-8B-like row (32 query heads, 8 key heads, 8 value heads of
 * HS = 128) and an HS of 256 (Gemma 3's, more than the 256 threads of a block): forward out and rstd, the columns
 * of the other heads untouched, dx in place and dWeight written then accumulated; fp32 within 1e-5 and bf16 within
 * 1e-2 of the tensor's scale; and GeGLU (Gemma 3's MLP, swiglu.cu's geglu_* kernels) likewise. Attention at Gemma's
 * head size 256 (attention.cu's _wide kernels) and at 128 and 256 with Gemma 2's soft-capped scores and own scale
 * (the _ext and _wide kernels), with a sliding window and packed documents, forward and backward; and the logits' soft
 * cap (elementwise.cu's softcap kernels). In bf16 HS 256 runs on the tensor cores' _hs256 kernels (forward, dq, and
 * dk/dv in two halves of the columns, with the query heads of a group split or not), capped or not; soft-capped
 * scores of the other head sizes on the tensor cores' _cap kernels; fp32 on the _wide ones. Tagged gpu: skipped
 * (and counted so) where no GPU is visible.
 */
@Tag("gpu")
class CudaQwen3Gemma3OpsTest extends CudaOpsFixture {
    CudaQwen3Gemma3OpsTest() {
        super(9);
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void qAndKHeadNormsForwardAndBackwardInPlace(Precision p) {
        for (int hs : new int[] {128, 256}) {
            int n = 150, nh = 32, nkv = 8, w = (nh + 2 * nkv) * hs; // n > 64: several row chunks for dWeight
            String what = "HS=" + hs + " " + p;
            float[] x = randoms(n * w, 0.2, 2, p), qw = randoms(hs, 1, 0.5, p), kw = randoms(hs, 1, 0.5, p);
            float[] g = randoms(n * w, 0, 1, p);
            Tensor cX = CPU.upload(x, n, w), cOut = CPU.upload(x, n, w);
            Tensor cRq = CPU.allocate(DType.F32, n, nh), cRk = CPU.allocate(DType.F32, n, nkv);
            CPU.headRmsNormForward(cOut, cRq, cX, CPU.upload(qw, hs), 0, 1e-6f);
            CPU.headRmsNormForward(cOut, cRk, cX, CPU.upload(kw, hs), nh, 1e-6f);
            Tensor gX = onGpu(x, p, n, w), gOut = onGpu(x, p, n, w);
            Tensor gRq = gpu.allocate(DType.F32, n, nh), gRk = gpu.allocate(DType.F32, n, nkv);
            gpu.headRmsNormForward(gOut, gRq, gX, onGpu(qw, p, hs), 0, 1e-6f);
            gpu.headRmsNormForward(gOut, gRk, gX, onGpu(kw, p, hs), nh, 1e-6f);
            near(gOut, cOut, p.tolerance, "forward (v heads passed through) " + what);
            near(gRq, cRq, 1e-5, "rstd of q heads " + what);
            near(gRk, cRk, 1e-5, "rstd of k heads " + what);

            float[] dw0 = randoms(hs, 0, 1, Precision.FP32);
            Tensor cG = CPU.upload(g, n, w), cDq = CPU.upload(dw0, hs), cDk = CPU.allocate(DType.F32, hs);
            CPU.headRmsNormBackward(cG, cDq, cG, cX, CPU.upload(qw, hs), cRq, 0, true);
            CPU.headRmsNormBackward(cG, cDk, cG, cX, CPU.upload(kw, hs), cRk, nh, false);
            Tensor gG = onGpu(g, p, n, w), gDq = gpu.upload(dw0, hs), gDk = gpu.upload(randoms(hs, 5, 1, Precision.FP32), hs);
            gpu.headRmsNormBackward(gG, gDq, gG, gX, onGpu(qw, p, hs), gRq, 0, true);
            gpu.headRmsNormBackward(gG, gDk, gG, gX, onGpu(kw, p, hs), gRk, nh, false); // written: its 5s ignored
            near(gG, cG, p.tolerance, "dx in place (v columns keep dOut) " + what);
            near(gDq, cDq, p.tolerance, "dWeight of q_norm, accumulated " + what);
            near(gDk, cDk, p.tolerance, "dWeight of k_norm, written " + what);
        }
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void gegluForwardAndBackward(Precision p) {
        int n = 70, f = 1000; // F more than a block's threads
        float[] gateUp = randoms(n * 2 * f, 0, 4, p), g = randoms(n * f, 0, 1, p);
        Tensor cOut = CPU.allocate(DType.F32, n, f), gOut = gpu.allocate(p.dtype, n, f);
        CPU.gegluForward(cOut, CPU.upload(gateUp, n, 2 * f));
        gpu.gegluForward(gOut, onGpu(gateUp, p, n, 2 * f));
        near(gOut, cOut, p.tolerance, "geglu forward " + p);
        Tensor cD = CPU.allocate(DType.F32, n, 2 * f), gD = gpu.allocate(p.dtype, n, 2 * f);
        CPU.gegluBackward(cD, CPU.upload(g, n, f), CPU.upload(gateUp, n, 2 * f));
        gpu.gegluBackward(gD, onGpu(g, p, n, f), onGpu(gateUp, p, n, 2 * f));
        near(gD, cD, p.tolerance, "geglu backward " + p);
    }

    /** Gemma 2's and 3's attention shapes: heads of 256 (bf16: _hs256, fp32: _wide), scores soft-capped. */
    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void attentionOfGemmaHeadsAndSoftCappedScores(Precision p) {
        AttentionShape[] shapes = {
            new AttentionShape(2, 150, 4, 2, 256, 0), // Gemma 3's global layers: 3 query tiles, 2 heads a kv head
            new AttentionShape(1, 200, 4, 1, 256, 70).withScores(1 / 16f, 0f), // sliding, query_pre_attn_scalar 256
            new AttentionShape(2, 130, 4, 2, 256, 0).withScores(0.0625f, 0.5f), // Gemma 2-2B-like, cap that bends
            new AttentionShape(1, 140, 8, 4, 128, 50).withScores(1 / 12f, 0.5f), // Gemma 2-27B-like
            new AttentionShape(1, 150, 4, 2, 64, 0).withScores(0.125f, 0.5f), // capped, 128-query tensor-core tiles
            new AttentionShape(1, 100, 2, 2, 192, 0), // a wide head that is not a multiple of 128
            new AttentionShape(1, 130, 2, 2, 256, 0), // no group to split: dk/dv straight into dQkv
        };
        for (AttentionShape s : shapes) {
            int n = s.batch() * s.seqLen(), w = s.qkvWidth(), ow = s.heads() * s.headDim();
            float[] qkv = randoms(n * w, 0, 1.5, p), dOut = randoms(n * ow, 0, 1, p);
            int[] starts = new int[n]; // two documents in each sequence, the second from position 37
            for (int i = 0; i < n; i++) {
                starts[i] = i % s.seqLen() < 37 ? 0 : 37;
            }
            for (boolean packed : new boolean[] {false, true}) {
                String what = s + (packed ? " packed " : " ") + p;
                Tensor cStarts = packed ? CPU.uploadInts(starts, n) : null;
                Tensor gStarts = packed ? gpu.uploadInts(starts, n) : null;
                Tensor cQkv = CPU.upload(qkv, n, w), cOut = CPU.allocate(DType.F32, n, ow);
                Tensor cLse = CPU.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
                CPU.attentionForward(cOut, cLse, cQkv, cStarts, s);
                Tensor gQkv = onGpu(qkv, p, n, w), gOut = gpu.allocate(p.dtype, n, ow);
                Tensor gLse = gpu.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
                gpu.attentionForward(gOut, gLse, gQkv, gStarts, s);
                near(gOut, cOut, p.tolerance, "attention forward " + what);
                near(gLse, cLse, p.tolerance, "attention lse " + what);
                Tensor cD = CPU.allocate(DType.F32, n, w), gD = gpu.allocate(p.dtype, n, w);
                CPU.attentionBackward(cD, CPU.upload(dOut, n, ow), cQkv, cOut, cLse, cStarts, s);
                gpu.attentionBackward(gD, onGpu(dOut, p, n, ow), gQkv, gOut, gLse, gStarts, s);
                near(gD, cD, p.tolerance * 2, "attention backward " + what);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(value = Precision.class, names = {"FP32", "BF16"})
    void logitSoftCapForwardAndBackward(Precision p) {
        int n = 3000;
        float[] z = randoms(n, 0, 60, p), g = randoms(n, 0, 1, p);
        Tensor cZ = CPU.upload(z, n), gZ = onGpu(z, p, n);
        CPU.softcapForward(cZ, 30f);
        gpu.softcapForward(gZ, 30f);
        near(gZ, cZ, p.tolerance, "softcap " + p);
        Tensor cG = CPU.upload(g, n), gG = onGpu(g, p, n);
        CPU.softcapBackward(cG, cZ, 30f);
        gpu.softcapBackward(gG, gZ, 30f);
        near(gG, cG, p.tolerance, "softcap backward " + p);
    }
}
