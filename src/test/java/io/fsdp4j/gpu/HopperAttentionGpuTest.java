package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.config.AttentionKernel;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Tag;

/**
 * Hopper's attention kernels (attention_sm90.cu: wgmma, the bulk tensor copy engine), which the backend runs on sm_90
 * by default: the forward's out and lse against the sm_80 kernels' ({@link CudaBackend.KernelSet#SM80}, forced on
 * the same GPU) and the CPU backend's, at head sizes 128 and 64, grouped-query heads (split or not in the dk/dv
 * kernel), uneven and short sequences, a window and packed documents; and the backward (Hopper's dq and dk/dv),
 * fed the Hopper forward's out and lse, against the CPU's, its dq bit for bit against the sm_80 kernel's given the same
 * out and lse (dk/dv's partial sums may be split differently on the two paths).
 */
@Tag("gpu")
class HopperAttentionGpuTest {
    private static CudaBackend hopper;
    private static CudaBackend sm80;
    private static final CpuBackend CPU = CpuBackend.INSTANCE;
    private final SplittableRandom random = new SplittableRandom(21);

    @BeforeAll
    static void open() {
        if (io.fsdp4j.cuda.NativeLibraries.cudaAvailable()) {
            hopper = new CudaBackend(0, CudaBackend.KernelSet.AUTO);
            sm80 = new CudaBackend(0, CudaBackend.KernelSet.SM80);
        }
    }

    @BeforeEach
    void requireHopper() {
        GpuTests.requireGpus(1);
        assumeTrue(Cuda.properties(0).major() == 9, "Hopper's kernels need a GPU of compute capability 9.0");
    }

    @AfterAll
    static void close() {
        if (hopper != null) {
            hopper.close();
            sm80.close();
        }
    }

