package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.backend.CudaAttention.Engine;
import io.fsdp4j.config.AttentionKernel;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import org.junit.jupiter.api.Test;

/**
 * The choice of attention engine without a GPU: what cuDNN's engine is never given, which engine each setting picks
 * from two times, each direction's choice from four, and the line that says so. (On a GPU: CudnnAttentionGpuTest.)
 */
class CudaAttentionTest {
    private static final AttentionShape QWEN = new AttentionShape(1, 2048, 28, 4, 128, 0);
    private static final Tensor STARTS = CpuBackend.INSTANCE.uploadInts(new int[] {0, 0}, 2);

    @Test
    void cudnnIsGivenCausalGroupedBf16AttentionOverUnpackedSequencesOnly() {
        assertThat(CudaAttention.cudnnRejects(QWEN, null, DType.BF16, 4096)).isNull();
        assertThat(CudaAttention.cudnnRejects(new AttentionShape(2, 333, 6, 3, 64, 100), null, DType.BF16, 256))
                .isNull(); // uneven T, a sliding window
        assertThat(CudaAttention.cudnnRejects(QWEN, STARTS, DType.BF16, 4096)).isEqualTo("packed documents");
        assertThat(CudaAttention.cudnnRejects(new AttentionShape(1, 64, 4, 4, 64, 0,
                AttentionShape.QkvLayout.PER_HEAD, true), null, DType.BF16, 4096)).contains("ALiBi");
        assertThat(CudaAttention.cudnnRejects(QWEN.withScores(0.0625f, 50f), null, DType.BF16, 4096))
                .isEqualTo("soft-capped scores");
        assertThat(CudaAttention.cudnnRejects(QWEN, null, DType.F32, 4096)).contains("bf16");
        assertThat(CudaAttention.cudnnRejects(QWEN, null, DType.F16, 4096)).contains("bf16");
        assertThat(CudaAttention.cudnnRejects(new AttentionShape(1, 64, 4, 2, 12, 0), null, DType.BF16, 4096))
                .contains("16-byte");
        assertThat(CudaAttention.cudnnRejects(QWEN, null, DType.BF16, 4096 + 8)).contains("16-byte");
    }

    @Test
    void autoKeepsTheFasterAndFsdp4jOnATieOrWithoutBothTimes() {
        assertThat(CudaAttention.pick(AttentionKernel.AUTO, null, 0.83, 0.32)).isEqualTo(Engine.CUDNN);
        assertThat(CudaAttention.pick(AttentionKernel.AUTO, null, 0.30, 0.32)).isEqualTo(Engine.FSDP4J);
        assertThat(CudaAttention.pick(AttentionKernel.AUTO, null, 0.5, 0.5)).isEqualTo(Engine.FSDP4J);
        assertThat(CudaAttention.pick(AttentionKernel.AUTO, null, 0.5, Double.NaN)).isEqualTo(Engine.FSDP4J);
        assertThat(CudaAttention.pick(AttentionKernel.AUTO, "packed documents", 0.83, 0.32)).isEqualTo(Engine.FSDP4J);
        assertThat(CudaAttention.pick(AttentionKernel.FSDP4J, null, 0.83, 0.32)).isEqualTo(Engine.FSDP4J);
        assertThat(CudaAttention.pick(AttentionKernel.CUDNN, null, 0.30, 0.32)).isEqualTo(Engine.CUDNN);
    }

    @Test
    void deterministicKeepsFsdp4jsBackwardAndAutosForward() {
        // cuDNN faster in both directions: under attention.deterministic its forward is kept, its backward is not
        var cudnnFaster = new CudaAttention.Times(0.09, 0.7, 0.07, 0.25);
        assertThat(CudaAttention.choose(AttentionKernel.AUTO, null, cudnnFaster, true))
                .isEqualTo(new CudaAttention.Choice(Engine.CUDNN, Engine.FSDP4J));
        assertThat(CudaAttention.choose(AttentionKernel.AUTO, null, cudnnFaster, false))
                .isEqualTo(new CudaAttention.Choice(Engine.CUDNN, Engine.CUDNN));
        assertThat(CudaAttention.choose(AttentionKernel.FSDP4J, null, cudnnFaster, true))
                .isEqualTo(new CudaAttention.Choice(Engine.FSDP4J, Engine.FSDP4J));
    }

