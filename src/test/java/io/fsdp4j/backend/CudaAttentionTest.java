package io.fsdp4j.backend;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.backend.CudaAttention.Engine;
import io.fsdp4j.config.AttentionKernel;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import org.junit.jupiter.api.Test;

/**
 * The choice of attention engine without a GPU: what cuDNN's engine is never given, which engine each setting picks
 * from two times, and the line that says so. (On a GPU: CudnnAttentionGpuTest.)
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
    void cudnnWithoutLibcudnnIsAOneLineErrorSayingWhatToDo() {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> CudaAttention.requireCudnnFor(AttentionKernel.CUDNN,
                        false)).isInstanceOf(io.fsdp4j.UserError.class)
                .hasMessageContaining("libcudnn.so.9").hasMessageContaining("FSDP4J_CUDA_LIBS")
                .hasMessageContaining("attention.kernel: auto").hasMessageNotContaining("\n");
        CudaAttention.requireCudnnFor(AttentionKernel.CUDNN, true);
        CudaAttention.requireCudnnFor(AttentionKernel.AUTO, false); // auto: fsdp4j's kernels, silently
    }

    @Test
    void theLineSaysWhichAndBothTimes() {
        assertThat(CudaAttention.line(QWEN, Engine.CUDNN, 0.829, 0.323, ""))
                .isEqualTo("attention B=1 T=2048 NH=28 NKV=4 HS=128: cudnn (forward+backward 0.323 ms on cuDNN, "
                        + "0.829 ms on fsdp4j's kernels)");
        assertThat(CudaAttention.line(new AttentionShape(2, 100, 4, 2, 64, 32), Engine.FSDP4J, 0.1, 0.2,
                " (summed over the ranks)")).isEqualTo("attention B=2 T=100 NH=4 NKV=2 HS=64 window=32: fsdp4j "
                        + "(forward+backward 0.200 ms on cuDNN, 0.100 ms on fsdp4j's kernels (summed over the ranks))");
    }

    @Test
    void cudnnsShapeCarriesTheWindowAndTheScale() {
        var s = new AttentionShape(2, 100, 4, 2, 64, 32).withScores(0.2f, 0f);
        assertThat(CudaAttention.cudnnShape(s)).isEqualTo(new io.fsdp4j.cuda.CudnnAttention.Shape(2, 100, 4, 2, 64,
                32, 0.2f));
    }
}
