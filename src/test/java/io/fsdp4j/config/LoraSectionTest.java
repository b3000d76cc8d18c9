package io.fsdp4j.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code lora.*}: off by default, PEFT's scaling, and one-line errors naming the key for bad values. */
class LoraSectionTest {

    private static LoraSection lora(String... sets) {
        return TrainConfig.load(null, List.of(sets)).lora();
    }

    @Test
    void offByDefaultAndOnWithARank() {
        assertThat(lora().enabled()).isFalse();
        LoraSection on = lora("lora.rank=16", "lora.alpha=32", "lora.target_modules=v_proj,q_proj,down_proj");
        assertThat(on.enabled()).isTrue();
        assertThat(on.scaling()).isEqualTo(2.0);
        List<String> llama = List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj");
        List<String> qv = List.of("q_proj", "v_proj");
        assertThat(on.modules(llama, qv)).containsExactly("q_proj", "v_proj", "down_proj"); // in the block's order
        assertThat(on.modules(List.of("qkv_proj", "o_proj", "gate_up_proj", "down_proj"), List.of("qkv_proj")))
                .isNull(); // not Phi-3's
        assertThat(lora("lora.rank=16", "lora.alpha=32", "lora.rslora=true").scaling()).isEqualTo(8.0);
        assertThat(lora("lora.rank=4", "lora.target_modules=all-linear").modules(llama, qv)).isEqualTo(llama);
        // by default (auto) the family's PEFT defaults, in the block's order
        assertThat(lora("lora.rank=4").targetModules()).containsExactly("auto");
        assertThat(lora("lora.rank=4").modules(llama, List.of("v_proj", "q_proj"))).containsExactly("q_proj", "v_proj");
        assertThatThrownBy(() -> lora("lora.rank=4", "lora.target_modules=auto,q_proj"))
                .hasMessage("config key 'lora.target_modules': auto stands alone; got auto,q_proj");
        assertThat(lora("lora.rank=4", "lora.init=/tmp/adapter").init()).isEqualTo(Path.of("/tmp/adapter"));
    }

    @Test
    void survivesToYamlAndLoad() throws Exception {
        TrainConfig config = TrainConfig.load(null, List.of("lora.rank=8", "lora.alpha=16", "lora.dropout=0.05",
                "lora.target_modules=q_proj,k_proj", "lora.rslora=true", "lora.init=adapters/start"));
        Path yaml = java.nio.file.Files.createTempFile("lora", ".yaml");
        java.nio.file.Files.writeString(yaml, config.toYaml());
        assertThat(TrainConfig.load(yaml, List.of()).lora()).isEqualTo(config.lora());
    }

    @Test
    void badValuesAreOneLineErrorsNamingTheKey() {
        assertThatThrownBy(() -> lora("lora.rank=-1")).isInstanceOf(UserError.class)
                .hasMessage("config key 'lora.rank' must be >= 0, got -1");
        assertThatThrownBy(() -> lora("lora.rank=8", "lora.dropout=1")).isInstanceOf(UserError.class)
                .hasMessageContaining("'lora.dropout' must be >= 0.0 and < 1.0");
        assertThatThrownBy(() -> lora("lora.rank=8", "lora.dropout=-0.1")).isInstanceOf(UserError.class)
                .hasMessage("config key 'lora.dropout' must be >= 0.0 and < 1.0, got -0.1");
        assertThatThrownBy(() -> lora("lora.rank=8", "lora.alpha=0")).isInstanceOf(UserError.class)
                .hasMessageContaining("'lora.alpha' must be > 0");
        assertThatThrownBy(() -> lora("lora.rank=8", "lora.target_modules=q_proj,qkv")).isInstanceOf(UserError.class)
                .hasMessage("config key 'lora.target_modules': unknown module 'qkv'; use names of q_proj, k_proj, "
                        + "v_proj, o_proj, gate_proj, up_proj, down_proj, qkv_proj, gate_up_proj, query_key_value, "
                        + "dense, dense_h_to_4h, dense_4h_to_h, or all-linear, or auto");
        assertThatThrownBy(() -> lora("lora.rank=8", "lora.target_modules=all-linear,q_proj"))
                .isInstanceOf(UserError.class).hasMessageContaining("all-linear stands alone");
        assertThatThrownBy(() -> lora("lora.rank=8", "lora.target_modules=q_proj,q_proj"))
                .isInstanceOf(UserError.class).hasMessageContaining("names 'q_proj' twice");
        assertThatThrownBy(() -> lora("lora.rnak=8")).isInstanceOf(UserError.class).hasMessageContaining("lora.rnak");
    }

    /**
     * {@code lora.quantize}: none by default, nf4 for QLoRA's base (kept through the YAML the run reports); nf4
     * without a LoRA rank, or an unknown quantization, is one line naming the key.
     */
    @Test
    void quantizeIsNoneByDefaultNf4OnRequestAndNeedsARank() throws Exception {
        assertThat(lora().quantize()).isEqualTo(BaseQuantization.NONE);
        assertThat(lora("lora.rank=4").quantized()).isFalse();
        LoraSection qlora = lora("lora.rank=4", "lora.quantize=nf4");
        assertThat(qlora.quantize()).isEqualTo(BaseQuantization.NF4);
        assertThat(qlora.quantized()).isTrue();
        TrainConfig config = TrainConfig.load(null, List.of("lora.rank=8", "lora.quantize=nf4"));
        assertThat(config.toYaml()).contains("quantize: nf4");
        Path yaml = java.nio.file.Files.createTempFile("qlora", ".yaml");
        java.nio.file.Files.writeString(yaml, config.toYaml());
        assertThat(TrainConfig.load(yaml, List.of()).lora()).isEqualTo(config.lora());
        assertThatThrownBy(() -> lora("lora.quantize=nf4")).isInstanceOf(UserError.class)
                .hasMessageStartingWith("config key 'lora.quantize' is nf4, but 'lora.rank' is 0")
                .hasMessageContaining("set lora.rank or lora.quantize=none").hasMessageNotContaining("\n");
        // bitsandbytes' and transformers' names for it point to it
        Path other = java.nio.file.Files.createTempFile("qlora", ".yaml");
        java.nio.file.Files.writeString(other, "load_in_4bit: true\nlora:\n  rank: 8\n  bnb_4bit_quant_type: nf4\n");
        assertThatThrownBy(() -> TrainConfig.load(other, List.of())).isInstanceOf(UserError.class)
                .hasMessageContaining("'load_in_4bit' (did you mean 'lora.quantize'?)")
                .hasMessageContaining("'lora.bnb_4bit_quant_type' (did you mean 'lora.quantize'?)");
        assertThatThrownBy(() -> lora("lora.rank=4", "lora.quantize=fp4")).isInstanceOf(UserError.class)
                .hasMessageContaining("lora.quantize").hasMessageContaining("nf4").hasMessageNotContaining("\n");
    }
}
