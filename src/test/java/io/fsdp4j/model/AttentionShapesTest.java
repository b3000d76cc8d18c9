package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.CpuBackend;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A model's attention shapes for a batch, one per kind of layer: what a job of several GPU ranks settles its attention
 * engine on before the first step (backend.CudaAttention.settle).
 */
class AttentionShapesTest {

    private static List<AttentionShape> shapes(ModelConfig config, int batch, int seqLen) {
        return CausalLMs.create(config, CpuBackend.INSTANCE).attentionShapes(batch, seqLen);
    }

    @Test
    void oneShapePerKindOfLayerWithItsWindowScaleAndCap() {
        assertThat(shapes(ModelConfig.qwen25_7b(), 2, 4096)).containsExactly(new AttentionShape(2, 4096, 28, 4, 128, 0));
        // Gemma 2: sliding-window and global layers alternate; scores scaled by query_pre_attn_scalar and capped
        ModelConfig gemma = ModelConfig.gemma2_2b();
        List<AttentionShape> g = shapes(gemma, 1, 8192);
        assertThat(g).hasSize(2).allSatisfy(s -> {
            assertThat(s.softcap()).isPositive();
            assertThat(s.headDim()).isEqualTo(gemma.headDim());
        });
        assertThat(g).extracting(AttentionShape::slidingWindow).containsExactlyInAnyOrder(gemma.slidingWindow(), 0);
        // BLOOM: no engine but fsdp4j's runs its attention (per-head qkv, ALiBi): nothing to settle
        assertThat(shapes(ModelConfig.bloom560m(), 1, 2048)).isEmpty();
    }
}
