package io.fsdp4j.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code attention.kernel}: auto by default, the three spellings, and a one-line error naming the key otherwise;
 * {@code attention.deterministic}: false by default, an error beside cudnn.
 */
class AttentionSectionTest {

    private static AttentionKernel kernel(String... sets) {
        return TrainConfig.load(null, List.of(sets)).attention().kernel();
    }

    @Test
    void autoByDefaultAndEachSpellingParses() {
        assertThat(kernel()).isEqualTo(AttentionKernel.AUTO);
        assertThat(kernel("attention.kernel=fsdp4j")).isEqualTo(AttentionKernel.FSDP4J);
        assertThat(kernel("attention.kernel=cudnn")).isEqualTo(AttentionKernel.CUDNN);
        assertThat(kernel("attention.kernel=CUDNN")).isEqualTo(AttentionKernel.CUDNN);
        assertThat(TrainConfig.defaults().toMap().get("attention"))
                .isEqualTo(java.util.Map.of("kernel", "auto", "deterministic", false));
        assertThat(TrainConfig.keys()).contains("attention.kernel", "attention.deterministic");
    }

    @Test
    void deterministicIsFalseByDefaultAndRefusesCudnn() {
        assertThat(TrainConfig.defaults().attention().deterministic()).isFalse();
        var on = TrainConfig.load(null, List.of("attention.deterministic=true")).attention();
        assertThat(on.deterministic()).isTrue();
        assertThat(on.kernel()).isEqualTo(AttentionKernel.AUTO);
        assertThat(TrainConfig.load(null, List.of("attention.deterministic=true", "attention.kernel=fsdp4j"))
                .attention().deterministic()).isTrue();
        assertThatThrownBy(() -> TrainConfig.load(null, List.of("attention.deterministic=true", "attention.kernel=cudnn")))
                .isInstanceOf(UserError.class).hasMessageContaining("attention.deterministic")
                .hasMessageContaining("attention.kernel: auto or fsdp4j").hasMessageNotContaining("\n");
        assertThatThrownBy(() -> TrainConfig.load(null, List.of("attention.deterministic=sometimes")))
                .isInstanceOf(UserError.class).hasMessageContaining("attention.deterministic")
                .hasMessageNotContaining("\n");
    }

    @Test
    void anUnknownEngineOrKeyIsAOneLineErrorNamingTheKey() {
        assertThatThrownBy(() -> kernel("attention.kernel=flash")).isInstanceOf(UserError.class)
                .hasMessageContaining("attention.kernel").hasMessageContaining("auto")
                .hasMessageContaining("fsdp4j").hasMessageContaining("cudnn").hasMessageNotContaining("\n");
        assertThatThrownBy(() -> kernel("attention.engine=cudnn")).isInstanceOf(UserError.class)
                .hasMessageContaining("attention.engine").hasMessageNotContaining("\n");
        // transformers' and axolotl's names for it point here
        assertThatThrownBy(() -> kernel("attn_implementation=sdpa")).isInstanceOf(UserError.class)
                .hasMessageContaining("did you mean 'attention.kernel'?");
        assertThatThrownBy(() -> kernel("flash_attention=true")).isInstanceOf(UserError.class)
                .hasMessageContaining("did you mean 'attention.kernel'?");
    }
}
