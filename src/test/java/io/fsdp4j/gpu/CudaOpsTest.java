package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Every CUDA op against the CPU backend on fresh random inputs: fp32 within 1e-5, bf16 and fp16 within 1e-2 of the
 * tensor's scale (the CPU computing in fp32 on the same bf16- or fp16-rounded inputs).
 */
@Tag("gpu")
class CudaOpsTest extends CudaOpsFixture {
    CudaOpsTest() {
        super(42);
    }

    /**
     * What is uploaded is what the next operation reads, at once, from a non-blocking stream: through the backend's
     * upload and through the synchronous copy, a few KiB of new values each round. (A plain {@code cudaMemcpy} from
     * pageable memory may return before its bytes land, and the ranks' streams do not wait for the legacy stream it
     * runs on; both paths now order or wait for the copy. On a warm H200 this test did not catch the old code in 300
     * rounds of each size: the hazard is timing-dependent. It does catch an upload that lands late or elsewhere.)
     */
    @Test
    void theOpQueuedAfterAnUploadReadsTheUploadedValues() {
        for (int n : new int[] {16, 1024, 16384}) {
            try (var scope = gpu.newScope(); var entered = scope.enter()) {
                for (int round = 1; round <= 300; round++) {
                    float[] values = new float[n];
                    java.util.Arrays.fill(values, round);
                    Tensor uploaded = gpu.upload(values, n), read = gpu.allocateForWrite(DType.F32, n);
                    gpu.copy(uploaded, read);
                    assertThat(gpu.toFloats(read)).as("%d values, round %d, upload", n, round).containsOnly((float) round);
                }
            }
            long bytes = 4L * n;
            long device = io.fsdp4j.cuda.Cuda.malloc(bytes), copy = io.fsdp4j.cuda.Cuda.malloc(bytes);
            try (var arena = java.lang.foreign.Arena.ofConfined(); var stream = io.fsdp4j.cuda.CudaStream.create()) {
                var host = arena.allocate(bytes, 64);
                var back = arena.allocate(bytes, 64);
                for (int round = 1; round <= 300; round++) {
                    host.fill((byte) round);
                    io.fsdp4j.cuda.Cuda.copyToDevice(device, host, bytes);
                    io.fsdp4j.cuda.Cuda.copyOnDeviceAsync(copy, device, bytes, stream.handle());
                    stream.synchronize();
                    io.fsdp4j.cuda.Cuda.copyToHost(back, copy, bytes);
                    assertThat(back.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE))
                            .as("%d values, round %d, synchronous copy", n, round).containsOnly((byte) round);
                }
            } finally {
                io.fsdp4j.cuda.Cuda.free(device);
                io.fsdp4j.cuda.Cuda.free(copy);
            }
        }
    }

    private float[] randoms(int n, double scale) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) ((random.nextDouble() * 2 - 1) * scale);
        }
        return v;
    }

    /** The values as the op will see them: rounded to bf16 (fp16) for bf16 (fp16) runs. */
    private static float[] asSeen(float[] v, Precision p) {
        if (p == Precision.FP32) {
            return v;
        }
        float[] r = new float[v.length];
        for (int i = 0; i < v.length; i++) {
            r[i] = p == Precision.FP16 ? Half.roundF16(v[i]) : Half.roundBf16(v[i]);
        }
        return r;
    }

    @ParameterizedTest
    @EnumSource(Precision.class)
    void linearForwardAndBackward(Precision p) {
        int n = 37, in = 96, out = 80;
        float[] x = asSeen(randoms(n * in, 1), p), w = asSeen(randoms(out * in, 0.2), p), b = asSeen(randoms(out, 0.5), p);
        float[] dy = asSeen(randoms(n * out, 1), p);
        Tensor cOut = CPU.allocate(DType.F32, n, out);
        CPU.linearForward(cOut, CPU.upload(x, n, in), CPU.upload(w, out, in), CPU.upload(b, out));
        Tensor gOut = gpu.allocate(p.dtype, n, out);
        gpu.linearForward(gOut, onGpu(x, p, n, in), onGpu(w, p, out, in), onGpu(b, p, out));
        near(gOut, cOut, p.tolerance, "linear forward");
        Tensor cDx = CPU.allocate(DType.F32, n, in), cDw = CPU.upload(randoms(out * in, 1), out, in), cDb = CPU.upload(new float[out], out);
        Tensor gDx = gpu.allocate(p.dtype, n, in), gDw = gpu.upload(CPU.toFloats(cDw), out, in), gDb = gpu.allocate(DType.F32, out);
        CPU.linearBackward(cDx, cDw, cDb, CPU.upload(dy, n, out), CPU.upload(x, n, in), CPU.upload(w, out, in));
        gpu.linearBackward(gDx, gDw, gDb, onGpu(dy, p, n, out), onGpu(x, p, n, in), onGpu(w, p, out, in));
        near(gDx, cDx, p.tolerance, "linear dx");
        near(gDw, cDw, p.tolerance, "linear dW (accumulated)");
        near(gDb, cDb, p.tolerance, "linear dBias");
    }

    /**
     * bf16 RMSNorm at widths that take the other kernels: 100 (not a multiple of 8: one element a thread) and 2056
     * (eight a thread, more 16-byte words in a row than threads in its block).
     */
    @Test
    void rmsNormInBf16AtOtherWidths() {
        Precision p = Precision.BF16;
        for (int c : new int[] {100, 2056}) {
            int n = 9;
            float[] x = asSeen(randoms(n * c, 2), p), w = asSeen(randoms(c, 1), p), g = asSeen(randoms(n * c, 1), p);
            Tensor cOut = CPU.allocate(DType.F32, n, c), cRstd = CPU.allocate(DType.F32, n);
            CPU.rmsNormForward(cOut, cRstd, CPU.upload(x, n, c), CPU.upload(w, c), 1e-6f);
            Tensor gOut = gpu.allocate(p.dtype, n, c), gRstd = gpu.allocate(DType.F32, n);
            gpu.rmsNormForward(gOut, gRstd, onGpu(x, p, n, c), onGpu(w, p, c), 1e-6f);
            near(gOut, cOut, p.tolerance, "rmsnorm forward, width " + c);
            near(gRstd, cRstd, 1e-5, "rmsnorm rstd, width " + c);
            Tensor cDx = CPU.allocate(DType.F32, n, c), cDw = CPU.allocate(DType.F32, c);
            CPU.rmsNormBackward(cDx, cDw, CPU.upload(g, n, c), CPU.upload(x, n, c), CPU.upload(w, c), cRstd);
            Tensor gDx = gpu.allocate(p.dtype, n, c), gDw = gpu.allocate(DType.F32, c);
            gpu.rmsNormBackward(gDx, gDw, onGpu(g, p, n, c), onGpu(x, p, n, c), onGpu(w, p, c), gRstd);
            near(gDx, cDx, p.tolerance, "rmsnorm dx, width " + c);
            near(gDw, cDw, p.tolerance, "rmsnorm dWeight, width " + c);
        }
    }

    @ParameterizedTest
    @EnumSource(Precision.class)
    void rmsNormEmbeddingSwigluAndRope(Precision p) {
        int n = 45, c = 128, f = 72, vocab = 50;
        float[] x = asSeen(randoms(n * c, 2), p), w = asSeen(randoms(c, 1), p), g = asSeen(randoms(n * c, 1), p);
        Tensor cOut = CPU.allocate(DType.F32, n, c), cRstd = CPU.allocate(DType.F32, n);
        CPU.rmsNormForward(cOut, cRstd, CPU.upload(x, n, c), CPU.upload(w, c), 1e-6f);
        Tensor gOut = gpu.allocate(p.dtype, n, c), gRstd = gpu.allocate(DType.F32, n);
        gpu.rmsNormForward(gOut, gRstd, onGpu(x, p, n, c), onGpu(w, p, c), 1e-6f);
        near(gOut, cOut, p.tolerance, "rmsnorm forward");
        near(gRstd, cRstd, 1e-5, "rmsnorm rstd");
        Tensor cDx = CPU.allocate(DType.F32, n, c), cDw = CPU.allocate(DType.F32, c);
        CPU.rmsNormBackward(cDx, cDw, CPU.upload(g, n, c), CPU.upload(x, n, c), CPU.upload(w, c), cRstd);
        Tensor gDx = gpu.allocate(p.dtype, n, c), gDw = gpu.allocate(DType.F32, c);
        gpu.rmsNormBackward(gDx, gDw, onGpu(g, p, n, c), onGpu(x, p, n, c), onGpu(w, p, c), gRstd);
        near(gDx, cDx, p.tolerance, "rmsnorm dx");
        near(gDw, cDw, p.tolerance, "rmsnorm dWeight");

        int[] ids = random.ints(n, 0, vocab).toArray();
        float[] table = asSeen(randoms(vocab * c, 1), p);
        Tensor cEmb = CPU.allocate(DType.F32, n, c);
        CPU.embeddingForward(cEmb, CPU.uploadInts(ids, n), CPU.upload(table, vocab, c));
        Tensor gEmb = gpu.allocate(p.dtype, n, c);
        gpu.embeddingForward(gEmb, gpu.uploadInts(ids, n), onGpu(table, p, vocab, c));
        near(gEmb, cEmb, 1e-7, "embedding forward (a copy)");
        Tensor cDt = CPU.allocate(DType.F32, vocab, c), gDt = gpu.allocate(DType.F32, vocab, c);
        CPU.embeddingBackward(cDt, CPU.uploadInts(ids, n), CPU.upload(g, n, c));
        gpu.embeddingBackward(gDt, gpu.uploadInts(ids, n), onGpu(g, p, n, c));
        near(gDt, cDt, 1e-6, "embedding backward");

        float[] gu = asSeen(randoms(n * 2 * f, 3), p), d = asSeen(randoms(n * f, 1), p);
        Tensor cS = CPU.allocate(DType.F32, n, f), gS = gpu.allocate(p.dtype, n, f);
        CPU.swigluForward(cS, CPU.upload(gu, n, 2 * f));
        gpu.swigluForward(gS, onGpu(gu, p, n, 2 * f));
        near(gS, cS, p.tolerance, "swiglu forward");
        Tensor cDs = CPU.allocate(DType.F32, n, 2 * f), gDs = gpu.allocate(p.dtype, n, 2 * f);
        CPU.swigluBackward(cDs, CPU.upload(d, n, f), CPU.upload(gu, n, 2 * f));
        gpu.swigluBackward(gDs, onGpu(d, p, n, f), onGpu(gu, p, n, 2 * f));
        near(gDs, cDs, p.tolerance, "swiglu backward");

        int heads = 6, hs = 16, half = hs / 2, positions = 64;
        float[] cos = new float[positions * half], sin = new float[positions * half];
        for (int i = 0; i < cos.length; i++) {
            double angle = (i / half) * Math.pow(10000, -2.0 * (i % half) / hs);
            cos[i] = (float) Math.cos(angle);
            sin[i] = (float) Math.sin(angle);
        }
        int[] pos = random.ints(n, 0, positions).toArray();
        float[] r = asSeen(randoms(n * heads * hs, 1), p);
        Tensor cR = CPU.upload(r, n, heads * hs), gR = onGpu(r, p, n, heads * hs);
        CPU.ropeForward(cR, 4, CPU.uploadInts(pos, n), CPU.upload(cos, positions, half), CPU.upload(sin, positions, half));
        gpu.ropeForward(gR, 4, gpu.uploadInts(pos, n), gpu.upload(cos, positions, half), gpu.upload(sin, positions, half));
        near(gR, cR, p.tolerance, "rope forward");
        CPU.ropeBackward(cR, 4, CPU.uploadInts(pos, n), CPU.upload(cos, positions, half), CPU.upload(sin, positions, half));
        gpu.ropeBackward(gR, 4, gpu.uploadInts(pos, n), gpu.upload(cos, positions, half), gpu.upload(sin, positions, half));
        near(gR, cR, p.tolerance, "rope backward");
    }

    @ParameterizedTest
    @EnumSource(Precision.class)
    void attention(Precision p) {
        // tensor cores with the key heads' groups split (2 and 4 heads a group) and unsplit (no grouping; 160
        // tokens: a 64 x 64 tile below the diagonal, which needs no mask); HS 8: the general kernels
        for (int[] dims : new int[][] {{2, 70, 4, 2, 64, 0}, {1, 130, 4, 1, 128, 48}, {1, 160, 2, 2, 64, 0},
                {2, 33, 6, 3, 8, 5}}) {
            AttentionShape s = new AttentionShape(dims[0], dims[1], dims[2], dims[3], dims[4], dims[5]);
            int n = s.batch() * s.seqLen(), ow = s.heads() * s.headDim();
            float[] qkv = asSeen(randoms(n * s.qkvWidth(), 1.5), p), dOut = asSeen(randoms(n * ow, 1), p);
            Tensor cOut = CPU.allocate(DType.F32, n, ow), cLse = CPU.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
            Tensor cQkv = CPU.upload(qkv, n, s.qkvWidth());
            CPU.attentionForward(cOut, cLse, cQkv, null, s);
            Tensor gOut = gpu.allocate(p.dtype, n, ow), gLse = gpu.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
            Tensor gQkv = onGpu(qkv, p, n, s.qkvWidth());
            gpu.attentionForward(gOut, gLse, gQkv, null, s);
            near(gOut, cOut, p.tolerance, "attention forward " + s);
            near(gLse, cLse, p.tolerance, "attention lse " + s);
            Tensor cD = CPU.allocate(DType.F32, n, s.qkvWidth()), gD = gpu.allocate(p.dtype, n, s.qkvWidth());
            // the backward of each backend from its own forward output
            CPU.attentionBackward(cD, CPU.upload(dOut, n, ow), cQkv, cOut, cLse, null, s);
            gpu.attentionBackward(gD, onGpu(dOut, p, n, ow), gQkv, gOut, gLse, null, s);
            near(gD, cD, p.tolerance * 2, "attention backward " + s);
        }
    }

    /**
     * Document starts (B*T) for packed sequences: in every sequence a document of one token at 5, one starting at
     * 6 (inside the first 64-row tile), one across the tile boundary at 64, one starting inside the second tile,
     * and a last document of one token; the middle boundaries move with the sequence.
     */
    private static int[] documentStarts(int batch, int seqLen) {
        int[] starts = new int[batch * seqLen];
        for (int b = 0; b < batch; b++) {
            java.util.TreeSet<Integer> begins = new java.util.TreeSet<>(List.of(0, 5, 6, 37 + 3 * b, 70 + 11 * b,
                    seqLen - 1));
            for (int t = 0; t < seqLen; t++) {
                starts[b * seqLen + t] = begins.floor(t);
            }
        }
        return starts;
    }

    /**
     * Packed sequences (no token attends across documents) on both paths: bf16 with head size 64 and 128 takes the
     * tensor-core kernels, head size 8 and fp32 the general ones, BLOOM's shape (per-head layout, ALiBi) their _ext
     * variants; with and without a sliding window.
     */
    @ParameterizedTest
    @EnumSource(Precision.class)
    void packedAttention(Precision p) {
        AttentionShape[] shapes = {new AttentionShape(2, 150, 4, 2, 64, 0), new AttentionShape(1, 200, 4, 1, 128, 0),
                new AttentionShape(2, 150, 4, 2, 64, 40), new AttentionShape(2, 130, 4, 4, 128, 50),
                new AttentionShape(2, 90, 6, 3, 8, 0), new AttentionShape(2, 100, 6, 3, 8, 20),
                new AttentionShape(2, 140, 4, 4, 32, 0, AttentionShape.QkvLayout.PER_HEAD, true)};
        for (AttentionShape s : shapes) {
            int n = s.batch() * s.seqLen(), ow = s.heads() * s.headDim();
            int[] starts = documentStarts(s.batch(), s.seqLen());
            float[] qkv = asSeen(randoms(n * s.qkvWidth(), 1.5), p), dOut = asSeen(randoms(n * ow, 1), p);
            Tensor cStarts = CPU.uploadInts(starts, n), gStarts = gpu.uploadInts(starts, n);
            Tensor cOut = CPU.allocate(DType.F32, n, ow), cLse = CPU.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
            Tensor cQkv = CPU.upload(qkv, n, s.qkvWidth());
            CPU.attentionForward(cOut, cLse, cQkv, cStarts, s);
            Tensor gOut = gpu.allocate(p.dtype, n, ow), gLse = gpu.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
            Tensor gQkv = onGpu(qkv, p, n, s.qkvWidth());
            gpu.attentionForward(gOut, gLse, gQkv, gStarts, s);
            near(gOut, cOut, p.tolerance, "packed attention forward " + s);
            near(gLse, cLse, p.tolerance, "packed attention lse " + s);
            Tensor cD = CPU.allocate(DType.F32, n, s.qkvWidth()), gD = gpu.allocate(p.dtype, n, s.qkvWidth());
            CPU.attentionBackward(cD, CPU.upload(dOut, n, ow), cQkv, cOut, cLse, cStarts, s);
            gpu.attentionBackward(gD, onGpu(dOut, p, n, ow), gQkv, gOut, gLse, gStarts, s);
            near(gD, cD, p.tolerance * 2, "packed attention backward " + s);
            // the documents matter here: unpacked, the CPU's output is another
            Tensor cUnpacked = CPU.allocate(DType.F32, n, ow);
            CPU.attentionForward(cUnpacked, CPU.allocate(DType.F32, s.batch(), s.heads(), s.seqLen()), cQkv, null, s);
            assertThat(Golden.relativeError(CPU.toFloats(cUnpacked), CPU.toFloats(cOut))).as("packing changes " + s)
                    .isGreaterThan(10 * p.tolerance);
        }
    }

    @ParameterizedTest
    @EnumSource(Precision.class)
    void crossEntropy(Precision p) {
        int n = 29;
        for (int vocab : new int[] {1000, 1001}) { // bf16: eight logits a thread, and one (a vocabulary not of 8s)
            float[] logits = asSeen(randoms(n * vocab, 4), p);
            int[] targets = random.ints(n, 0, vocab).toArray();
            targets[3] = -100;
            targets[17] = -100;
            targets[20] = vocab - 1;
            Tensor cL = CPU.upload(logits, n, vocab), cRows = CPU.allocate(DType.F32, n);
            double cSum = CPU.crossEntropy(cL, CPU.uploadInts(targets, n), 0.25f, cRows);
            Tensor gL = onGpu(logits, p, n, vocab), gRows = gpu.allocate(DType.F32, n);
            double gSum = gpu.crossEntropy(gL, gpu.uploadInts(targets, n), 0.25f, gRows);
            assertThat(gSum).as("vocabulary %d", vocab).isCloseTo(cSum, org.assertj.core.data.Percentage.withPercentage(1e-3));
            near(gRows, cRows, 1e-5, "loss per row, vocabulary " + vocab);
            near(gL, cL, p.tolerance, "dlogits, vocabulary " + vocab);
        }
    }

    /**
     * Greedy decoding's argmax of each row on the device is the CPU's: random rows (a vocabulary of 250,880, BLOOM's,
     * and an odd one), a row whose largest value is repeated (the lowest index wins), a row with NaN before its
     * largest value, a row of NaN only (0), and a row whose largest value is the last.
     */
    @ParameterizedTest
    @EnumSource(Precision.class)
    void argmaxOfEachRow(Precision p) {
        for (int vocab : new int[] {250_880, 1001}) {
            int n = 6;
            float[] logits = asSeen(randoms(n * vocab, 4), p);
            logits[vocab + 7] = 100f; // row 1: a tie, the lowest index wins
            logits[vocab + vocab / 2] = 100f;
            logits[2 * vocab] = Float.NaN; // row 2: NaN first is not the largest
            logits[2 * vocab + 5] = 50f;
            java.util.Arrays.fill(logits, 3 * vocab, 4 * vocab, Float.NaN); // row 3: NaN only
            logits[5 * vocab - 1] = 60f; // row 4: the last
            int[] onCpu = CPU.argmaxRows(CPU.upload(logits, n, vocab));
            assertThat(onCpu[1]).isEqualTo(7);
            assertThat(onCpu[2]).isEqualTo(5);
            assertThat(onCpu[3]).isZero();
            assertThat(onCpu[4]).isEqualTo(vocab - 1);
            assertThat(gpu.argmaxRows(onGpu(logits, p, n, vocab))).as("vocabulary %d", vocab).containsExactly(onCpu);
        }
    }

    /** The same bits (AdamW rounds every operation as the CPU backend's Java does). */
    private static void exact(Tensor gpuResult, Tensor cpuResult, String what) {
        assertThat(gpu.toFloats(gpuResult)).as(what + ": the CPU backend's bits").isEqualTo(CPU.toFloats(cpuResult));
    }

    /**
     * The bf16 add and SwiGLU kernels that move eight elements a thread (aligned, SwiGLU's F a multiple of 8) and
     * the one-a-thread ones (a view one element in; F = 12) give the same bits, and the add gives the CPU's
     * rounding of the fp32 sum.
     */
    @Test
    void bf16AddAndSwigluEightAThreadOrOne() {
        int n = 1003; // eight a thread, then a tail of 3
        float[] a = asSeen(randoms(n + 1, 2), Precision.BF16), b = asSeen(randoms(n + 1, 2), Precision.BF16);
        Tensor aligned = onGpu(a, Precision.BF16, n + 1), shifted = onGpu(a, Precision.BF16, n + 1);
        Tensor src = onGpu(b, Precision.BF16, n + 1);
        gpu.add(aligned.view(0, n), src.view(0, n));
        gpu.add(shifted.view(1, n), src.view(1, n));
        Tensor cSum = CPU.upload(a, n + 1), cRounded = CPU.allocate(DType.BF16, n + 1);
        CPU.add(cSum, CPU.upload(b, n + 1));
        CPU.copy(cSum, cRounded);
        float[] want = CPU.toFloats(cRounded);
        assertThat(java.util.Arrays.copyOf(gpu.toFloats(aligned), n)).isEqualTo(java.util.Arrays.copyOf(want, n));
        assertThat(java.util.Arrays.copyOfRange(gpu.toFloats(shifted), 1, n + 1))
                .isEqualTo(java.util.Arrays.copyOfRange(want, 1, n + 1));
        for (int f : new int[] {24, 12}) { // eight a thread; one a thread
            int rows = 5;
            float[] gu = asSeen(randoms(rows * 2 * f, 3), Precision.BF16), d = asSeen(randoms(rows * f, 1), Precision.BF16);
            Tensor out = gpu.allocate(DType.BF16, rows, f), dGu = gpu.allocate(DType.BF16, rows, 2 * f);
            gpu.swigluForward(out, onGpu(gu, Precision.BF16, rows, 2 * f));
            gpu.swigluBackward(dGu, onGpu(d, Precision.BF16, rows, f), onGpu(gu, Precision.BF16, rows, 2 * f));
            // the same numbers from the one-a-thread kernels: views one row in of buffers one row larger are
            // 16-byte aligned only when the row is, so pad by a single element instead
            Tensor guOff = onGpu(concat(new float[1], gu), Precision.BF16, rows * 2 * f + 1);
            Tensor dOff = onGpu(concat(new float[1], d), Precision.BF16, rows * f + 1);
            Tensor out1 = gpu.allocate(DType.BF16, rows * f + 1), dGu1 = gpu.allocate(DType.BF16, rows * 2 * f + 1);
            gpu.swigluForward(out1.view(1, rows, f), guOff.view(1, rows, 2 * f));
            gpu.swigluBackward(dGu1.view(1, rows, 2 * f), dOff.view(1, rows, f), guOff.view(1, rows, 2 * f));
            assertThat(java.util.Arrays.copyOfRange(gpu.toFloats(out1), 1, rows * f + 1)).as("swiglu F=%d", f)
                    .isEqualTo(gpu.toFloats(out));
            assertThat(java.util.Arrays.copyOfRange(gpu.toFloats(dGu1), 1, rows * 2 * f + 1)).as("swiglu grads F=%d", f)
                    .isEqualTo(gpu.toFloats(dGu));
        }
    }

    private static float[] concat(float[] x, float[] y) {
        float[] r = java.util.Arrays.copyOf(x, x.length + y.length);
        System.arraycopy(y, 0, r, x.length, y.length);
        return r;
    }

    /** Parameters, gradients and moments (the second ones positive) of an AdamW test, n of each. */
    private float[][] adamwState(int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = Math.abs(randoms(1, 0.001)[0]);
        }
        return new float[][] {randoms(n, 1), randoms(n, 0.1), randoms(n, 0.01), v};
    }

    /**
     * A unit's AdamW in one launch (multi-tensor): segments that start and end off the four-element grid, decaying
     * and not, a gap between two and a tail after the last (left untouched), with the gradient scaled on the fly:
     * the CPU's bits, a segment at a time. The GPU's own one-launch-a-segment path gives them too (the test above).
     */
    @Test
    void adamwOfEverySegmentOfAUnitInOneLaunch() {
        int n = 10_001;
        float[][] state = adamwState(n);
        float[] param = state[0], grad = state[1], m = state[2], v = state[3];
        List<io.fsdp4j.backend.AdamWSegment> segments = List.of(new io.fsdp4j.backend.AdamWSegment(0, 5, true),
                new io.fsdp4j.backend.AdamWSegment(5, 3330, false), new io.fsdp4j.backend.AdamWSegment(3335, 4097, true),
                new io.fsdp4j.backend.AdamWSegment(7440, 2, false), new io.fsdp4j.backend.AdamWSegment(7445, 2500, true));
        Tensor cp = CPU.upload(param, n), cm = CPU.upload(m, n), cv = CPU.upload(v, n), cg = CPU.upload(grad, n);
        Tensor gp = gpu.upload(param, n), gm = gpu.upload(m, n), gv = gpu.upload(v, n), gg = gpu.upload(grad, n);
        for (int step = 1; step <= 2; step++) {
            CPU.adamw(cp, cg, cm, cv, segments, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.37f);
            gpu.adamw(gp, gg, gm, gv, segments, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.37f);
        }
        exact(gp, cp, "adamw params, one launch");
        exact(gm, cm, "adamw m, one launch");
        exact(gv, cv, "adamw v, one launch");
        float[] after = gpu.toFloats(gp);
        assertThat(after[7442]).as("in the gap").isEqualTo(param[7442]);
        assertThat(after[n - 1]).as("after the last segment").isEqualTo(param[n - 1]);
        assertThat(after[6]).as("inside a segment").isNotEqualTo(param[6]);
    }

    /**
     * The gradient norm's sums of squares of several tensors read back together: each the same bits as the tensor
     * summed alone, and within 1e-12 of the CPU's sum (fp32 and bf16; one tensor longer than the kernel's grid
     * covers in one stride, one of a single element).
     */
    @Test
    void sumsOfSquaresOfSeveralTensorsAtOnce() {
        try (var scope = gpu.newScope(); var entered = scope.enter()) {
            java.util.List<Tensor> onGpu = new java.util.ArrayList<>(), onCpu = new java.util.ArrayList<>();
            for (int n : new int[] {300_001, 1, 4096}) {
                float[] v = new float[n];
                for (int i = 0; i < n; i++) {
                    v[i] = (float) random.nextGaussian();
                }
                onGpu.add(gpu.upload(v, n));
                onCpu.add(CPU.upload(v, n));
            }
            Tensor bf = gpu.allocate(DType.BF16, 4096), bfCpu = CPU.allocate(DType.BF16, 4096);
            gpu.copy(onGpu.get(2), bf);
            CPU.copy(onCpu.get(2), bfCpu);
            onGpu.add(bf);
            onCpu.add(bfCpu);
            double[] together = gpu.sumsOfSquares(onGpu);
            assertThat(together).hasSize(onGpu.size());
            for (int i = 0; i < onGpu.size(); i++) {
                assertThat(together[i]).as("tensor %d alone", i).isEqualTo(gpu.sumOfSquares(onGpu.get(i)));
                assertThat(together[i]).as("tensor %d on the CPU", i)
                        .isCloseTo(CPU.sumOfSquares(onCpu.get(i)), org.assertj.core.data.Percentage.withPercentage(1e-10));
            }
            assertThat(gpu.sumsOfSquares(java.util.List.of())).isEmpty();
        }
    }

    @Test
    void adamwCastsAndReductions() {
        int n = 10_001;
        float[][] state = adamwState(n);
        float[] param = state[0], grad = state[1], m = state[2], v = state[3];
        Tensor cp = CPU.upload(param, n), cm = CPU.upload(m, n), cv = CPU.upload(v, n);
        Tensor gp = gpu.upload(param, n), gm = gpu.upload(m, n), gv = gpu.upload(v, n);
        CPU.adamw(cp, CPU.upload(grad, n), cm, cv, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
        gpu.adamw(gp, gpu.upload(grad, n), gm, gv, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 7);
        exact(gp, cp, "adamw params");
        exact(gm, cm, "adamw m");
        exact(gv, cv, "adamw v");
        Tensor scaledGrad = CPU.upload(grad, n);
        CPU.scale(scaledGrad, 0.37f);
        CPU.adamw(cp, scaledGrad, cm, cv, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 8);
        gpu.adamw(gp, gpu.upload(grad, n), gm, gv, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 8, 0.37f);
        exact(gp, cp, "adamw params, gradient scaled on the fly");
        exact(gm, cm, "adamw m, gradient scaled on the fly");
        // views one element in: not 16-byte aligned, so the one-element-a-thread kernel (above: four a thread)
        Tensor cg1 = CPU.upload(grad, n), gg1 = gpu.upload(grad, n);
        CPU.adamw(cp.view(1, n - 1), cg1.view(1, n - 1), cm.view(1, n - 1), cv.view(1, n - 1), 1e-3f, 0.9f, 0.95f,
                1e-8f, 0.1f, 9);
        gpu.adamw(gp.view(1, n - 1), gg1.view(1, n - 1), gm.view(1, n - 1), gv.view(1, n - 1), 1e-3f, 0.9f, 0.95f,
                1e-8f, 0.1f, 9);
        exact(gp, cp, "adamw params, unaligned views");
        exact(gv, cv, "adamw v, unaligned views");
        assertThat(gpu.sumOfSquares(gp)).isCloseTo(CPU.sumOfSquares(cp), org.assertj.core.data.Percentage.withPercentage(1e-4));
        Tensor cb = CPU.allocate(DType.BF16, n), gb = gpu.allocate(DType.BF16, n);
        CPU.copy(cp, cb);
        gpu.copy(gpu.upload(CPU.toFloats(cp), n), gb);
        assertThat(gpu.toFloats(gb)).isEqualTo(CPU.toFloats(cb)); // the same rounding, bit for bit
        for (int[] offsetAndLength : new int[][] {{1, n - 1}, {4, 3}, {0, 2}}) { // unaligned views and short tails
            int off = offsetAndLength[0], len = offsetAndLength[1];
            Tensor cpart = CPU.allocate(DType.BF16, len), gpart = gpu.allocate(DType.BF16, len);
            CPU.copy(cp.view(off, len), cpart);
            gpu.copy(gpu.upload(CPU.toFloats(cp), n).view(off, len), gpart);
            assertThat(gpu.toFloats(gpart)).as("cast of [%d, %d)", off, off + len).isEqualTo(CPU.toFloats(cpart));
        }
        gpu.scale(gp, 0.5f);
        CPU.scale(cp, 0.5f);
        gpu.add(gp, gpu.upload(grad, n));
        CPU.add(cp, CPU.upload(grad, n));
        near(gp, cp, 1e-7, "scale and add");
        gpu.fill(gp, 3f);
        assertThat(gpu.toFloats(gp)).containsOnly(3f);
    }

}
