package io.fsdp4j.model;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.Arrays;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/** Generation with the KV cache agrees with the plain full-sequence forward, token by token. */
class GeneratorTest {
    static final java.util.List<String> MODELS = Golden.MODELS;
    private final CpuBackend cpu = CpuBackend.INSTANCE;

    @ParameterizedTest
    @FieldSource("MODELS")
    void cachedLogitsEqualTheFullForward(String name) {
        SingleDeviceModel m = Golden.load(name);
        int[] prompt = {3, 141, 59, 26, 5};
        int[] generated = Generator.greedy(m, prompt, 9);
        assertThat(generated).hasSize(9);
        // reference: rerun the whole sequence so far without a cache and take the argmax of the last position
        int[] sequence = prompt;
        for (int step = 0; step < generated.length; step++) {
            float[] logits = fullLogitsOfLastPosition(m, sequence);
            assertThat(generated[step]).as("%s token %d", name, step).isEqualTo(argmax(logits));
            sequence = Arrays.copyOf(sequence, sequence.length + 1);
            sequence[sequence.length - 1] = generated[step];
        }
        // and the cached logits themselves match (beyond the argmax)
        KvCache cache = m.model().newKvCache(1, sequence.length, DType.F32);
        float[] cached = lastLogits(m, cache, Arrays.copyOf(sequence, 8), 0);
        cached = lastLogits(m, cache, new int[] {sequence[8]}, 8);
        assertThat(Golden.relativeError(cached, fullLogitsOfLastPosition(m, Arrays.copyOf(sequence, 9)))).isLessThan(1e-5);
    }

    @ParameterizedTest
    @FieldSource("MODELS")
    void generationStopsAtAStopToken(String name) {
        SingleDeviceModel m = Golden.load(name);
        int[] free = Generator.greedy(m, new int[] {1, 2, 3}, 6);
        int[] stopped = Generator.greedy(m, new int[] {1, 2, 3}, 6, free[2]);
        assertThat(stopped.length).isLessThanOrEqualTo(3);
        assertThat(stopped[stopped.length - 1]).isEqualTo(free[2]);
    }

    /**
     * Batched generation gives each prompt the tokens it gets alone (prompts of several lengths, padded in one batch),
     * and the batch size makes no difference.
     */
    @ParameterizedTest
    @FieldSource("MODELS")
    void batchedGenerationGivesEachPromptItsOwnTokens(String name) {
        SingleDeviceModel m = Golden.load(name);
        java.util.List<int[]> prompts = java.util.List.of(new int[] {3, 141, 59}, new int[] {7}, new int[] {5, 9, 2, 6, 5, 3},
                new int[] {1, 2}, new int[] {8, 9, 7, 9});
        int[] stop = {Generator.greedy(m, prompts.get(0), 8)[4]};
        for (int batchSize : new int[] {1, 2, 5}) {
            java.util.List<int[]> all = Generator.greedy(m, prompts, 8, batchSize, stop);
            for (int i = 0; i < prompts.size(); i++) {
                assertThat(all.get(i)).as("%s prompt %d, batches of %d", name, i, batchSize)
                        .isEqualTo(Generator.greedy(m, prompts.get(i), 8, stop));
            }
        }
    }

    /** The logits of the last of {@code tokens}, run at positions position.. through the cache of one sequence. */
    static float[] lastLogits(SingleDeviceModel m, KvCache cache, int[] tokens, int position) {
        CpuBackend cpu = CpuBackend.INSTANCE;
        int[] positions = new int[tokens.length];
        for (int i = 0; i < tokens.length; i++) {
            positions[i] = position + i;
        }
        TokenBatch batch = new TokenBatch(1, tokens.length, cpu.uploadInts(tokens, tokens.length),
                cpu.uploadInts(positions, tokens.length), null, null);
        return cpu.toFloats(m.logits(batch, cache, cpu.uploadInts(new int[] {tokens.length - 1}, 1)));
    }

    private float[] fullLogitsOfLastPosition(SingleDeviceModel m, int[] sequence) {
        CausalLM model = m.model();
        ModelConfig c = model.config();
        TokenBatch batch = TokenBatch.of(cpu, new int[][] {sequence}, new int[][] {sequence});
        Tensor x = model.embedForward(m.params().get(0), batch);
        for (int layer = 0; layer < model.blockCount(); layer++) {
            x = model.blockForward(layer, m.params().get(model.blockUnit(layer)), x, batch).output();
        }
        Tensor last = x.view((long) (sequence.length - 1) * c.hidden(), 1, c.hidden());
        Tensor head = m.params().get(model.headUnit());
        Tensor normed = cpu.allocate(DType.F32, 1, c.hidden());
        cpu.rmsNormForward(normed, cpu.allocate(DType.F32, 1), last, head.view(0, c.hidden()), (float) c.rmsNormEps());
        Tensor lmHead = c.tieEmbeddings() ? m.params().get(0).view(0, c.vocabSize(), c.hidden())
                : head.view(c.hidden(), c.vocabSize(), c.hidden());
        Tensor logits = cpu.allocate(DType.F32, 1, c.vocabSize());
        cpu.linearForward(logits, normed, lmHead, null);
        return cpu.toFloats(logits);
    }

    /** Index of the largest value, the first on ties: the reference for the backends' argmaxRows. */
    static int argmax(float[] values) {
        int best = 0;
        for (int i = 1; i < values.length; i++) {
            if (values[i] > values[best]) {
                best = i;
            }
        }
        return best;
    }
}
