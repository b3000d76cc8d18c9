package io.fsdp4j.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code attention.kernel}: auto by default, the three spellings, and a one-line error naming the key otherwise. */
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
        assertThat(TrainConfig.defaults().toMap().get("attention")).isEqualTo(java.util.Map.of("kernel", "auto"));
        assertThat(TrainConfig.keys()).contains("attention.kernel");
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
