package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.tensor.Tensor;
import java.util.Arrays;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What each model states of its activations ({@link CausalLMs#activationSizes}) is what its block forward holds on
 * the CPU backend (fp32), its input aside: the whole scope, and what selective checkpointing keeps of it, for the
 * first block and a later one, in every family. (The FSDP engine's kept bytes against the same statement:
 * ActivationCheckpointingTest.)
 */
class ActivationSizesTest {
    private static final CpuBackend CPU = CpuBackend.INSTANCE;

    private static long bytes(BlockActivations a) {
        return a.tensors().stream().skip(1).mapToLong(t -> t.numel() * t.dtype().bytes()).sum(); // the input first
    }

    private static long sum(long[] bytes) {
        return Arrays.stream(bytes).sum();
    }

    @ParameterizedTest
    @ValueSource(strings = {"llama", "llama3-rope", "qwen2", "mistral", "qwen3", "gemma3", "phi3", "bloom"})
    void eachModelStatesWhatItsBlockForwardHolds(String name) {
        SingleDeviceModel m = Golden.load(name);
        CausalLM model = m.model();
        int[][] ids = Golden.intRows(Golden.json(name, "batch.json").get("input_ids"));
        TokenBatch batch = TokenBatch.of(CPU, ids, ids);
        ActivationSizes stated = CausalLMs.activationSizes(model.config(), batch.seqLen(), batch.batch(), 4);
        Tensor x = model.embedForward(m.params().get(0), batch);
        assertThat(x.numel() * 4).isEqualTo(stated.residual());
        for (int layer : new int[] {0, model.blockCount() - 1}) {
            Tensor w = m.params().get(model.blockUnit(layer));
            long first = layer == 0 ? sum(stated.firstBlockExtra()) : 0;
            BlockActivations all = model.blockForward(layer, w, x, batch);
            assertThat(bytes(all)).as("%s block %d, whole scope", name, layer).isEqualTo(sum(stated.forward()) + first);
            assertThat(all.tensors().size() - 1).as("%s block %d, tensors", name, layer)
                    .isEqualTo(stated.forward().length + stated.firstBlockExtra().length * (layer == 0 ? 1 : 0));
            try (MemoryScope recomputable = CPU.newScope()) {
                BlockActivations kept = model.blockForwardSelective(layer, w, x, batch, recomputable);
                assertThat(bytes(kept)).as("%s block %d, selective", name, layer).isEqualTo(sum(stated.kept()) + first);
            }
            assertThat(stated.keptPerBlock(ActivationCheckpointing.SELECTIVE)).isEqualTo(sum(stated.kept()));
            assertThat(all.output().numel() * 4).isEqualTo(stated.residual());
        }
        assertThat(stated.logits()).isEqualTo(4L * batch.rows() * model.config().vocabSize());
    }
}