    @Test
    void autoChoosesTheForwardAndTheBackwardApart() {
        // Hopper's forward faster than cuDNN's, cuDNN's backward faster than fsdp4j's (H200, Qwen2.5-7B at 2048)
        var hopperThenCudnn = new CudaAttention.Times(0.055, 0.700, 0.070, 0.250);
        assertThat(CudaAttention.choose(AttentionKernel.AUTO, null, hopperThenCudnn))
                .isEqualTo(new CudaAttention.Choice(Engine.FSDP4J, Engine.CUDNN));
        assertThat(CudaAttention.choose(AttentionKernel.AUTO, null, new CudaAttention.Times(0.09, 0.2, 0.07, 0.25)))
                .isEqualTo(new CudaAttention.Choice(Engine.CUDNN, Engine.FSDP4J));
        assertThat(CudaAttention.choose(AttentionKernel.AUTO, null, new CudaAttention.Times(0.09, 0.7, 0.07, 0.25)))
                .isEqualTo(new CudaAttention.Choice(Engine.CUDNN, Engine.CUDNN));
        assertThat(CudaAttention.choose(AttentionKernel.AUTO, "packed documents", hopperThenCudnn))
                .isEqualTo(new CudaAttention.Choice(Engine.FSDP4J, Engine.FSDP4J));
        assertThat(CudaAttention.choose(AttentionKernel.AUTO, null, CudaAttention.Times.NONE))
                .isEqualTo(new CudaAttention.Choice(Engine.FSDP4J, Engine.FSDP4J));
        assertThat(CudaAttention.choose(AttentionKernel.CUDNN, null, hopperThenCudnn))
                .isEqualTo(new CudaAttention.Choice(Engine.CUDNN, Engine.CUDNN));
        assertThat(CudaAttention.choose(AttentionKernel.FSDP4J, null, hopperThenCudnn))
                .isEqualTo(new CudaAttention.Choice(Engine.FSDP4J, Engine.FSDP4J));
        assertThat(new CudaAttention.Choice(Engine.FSDP4J, Engine.CUDNN).of(false)).isEqualTo(Engine.FSDP4J);
        assertThat(new CudaAttention.Choice(Engine.FSDP4J, Engine.CUDNN).of(true)).isEqualTo(Engine.CUDNN);
    }

    @Test
    void timesGoToTheRanksSumAndBackInOneOrder() {
        var ms = new CudaAttention.Times(1, 2, 3, 4);
        assertThat(ms.toArray()).containsExactly(1, 2, 3, 4);
        assertThat(CudaAttention.Times.of(new double[] {1, 2, 3, 4, 0})).isEqualTo(ms);
    }

    @Test
    void cudnnWithoutLibcudnnIsAOneLineErrorSayingWhatToDo() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> CudaAttention.requireCudnnFor(AttentionKernel.CUDNN,
                        false)).isInstanceOf(io.fsdp4j.UserError.class)
                .hasMessageContaining("libcudnn.so.9").hasMessageContaining("FSDP4J_CUDA_LIBS")
                .hasMessageContaining("attention.kernel: auto").hasMessageNotContaining("\n");
        CudaAttention.requireCudnnFor(AttentionKernel.CUDNN, true);
        CudaAttention.requireCudnnFor(AttentionKernel.AUTO, false); // auto: fsdp4j's kernels, silently
    }

    @Test
    void theLineSaysWhichForEachDirectionAndTheFourTimes() {
        assertThat(CudaAttention.line(QWEN, new CudaAttention.Choice(Engine.FSDP4J, Engine.CUDNN),
                new CudaAttention.Times(0.055, 0.774, 0.069, 0.254), ""))
                .isEqualTo("attention B=1 T=2048 NH=28 NKV=4 HS=128: forward fsdp4j (0.069 ms on cuDNN, 0.055 ms on "
                        + "fsdp4j's kernels), backward cudnn (0.254 ms on cuDNN, 0.774 ms on fsdp4j's kernels)");
        assertThat(CudaAttention.line(new AttentionShape(2, 100, 4, 2, 64, 32), CudaAttention.Choice.CUDNN,
                new CudaAttention.Times(0.1, 0.2, 0.01, 0.02), " (summed over the ranks)"))
                .isEqualTo("attention B=2 T=100 NH=4 NKV=2 HS=64 window=32: forward cudnn (0.010 ms on cuDNN, 0.100 ms "
                        + "on fsdp4j's kernels), backward cudnn (0.020 ms on cuDNN, 0.200 ms on fsdp4j's kernels) "
                        + "(summed over the ranks)");
    }

    @Test
    void cudnnsShapeCarriesTheWindowAndTheScale() {
        var s = new AttentionShape(2, 100, 4, 2, 64, 32).withScores(0.2f, 0f);
        assertThat(CudaAttention.cudnnShape(s)).isEqualTo(new io.fsdp4j.cuda.CudnnAttention.Shape(2, 100, 4, 2, 64,
                32, 0.2f));
    }
}
