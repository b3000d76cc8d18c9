package io.fsdp4j.fsdp;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.TokenBatch;
import java.time.Duration;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What each checkpointing mode keeps from a micro-batch's forward to its backward, in bytes, measured by the engine:
 * equal to what the model states ({@link FsdpModel#statedKeptActivationBytes}, the planner's figures) for every
 * family and mode, and, by hand for two families, to the formulas of {@link ActivationCheckpointing}: none keeps
 * every saved activation, selective drops the norms' outputs and statistics and the MLP's activation function, full
 * keeps only each block's input and the head's, and full keeping attention each block's attention output and
 * log-sum-exp besides. (That the gradients are the same in every mode:
 * TrainingEquivalenceTest.)
 */
class ActivationCheckpointingTest {
    private static final int B = 2, T = 4, N = B * T, E = 4; // fp32 activations on the CPU

    /** The engine's kept activation bytes after one micro-batch under each mode, on one CPU rank. */
    private static Map<ActivationCheckpointing, Long> keptBytes(ModelConfig config) {
        return keptBytes(config, null);
    }

    /** As {@link #keptBytes(ModelConfig)}; each mode's stated bytes into {@code stated} where it is not null. */
    private static Map<ActivationCheckpointing, Long> keptBytes(ModelConfig config,
                                                                Map<ActivationCheckpointing, Long> stated) {
        return keptBytes(config, stated, 0);
    }

    /** As {@link #keptBytes(ModelConfig, Map)}, the last {@code notCheckpointed} blocks not checkpointed. */
    private static Map<ActivationCheckpointing, Long> keptBytes(ModelConfig config,
                                                                Map<ActivationCheckpointing, Long> stated,
                                                                int notCheckpointed) {
        return keptBytes(config, stated, notCheckpointed, 0);
    }

    /**
     * As {@link #keptBytes(ModelConfig, Map, int)}, and the {@code selective} blocks before those checkpointed
     * selectively ({@code fsdp.blocks_selective}).
     */
    private static Map<ActivationCheckpointing, Long> keptBytes(ModelConfig config,
                                                                Map<ActivationCheckpointing, Long> stated,
                                                                int notCheckpointed, int selective) {
        Map<ActivationCheckpointing, Long> kept = new EnumMap<>(ActivationCheckpointing.class);
        for (ActivationCheckpointing mode : ActivationCheckpointing.values()) {
            InProcessWorld world = new InProcessWorld(new DeviceMesh(1, 1), Duration.ofSeconds(30));
            var rank = world.rank(0, CpuBackend.INSTANCE);
            var policy = new FsdpPolicy(ShardingStrategy.FULL_SHARD, Precision.FP32, Precision.FP32, mode, false,
                    1, io.fsdp4j.config.ParamCopy.PER_GATHER, notCheckpointed, selective);
            var model = CausalLMs.create(config, CpuBackend.INSTANCE);
            FsdpModel fsdp = FsdpModel.apply(model, rank, policy, new RandomInit(1, 0.02, model.units()));
            int[][] ids = {{1, 2, 3, 4}, {5, 6, 7, 8}};
            TokenBatch batch = TokenBatch.of(CpuBackend.INSTANCE, ids, ids);
            fsdp.forwardBackward(List.of(batch), 1f / N);
            kept.put(mode, fsdp.keptActivationBytes());
            if (stated != null) {
                stated.put(mode, fsdp.statedKeptActivationBytes(batch));
            }
        }
        return kept;
    }

    @ParameterizedTest
    @ValueSource(strings = {"llama", "qwen2", "qwen3", "gemma3", "phi3", "bloom"})
    void theEngineKeepsWhatTheModelStatesInEveryMode(String family) {
        Map<ActivationCheckpointing, Long> stated = new EnumMap<>(ActivationCheckpointing.class);
        Map<ActivationCheckpointing, Long> kept = keptBytes(Golden.config(family), stated);
        assertThat(kept).as(family).isEqualTo(stated);
        assertThat(kept.get(ActivationCheckpointing.NONE)).isGreaterThan(kept.get(ActivationCheckpointing.SELECTIVE));
        assertThat(kept.get(ActivationCheckpointing.SELECTIVE))
                .isGreaterThan(kept.get(ActivationCheckpointing.FULL_KEEP_ATTENTION));
        assertThat(kept.get(ActivationCheckpointing.FULL_KEEP_ATTENTION))
                .isGreaterThan(kept.get(ActivationCheckpointing.FULL));
    }

    /**
     * {@code fsdp.blocks_not_checkpointed}: the last blocks keep what none keeps, the others what their mode keeps,
     * as stated (the planner's figures); with as many as the model has (or more), every mode keeps none's bytes.
     */
    @ParameterizedTest
    @ValueSource(strings = {"qwen2", "gemma3", "bloom"})
    void theLastBlocksLeftOutOfCheckpointingKeepWhatNoneKeeps(String family) {
        ModelConfig c = Golden.config(family);
        Map<ActivationCheckpointing, Long> none = keptBytes(c);
        Map<ActivationCheckpointing, Long> stated = new EnumMap<>(ActivationCheckpointing.class);
        Map<ActivationCheckpointing, Long> lastOne = keptBytes(c, stated, 1);
        assertThat(lastOne).as(family).isEqualTo(stated);
        for (ActivationCheckpointing mode : List.of(ActivationCheckpointing.FULL,
                ActivationCheckpointing.FULL_KEEP_ATTENTION, ActivationCheckpointing.SELECTIVE)) {
            long perBlockNone = (none.get(ActivationCheckpointing.NONE) - none.get(mode)) / c.layers();
            assertThat(lastOne.get(mode)).as("%s %s, the last block not checkpointed", family, mode)
                    .isGreaterThan(none.get(mode)).isLessThan(none.get(ActivationCheckpointing.NONE));
            if (!family.equals("bloom") || mode == ActivationCheckpointing.SELECTIVE) { // BLOOM's block 0 differs
                assertThat(lastOne.get(mode) - none.get(mode)).as("%s %s", family, mode).isEqualTo(perBlockNone);
            }
        }
        assertThat(keptBytes(c, null, c.layers() + 1).values()).as(family)
                .containsOnly(none.get(ActivationCheckpointing.NONE));
    }

    /**
     * {@code fsdp.blocks_selective}: under full checkpointing (with or without attention kept) the blocks before those
     * left out keep what selective keeps, the others what their mode keeps, as stated (the planner's figures); alone
     * or beside a block left out. A block's selective bytes less its mode's are taken from one block left out under
     * each (none's less the mode's, less none's less selective's), so BLOOM's block 0 (its embedding LayerNorm, kept
     * only where block 0 is not recomputed) is counted on its own. With as many as the model has, full keeps
     * selective's bytes; under none and selective the key changes nothing.
     */
    @ParameterizedTest
    @ValueSource(strings = {"qwen2", "gemma3", "bloom"})
    void theBlocksBeforeThoseLeftOutKeepWhatSelectiveKeeps(String family) {
        ModelConfig c = Golden.config(family);
        int layers = c.layers();
        Map<ActivationCheckpointing, Long> all = keptBytes(c);
        Map<ActivationCheckpointing, Long> lastOne = keptBytes(c, null, 1);
        Map<ActivationCheckpointing, Long> stated = new EnumMap<>(ActivationCheckpointing.class);
        Map<ActivationCheckpointing, Long> oneSelective = keptBytes(c, stated, 0, 1);
        assertThat(oneSelective).as("%s, one block selective", family).isEqualTo(stated);
        Map<ActivationCheckpointing, Long> statedBoth = new EnumMap<>(ActivationCheckpointing.class);
        Map<ActivationCheckpointing, Long> both = keptBytes(c, statedBoth, 1, 1);
        assertThat(both).as("%s, one block left out and one selective", family).isEqualTo(statedBoth);
        Map<ActivationCheckpointing, Long> everySelective = keptBytes(c, null, 0, layers + 1);
        long selectiveLeftOut = lastOne.get(ActivationCheckpointing.SELECTIVE)
                - all.get(ActivationCheckpointing.SELECTIVE); // one block's none less its selective's
        for (ActivationCheckpointing mode : List.of(ActivationCheckpointing.FULL,
                ActivationCheckpointing.FULL_KEEP_ATTENTION)) {
            long noneLessMode = lastOne.get(mode) - all.get(mode); // one block's none less its mode's
            long selectiveLessMode = noneLessMode - selectiveLeftOut; // one block's selective less its mode's
            assertThat(selectiveLessMode).as("%s %s", family, mode).isPositive().isLessThan(noneLessMode);
            // what only block 0 keeps where it is not recomputed: BLOOM's normalised embeddings, nothing elsewhere
            long firstBlock = all.get(ActivationCheckpointing.SELECTIVE) - all.get(mode) - layers * selectiveLessMode;
            if (family.equals("bloom")) {
                assertThat(firstBlock).as("%s %s, block 0's own", family, mode).isPositive();
            } else {
                assertThat(firstBlock).as("%s %s, block 0's own", family, mode).isZero();
            }
            assertThat(oneSelective.get(mode) - all.get(mode)).as("%s %s, one block selective", family, mode)
                    .isEqualTo(selectiveLessMode);
            assertThat(both.get(mode) - all.get(mode)).as("%s %s, one block left out, one selective", family, mode)
                    .isEqualTo(noneLessMode + selectiveLessMode + (layers <= 2 ? firstBlock : 0));
            assertThat(everySelective.get(mode)).as("%s %s, every block selective", family, mode)
                    .isEqualTo(all.get(ActivationCheckpointing.SELECTIVE));
        }
        for (ActivationCheckpointing mode : List.of(ActivationCheckpointing.NONE, ActivationCheckpointing.SELECTIVE)) {
            assertThat(oneSelective.get(mode)).as("%s %s, one block selective", family, mode).isEqualTo(all.get(mode));
            assertThat(both.get(mode)).as("%s %s, one left out, one selective", family, mode)
                    .isEqualTo(lastOne.get(mode));
        }
    }

    @Test
    void llamaSelectiveKeepsTheProductsAndAttentionOnly() {
        ModelConfig c = Golden.config("qwen2");
        long C = c.hidden(), F = c.intermediate(), Q = c.qkvWidth(), A = (long) c.heads() * c.headDim(), L = c.layers();
        long lse = 4L * B * c.heads() * T, residual = E * N * C;
        var kept = keptBytes(c);
        // per block: input, normed1, qkv, attention, mid, normed2, gate|up, hidden, two 1/rms, the log-sum-exp;
        // the last block's output too (the head's input)
        assertThat(kept.get(ActivationCheckpointing.NONE))
                .isEqualTo(L * (E * N * (4 * C + Q + A + 3 * F) + 8L * N + lse) + residual);
        assertThat(kept.get(ActivationCheckpointing.SELECTIVE))
                .isEqualTo(L * (E * N * (2 * C + Q + A + 2 * F) + lse) + residual);
        assertThat(kept.get(ActivationCheckpointing.FULL)).isEqualTo((L + 1) * residual); // and the head's input
        // full keeping attention: each block's output, and its attention's output and log-sum-exp
        assertThat(kept.get(ActivationCheckpointing.FULL_KEEP_ATTENTION))
                .isEqualTo((L + 1) * residual + L * (E * N * A + lse));
    }

    @Test
    void bloomSelectiveDropsTheLayerNormsAndGelu() {
        ModelConfig c = Golden.config("bloom");
        long C = c.hidden(), L = c.layers();
        var kept = keptBytes(c);
        // per block: mean and 1/std of two LayerNorms, their outputs, gelu(up)
        assertThat(kept.get(ActivationCheckpointing.NONE) - kept.get(ActivationCheckpointing.SELECTIVE))
                .isEqualTo(L * (16L * N + E * N * (2 * C + 4 * C)));
        assertThat(kept.get(ActivationCheckpointing.SELECTIVE)).isGreaterThan(kept.get(ActivationCheckpointing.FULL));
        // full: the embeddings and a copy of every block's output (the last one's the head's input)
        assertThat(kept.get(ActivationCheckpointing.FULL)).isEqualTo((L + 1) * E * N * C);
        assertThat(kept.get(ActivationCheckpointing.FULL_KEEP_ATTENTION))
                .isEqualTo((L + 1) * E * N * C + L * (E * N * C + 4L * B * c.heads() * T));
    }
}
