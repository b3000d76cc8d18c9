package io.fsdp4j.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code fsdp.param_dtype: fp16} and the loss-scaling keys: defaults, spellings, bad values, round trip. */
class LossScalingTest {

    private static TrainConfig set(String... overrides) {
        return TrainConfig.load(null, List.of(overrides));
    }

    @Test
    void fp16ScalesDynamicallyByDefaultAsGradScalerDoes() {
        assertThat(set("fsdp.param_dtype=fp16").fsdp().lossScale())
                .isEqualTo(new LossScaling(LossScaling.Mode.DYNAMIC, 65536, 2000));
        assertThat(set("fsdp.reduce_dtype=fp16").fsdp().lossScale().mode()).isEqualTo(LossScaling.Mode.DYNAMIC);
        assertThat(set("fsdp.param_dtype=fp16").fsdp().paramDtype()).isEqualTo(Precision.FP16);
        assertThat(set("fsdp.param_dtype=bf16").fsdp().lossScale()).isEqualTo(LossScaling.none());
        assertThat(TrainConfig.defaults().fsdp().lossScale()).isEqualTo(LossScaling.none());
    }

    @Test
    void everySpellingOfLossScale() {
        assertThat(set("fsdp.loss_scale=dynamic", "fsdp.loss_scale_init=1024", "fsdp.loss_scale_growth_interval=50")
                .fsdp().lossScale()).isEqualTo(new LossScaling(LossScaling.Mode.DYNAMIC, 1024, 50));
        assertThat(set("fsdp.param_dtype=fp16", "fsdp.loss_scale=none").fsdp().lossScale()).isEqualTo(LossScaling.none());
        assertThat(set("fsdp.param_dtype=fp16", "fsdp.loss_scale=128").fsdp().lossScale())
                .isEqualTo(new LossScaling(LossScaling.Mode.STATIC, 128, LossScaling.DEFAULT_GROWTH_INTERVAL));
        assertThat(set("fsdp.loss_scale=AUTO").fsdp().lossScale()).isEqualTo(LossScaling.none());
        // the dynamic scale's settings are read by a dynamic scale only
        assertThat(set("fsdp.loss_scale_init=1024").fsdp().lossScale()).isEqualTo(LossScaling.none());
    }

    @Test
    void badValuesNameTheKey() {
        assertThatThrownBy(() -> set("fsdp.loss_scale=big")).isInstanceOf(UserError.class)
                .hasMessage("config key 'fsdp.loss_scale' must be auto, dynamic, none or a positive number, got 'big'");
        assertThatThrownBy(() -> set("fsdp.loss_scale=-2")).hasMessageContaining("got '-2'");
        assertThatThrownBy(() -> set("fsdp.loss_scale=0")).hasMessageContaining("got '0'");
        assertThatThrownBy(() -> set("fsdp.param_dtype=fp16", "fsdp.loss_scale_init=0"))
                .hasMessage("config key 'fsdp.loss_scale_init' must be a positive number, got '0.0'");
        assertThatThrownBy(() -> set("fsdp.param_dtype=fp16", "fsdp.loss_scale_growth_interval=0"))
                .hasMessageStartingWith("config key 'fsdp.loss_scale_growth_interval' must be");
    }

    @Test
    void theEffectiveConfigWritesTheScalingAndLoadsBackEqual() {
        for (TrainConfig c : List.of(set("fsdp.param_dtype=fp16", "fsdp.loss_scale_init=4096"),
                set("fsdp.param_dtype=fp16", "fsdp.loss_scale=none"), set("fsdp.loss_scale=256"), set())) {
            assertThat(reload(c)).as(c.toYaml()).isEqualTo(c);
        }
        Map<?, ?> fsdp = (Map<?, ?>) set("fsdp.param_dtype=fp16").toMap().get("fsdp");
        assertThat(fsdp.get("param_dtype")).isEqualTo("fp16");
        assertThat(fsdp.get("loss_scale")).isEqualTo("dynamic");
        assertThat(fsdp.get("loss_scale_init")).isEqualTo(65536.0);
        assertThat(fsdp.get("loss_scale_growth_interval")).isEqualTo(2000);
    }

    private static TrainConfig reload(TrainConfig c) {
        try {
            java.nio.file.Path file = java.nio.file.Files.createTempFile("fsdp4j-loss-scale", ".yaml");
            try {
                java.nio.file.Files.writeString(file, c.toYaml());
                return TrainConfig.load(file, List.of());
            } finally {
                java.nio.file.Files.delete(file);
            }
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