    private float[] bf16Randoms(int n, double scale) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = Half.roundBf16((float) ((random.nextDouble() * 2 - 1) * scale));
        }
        return v;
    }

    private static Tensor bf16(CudaBackend gpu, float[] v, int... shape) {
        Tensor t = gpu.allocate(DType.BF16, shape);
        gpu.copy(gpu.upload(v, shape), t);
        return t;
    }

    /** Documents of 1 to 300 tokens, the same starts for every batch row but shifted by the row. */
    private static int[] documentStarts(int batch, int seqLen) {
        int[] starts = new int[batch * seqLen];
        for (int b = 0; b < batch; b++) {
            int start = 0;
            for (int t = 0; t < seqLen; t++) {
                if ((t * 7 + b * 13) % 151 == 0 || t % 300 == 299) {
                    start = t;
                }
                starts[b * seqLen + t] = start;
            }
        }
        return starts;
    }

    @Test
    void theDefaultRunsHopperKernelsAndSm80ForcesTheOthers() {
        assertThat(hopper.hopperAttention()).isTrue();
        assertThat(sm80.hopperAttention()).isFalse();
        assertThat(sm80.simpleAttention()).isFalse();
    }

    @Test
    void forwardMatchesTheSm80KernelsAndTheCpu() {
        AttentionShape[] shapes = {
                new AttentionShape(2, 700, 8, 2, 128, 0),  // two query tiles' worth of keys and a tail of 60 rows
                new AttentionShape(1, 1030, 4, 4, 128, 0), // a tail of 6 rows, no grouping
                new AttentionShape(1, 333, 4, 1, 64, 100), // head size 64, a window
                new AttentionShape(2, 256, 6, 2, 64, 0),   // whole tiles only
                new AttentionShape(2, 70, 4, 2, 64, 0)};   // shorter than a tile
        for (AttentionShape s : shapes) {
            for (boolean packed : new boolean[] {false, true}) {
                int n = s.batch() * s.seqLen(), ow = s.heads() * s.headDim();
                float[] qkv = bf16Randoms(n * s.qkvWidth(), 3), dOut = bf16Randoms(n * ow, 1);
                int[] starts = documentStarts(s.batch(), s.seqLen());
                String what = s + (packed ? " packed" : "");
                Tensor cQkv = CPU.upload(qkv, n, s.qkvWidth()), cStarts = packed ? CPU.uploadInts(starts, n) : null;
                Tensor cOut = CPU.allocate(DType.F32, n, ow), cLse = CPU.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
                CPU.attentionForward(cOut, cLse, cQkv, cStarts, s);
                float[][] results = new float[4][];
                double backward = Double.NaN;
                for (CudaBackend gpu : new CudaBackend[] {hopper, sm80}) {
                    Tensor gQkv = bf16(gpu, qkv, n, s.qkvWidth()), gStarts = packed ? gpu.uploadInts(starts, n) : null;
                    Tensor gOut = gpu.allocate(DType.BF16, n, ow);
                    Tensor gLse = gpu.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
                    gpu.attentionForward(gOut, gLse, gQkv, gStarts, s);
                    int at = gpu == hopper ? 0 : 2;
                    results[at] = gpu.toFloats(gOut);
                    results[at + 1] = gpu.toFloats(gLse);
                    if (gpu == hopper) { // the backward consumes the Hopper forward's out and lse
                        Tensor cD = CPU.allocate(DType.F32, n, s.qkvWidth()), gD = gpu.allocate(DType.BF16, n, s.qkvWidth());
                        CPU.attentionBackward(cD, CPU.upload(dOut, n, ow), cQkv, cOut, cLse, cStarts, s);
                        gpu.attentionBackward(gD, bf16(gpu, dOut, n, ow), gQkv, gOut, gLse, gStarts, s);
                        backward = Golden.relativeError(gpu.toFloats(gD), CPU.toFloats(cD));
                        Tensor sD = sm80.allocate(DType.BF16, n, s.qkvWidth());
                        sm80.attentionBackward(sD, bf16(sm80, dOut, n, ow), bf16(sm80, qkv, n, s.qkvWidth()),
                                bf16(sm80, gpu.toFloats(gOut), n, ow), sm80.upload(gpu.toFloats(gLse), s.batch(),
                                        s.heads(), s.seqLen()), packed ? sm80.uploadInts(starts, n) : null, s);
                        float[] hopperD = gpu.toFloats(gD), sm80D = sm80.toFloats(sD);
                        for (int row = 0; row < n; row++) { // the query columns: dq's
                            for (int c = 0; c < ow; c++) {
                                int i = row * s.qkvWidth() + c;
                                assertThat(Float.floatToRawIntBits(hopperD[i])).as("dq vs sm80 " + what + " at row "
                                        + row + " column " + c).isEqualTo(Float.floatToRawIntBits(sm80D[i]));
                            }
                        }
                    }
                }
                float[] cpuOut = CPU.toFloats(cOut), cpuLse = CPU.toFloats(cLse);
                assertThat(Golden.relativeError(results[0], cpuOut)).as("out vs cpu " + what).isLessThan(1e-2);
                assertThat(Golden.relativeError(results[1], cpuLse)).as("lse vs cpu " + what).isLessThan(1e-5);
                assertThat(Golden.relativeError(results[0], results[2])).as("out vs sm80 " + what).isLessThan(1e-2);
                assertThat(Golden.relativeError(results[1], results[3])).as("lse vs sm80 " + what).isLessThan(1e-5);
                assertThat(backward).as("backward " + what).isLessThan(2e-2);
            }
        }
    }

    /**
     * From 4096 keys' span at head size 128 the backward is one kernel (dq added into fp32 sums; the rule is
     * HopperFusedBackwardTest's): against the CPU's and the sm_80 kernels' given the same out and lse, with an uneven
     * tail, grouped heads split across blocks, and a window.
     */
    @Test
    void theOneKernelBackwardOfLongSpansMatchesTheCpuAndTheSm80Kernels() {
        AttentionShape[] shapes = {
                new AttentionShape(1, 4150, 4, 1, 128, 0),    // 33 key tiles, a tail of 54 rows, a group of 4
                new AttentionShape(1, 4200, 4, 2, 128, 4096)}; // a window of 4096 keys
        for (AttentionShape s : shapes) {
            int n = s.batch() * s.seqLen(), ow = s.heads() * s.headDim();
            float[] qkv = bf16Randoms(n * s.qkvWidth(), 3), dOut = bf16Randoms(n * ow, 1);
            Tensor gQkv = bf16(hopper, qkv, n, s.qkvWidth()), gOut = hopper.allocate(DType.BF16, n, ow);
            Tensor gLse = hopper.allocate(DType.F32, s.batch(), s.heads(), s.seqLen());
            hopper.attentionForward(gOut, gLse, gQkv, null, s);
            float[] out = hopper.toFloats(gOut), lse = hopper.toFloats(gLse);
            Tensor gD = hopper.allocate(DType.BF16, n, s.qkvWidth());
            hopper.attentionBackward(gD, bf16(hopper, dOut, n, ow), gQkv, gOut, gLse, null, s);
            Tensor cD = CPU.allocate(DType.F32, n, s.qkvWidth());
            CPU.attentionBackward(cD, CPU.upload(dOut, n, ow), CPU.upload(qkv, n, s.qkvWidth()), CPU.upload(out, n, ow),
                    CPU.upload(lse, s.batch(), s.heads(), s.seqLen()), null, s);
            Tensor sD = sm80.allocate(DType.BF16, n, s.qkvWidth());
            sm80.attentionBackward(sD, bf16(sm80, dOut, n, ow), bf16(sm80, qkv, n, s.qkvWidth()), bf16(sm80, out, n, ow),
                    sm80.upload(lse, s.batch(), s.heads(), s.seqLen()), null, s);
            float[] hopperD = hopper.toFloats(gD), sm80D = sm80.toFloats(sD);
            assertThat(Golden.relativeError(hopperD, CPU.toFloats(cD))).as("backward vs cpu " + s).isLessThan(2e-2);
            assertThat(Golden.relativeError(hopperD, sm80D)).as("backward vs sm80 " + s).isLessThan(1e-2);
            // attention.deterministic: the dq and dk/dv kernels instead, dq the sm80 kernel's to the bit, twice
            hopper.attention().use(AttentionKernel.FSDP4J, true);
            try {
                for (int run = 0; run < 2; run++) {
                    Tensor gDet = hopper.allocate(DType.BF16, n, s.qkvWidth());
                    hopper.attentionBackward(gDet, bf16(hopper, dOut, n, ow), gQkv, gOut, gLse, null, s);
                    float[] det = hopper.toFloats(gDet);
                    for (int row = 0; row < n; row++) {
                        for (int c = 0; c < ow; c++) {
                            int i = row * s.qkvWidth() + c;
                            assertThat(Float.floatToRawIntBits(det[i])).as("deterministic dq vs sm80 " + s + " run "
                                    + run + " at row " + row + " column " + c)
                                    .isEqualTo(Float.floatToRawIntBits(sm80D[i]));
                        }
                    }
                    assertThat(Golden.relativeError(det, hopperD)).as("deterministic vs one kernel " + s)
                            .isLessThan(1e-2);
                }
            } finally {
                hopper.attention().use(AttentionKernel.FSDP4J, false);
            }
        }
    }
}
