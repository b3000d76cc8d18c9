package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.Precision;
import io.fsdp4j.model.BlockActivations;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tensor.Tensor;
import java.util.Arrays;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The planner's bytes of a block forward's scope ({@link Activations#blockForward}, and what selective checkpointing
 * keeps, {@link Activations#blockKept}) are what the model's block forward holds on the CPU backend (fp32), its
 * input aside: for the Llama family with and without Qwen3's head norms, and for Gemma 3 and 2.
 */
class ActivationsMatchTheModelTest {
    private static final CpuBackend CPU = CpuBackend.INSTANCE;

    private static long bytes(BlockActivations a) {
        return a.tensors().stream().skip(1).mapToLong(t -> t.numel() * t.dtype().bytes()).sum(); // the input first
    }

    @ParameterizedTest
    @ValueSource(strings = {"llama3-rope", "qwen3", "gemma3", "gemma2", "phi3"})
    void blockScopeIsTheModelsActivations(String name) {
        SingleDeviceModel m = Golden.load(name);
        CausalLM model = m.model();
        ModelConfig config = model.config();
        int[][] ids = Golden.intRows(Golden.json(name, "batch.json").get("input_ids"));
        TokenBatch batch = TokenBatch.of(CPU, ids, ids);
        Tensor x = model.embedForward(m.params().get(0), batch);
        Tensor w = m.params().get(model.blockUnit(0));
        Workload all = new Workload(batch.seqLen(), batch.batch(), ActivationCheckpointing.NONE, Precision.FP32,
                Precision.FP32);
        assertThat(bytes(model.blockForward(0, w, x, batch)))
                .isEqualTo(Arrays.stream(Activations.blockForward(ModelShape.of(config), all)).sum());
        try (MemoryScope recomputable = CPU.newScope()) {
            BlockActivations kept = model.blockForwardSelective(0, w, x, batch, recomputable);
            assertThat(bytes(kept)).isEqualTo(Arrays.stream(Activations.blockKept(ModelShape.of(config), all)).sum());
        }
    }
}
