package io.fsdp4j.fsdp;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.model.BlockActivations;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.RankMemory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** What each rank holds: its share of the state, and full parameters only while a unit computes. */
class ShardingTest {

    @ParameterizedTest(name = "{0} on {1} ranks, shard size {2}")
    @CsvSource({"full_shard,1,1", "full_shard,2,2", "full_shard,3,3", "full_shard,4,4", "shard_grad_op,3,3",
            "no_shard,3,1", "hybrid_shard,4,2", "hybrid_shard_zero2,4,2"})
    void eachRankHoldsItsShareOfTheStatePlusPadding(String strategy, int ranks, int shardSize) {
        var result = GoldenTrainingTest.train("qwen2", GoldenTrainingTest.layout(strategy, ranks,
                strategy.startsWith("hybrid") ? shardSize : 0, 1));
        List<UnitLayout> units = LlamaModel.layout(Golden.config("qwen2"));
        long total = units.stream().mapToLong(UnitLayout::numel).sum();
        long perRank = units.stream().mapToLong(u -> (u.numel() + shardSize - 1) / shardSize).sum();
        assertThat(result.memory()).hasSize(ranks);
        for (RankMemory m : result.memory()) {
            assertThat(m.paramBytes()).as("fp32 master shard of rank %d", m.rank()).isEqualTo(4 * perRank);
            assertThat(m.gradBytes()).isEqualTo(4 * perRank);
            assertThat(m.optimizerBytes()).isEqualTo(8 * perRank);
        }
        // a shard group together holds every element once, plus at most S-1 padding elements per unit
        assertThat(perRank * shardSize).isBetween(total, total + (long) units.size() * (shardSize - 1));
    }

    /** Records which units are gathered whenever the model computes. */
    private static final class Observed implements CausalLM {
        private final CausalLM model;
        FsdpModel fsdp;
        final List<String> events = Collections.synchronizedList(new ArrayList<>());

        Observed(CausalLM model) {
            this.model = model;
        }

        private void record(String stage) {
            Set<Integer> gathered = new TreeSet<>();
            for (int u = 0; u < fsdp.units().size(); u++) {
                if (fsdp.units().get(u).isGathered()) {
                    gathered.add(u);
                }
            }
            events.add(stage + gathered);
        }

        @Override public ModelConfig config() { return model.config(); }
        @Override public List<UnitLayout> units() { return model.units(); }
        @Override public boolean headUsesEmbedding() { return model.headUsesEmbedding(); }
        @Override
        public io.fsdp4j.model.KvCache newKvCache(int batch, int capacity, io.fsdp4j.tensor.DType dtype) {
            return model.newKvCache(batch, capacity, dtype);
        }

        @Override
        public Tensor blockForward(int layer, Tensor p, Tensor x, TokenBatch b, io.fsdp4j.model.KvCache cache) {
            record("cached-block" + layer);
            return model.blockForward(layer, p, x, b, cache);
        }

        @Override
        public Tensor logits(Tensor hp, Tensor ep, Tensor x) {
            record("logits");
            return model.logits(hp, ep, x);
        }

        @Override
        public Tensor embedForward(Tensor p, TokenBatch b) {
            record("embed");
            return model.embedForward(p, b);
        }

        @Override
        public void embedBackward(Tensor g, TokenBatch b, Tensor dx) {
            record("embed-back");
            model.embedBackward(g, b, dx);
        }

        @Override
        public BlockActivations blockForward(int layer, Tensor p, Tensor x, TokenBatch b) {
            record("block" + layer);
            return model.blockForward(layer, p, x, b);
        }

        @Override
        public BlockActivations blockForwardSelective(int layer, Tensor p, Tensor x, TokenBatch b,
                                                      io.fsdp4j.backend.MemoryScope recomputable) {
            record("block" + layer);
            return model.blockForwardSelective(layer, p, x, b, recomputable);
        }

        @Override
        public BlockActivations blockForwardKeepingAttention(int layer, Tensor p, Tensor x, TokenBatch b,
                                                             io.fsdp4j.backend.MemoryScope kept) {
            record("block" + layer);
            return model.blockForwardKeepingAttention(layer, p, x, b, kept);
        }

        @Override
        public BlockActivations blockRecompute(int layer, Tensor p, Tensor x, TokenBatch b, BlockActivations kept) {
            record("block" + layer);
            return model.blockRecompute(layer, p, x, b, kept);
        }

        @Override
        public BlockActivations recomputeCheap(int layer, Tensor p, BlockActivations kept, TokenBatch b) {
            record("block" + layer + "-recompute-cheap");
            return model.recomputeCheap(layer, p, kept, b);
        }

        @Override
        public Tensor blockBackward(int layer, Tensor p, Tensor g, BlockActivations a, Tensor dOut, TokenBatch b,
                                    boolean accumulateGrads) {
            record("block" + layer + "-back");
            return model.blockBackward(layer, p, g, a, dOut, b, accumulateGrads);
        }

        @Override
        public double headLoss(Tensor hp, Tensor ep, Tensor x, TokenBatch b, float s, Tensor hg, Tensor eg, Tensor dx, Tensor l) {
            record("head");
            return model.headLoss(hp, ep, x, b, s, hg, eg, dx, l);
        }
    }

    private static List<String> stagesOfOneStep(String modelName, ShardingStrategy strategy, ActivationCheckpointing ac) {
        return stagesOfOneStep(modelName, strategy, ac, io.fsdp4j.config.FsdpSection.DEFAULT_PREFETCH);
    }

    private static List<String> stagesOfOneStep(String modelName, ShardingStrategy strategy, ActivationCheckpointing ac,
                                                int prefetch) {
        ModelConfig config = Golden.config(modelName);
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, 2), Duration.ofSeconds(30));
        List<List<String>> perRank = Collections.synchronizedList(new ArrayList<>(List.of(List.of(), List.of())));
        RankThreads.run(world, r -> {
            var rank = world.rank(r, CpuBackend.INSTANCE);
            Observed observed = new Observed(new LlamaModel(config, CpuBackend.INSTANCE));
            observed.fsdp = FsdpModel.apply(observed, rank,
                    new FsdpPolicy(strategy, Precision.FP32, Precision.FP32, ac, false, prefetch),
                    new RandomInit(1, 0.02, observed.units()));
            int[][] ids = {{1, 2, 3, 4}}, labels = {{1, 2, 3, 4}};
            observed.fsdp.forwardBackward(List.of(TokenBatch.of(CpuBackend.INSTANCE, ids, labels)), 0.5f);
            observed.record("after");
            perRank.set(r, observed.events);
        });
        assertThat(perRank.get(1)).isEqualTo(perRank.get(0));
        return perRank.get(0);
    }

    /**
     * The forward alone ({@link ShardedForward}: evaluation and generation) holds the unit that computes and the one
     * prefetched, freeing each after its stage whatever the strategy (a tied head keeps the embeddings from the
     * first stage to the last); rank 1, with nothing to compute, takes part in every gather. qwen2 ties its head,
     * llama does not.
     */
    @org.junit.jupiter.api.Test
    void theForwardAloneHoldsOnlyTheUnitThatComputesAndThePrefetchedOne() {
        for (ShardingStrategy strategy : List.of(ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP)) {
            assertThat(stagesOfTheForwardAlone("llama", strategy, 1)).containsExactly(
                    "embed[0, 1]", "block0[1, 2]", "block1[2, 3]", "head[3]", "after loss[]",
                    "embed[0, 1]", "cached-block0[1, 2]", "cached-block1[2, 3]", "logits[3]", "after generation[]");
        }
        assertThat(stagesOfTheForwardAlone("qwen2", ShardingStrategy.FULL_SHARD, 0)).containsExactly(
                "embed[0]", "block0[0, 1]", "block1[0, 2]", "head[0, 3]", "after loss[]",
                "embed[0]", "cached-block0[0, 1]", "cached-block1[0, 2]", "logits[0, 3]", "after generation[]");
    }

    private static List<String> stagesOfTheForwardAlone(String modelName, ShardingStrategy strategy, int prefetch) {
        ModelConfig config = Golden.config(modelName);
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, 2), Duration.ofSeconds(30));
        List<List<String>> perRank = Collections.synchronizedList(new ArrayList<>(List.of(List.of(), List.of())));
        RankThreads.run(world, r -> {
            var rank = world.rank(r, CpuBackend.INSTANCE);
            var cpu = CpuBackend.INSTANCE;
            Observed observed = new Observed(new LlamaModel(config, cpu));
            observed.fsdp = FsdpModel.apply(observed, rank, new FsdpPolicy(strategy, Precision.FP32, Precision.FP32,
                    ActivationCheckpointing.NONE, false, prefetch), new RandomInit(1, 0.02, observed.units()));
            ShardedForward forward = new ShardedForward(observed.fsdp);
            int[][] ids = {{1, 2, 3, 4}};
            forward.loss(r == 0 ? TokenBatch.of(cpu, ids, ids) : null, null);
            observed.record("after loss");
            var cache = observed.newKvCache(1, 4, io.fsdp4j.tensor.DType.F32);
            TokenBatch prompt = new TokenBatch(1, 4, cpu.uploadInts(ids[0], 4), cpu.uploadInts(new int[] {0, 1, 2, 3}, 4),
                    null, null);
            forward.logits(r == 0 ? prompt : null, cache, cpu.uploadInts(new int[] {3}, 1));
            observed.record("after generation");
            perRank.set(r, observed.events);
        });
        assertThat(perRank.get(1)).containsExactly("after loss[]", "after generation[]");
        return perRank.get(0);
    }

    /**
     * fsdp.prefetch: 0 gathers each unit only when it computes; 2 holds the two units after the computing one (in
     * backward, the two blocks below it). llama's units: 0 embeddings, 1-2 blocks, 3 head.
     */
    @org.junit.jupiter.api.Test
    void thePrefetchDepthIsHowManyUnitsAheadAreGathered() {
        assertThat(stagesOfOneStep("llama", ShardingStrategy.FULL_SHARD, ActivationCheckpointing.NONE, 0)).containsExactly(
                "embed[0]", "block0[1]", "block1[2]", "head[2, 3]", "block1-back[2]", "block0-back[1]",
                "embed-back[]", "after[]");
        assertThat(stagesOfOneStep("llama", ShardingStrategy.FULL_SHARD, ActivationCheckpointing.NONE, 2)).containsExactly(
                "embed[0, 1, 2]", "block0[1, 2, 3]", "block1[2, 3]", "head[1, 2, 3]", "block1-back[1, 2]",
                "block0-back[1]", "embed-back[]", "after[]");
        assertThat(stagesOfOneStep("qwen2", ShardingStrategy.FULL_SHARD, ActivationCheckpointing.FULL, 3)).containsExactly(
                "embed[0, 1, 2, 3]", "block0[1, 2, 3]", "block1[2, 3]", "head[0, 1, 2, 3]", "block1[1, 2]",
                "block1-back[1, 2]", "block0[1]", "block0-back[1]", "embed-back[]", "after[]");
    }

    /**
     * The prefetch depth changes when gathers start, never what is computed: the same losses, gradient norms and final
     * parameters to the bit with 0, 1 and 3 units ahead (3 ranks, 2 micro-batches, full checkpointing: the second
     * micro-batch regathers every unit).
     */
    @org.junit.jupiter.api.Test
    void everyPrefetchDepthTrainsToTheSameBits() {
        List<TrainingJobResult> runs = new ArrayList<>();
        for (int depth : new int[] {1, 0, 3}) {
            List<String> settings = new ArrayList<>(GoldenTrainingTest.layout("full_shard", 3, 0, 2));
            settings.addAll(List.of("fsdp.activation_checkpointing=full", "fsdp.prefetch=" + depth));
            var r = GoldenTrainingTest.train("qwen2", settings);
            runs.add(new TrainingJobResult(r.steps().stream().map(s -> s.loss()).toList(),
                    r.steps().stream().map(s -> s.gradNorm()).toList(), r.finalParams()));
        }
        for (TrainingJobResult other : runs.subList(1, runs.size())) {
            assertThat(other.losses()).isEqualTo(runs.get(0).losses());
            assertThat(other.gradNorms()).isEqualTo(runs.get(0).gradNorms());
            for (int u = 0; u < other.params().size(); u++) {
                assertThat(other.params().get(u)).as("unit %d", u).isEqualTo(runs.get(0).params().get(u));
            }
        }
    }

    private record TrainingJobResult(List<Double> losses, List<Double> gradNorms, List<float[]> params) {}

    /** FULL_SHARD holds the unit that computes and the next one, whose gather is prefetched: never more. */
    @org.junit.jupiter.api.Test
    void fullShardHoldsTheComputingUnitAndTheNextOne() {
        // llama: 2 blocks, untied head (units: 0 embeddings, 1-2 blocks, 3 head); backward runs 3, 2, 1
        assertThat(stagesOfOneStep("llama", ShardingStrategy.FULL_SHARD, ActivationCheckpointing.NONE)).containsExactly(
                "embed[0, 1]", "block0[1, 2]", "block1[2, 3]", "head[2, 3]", "block1-back[1, 2]", "block0-back[1]",
                "embed-back[]", "after[]");
        // qwen2: the tied head also gathers the embeddings; checkpointing recomputes each block's forward
        assertThat(stagesOfOneStep("qwen2", ShardingStrategy.FULL_SHARD, ActivationCheckpointing.FULL)).containsExactly(
                "embed[0, 1]", "block0[1, 2]", "block1[2, 3]", "head[0, 2, 3]", "block1[1, 2]", "block1-back[1, 2]",
                "block0[1]", "block0-back[1]", "embed-back[]", "after[]");
        // keeping attention: each block's forward recomputed (but attention) with its parameters gathered, as full's
        assertThat(stagesOfOneStep("qwen2", ShardingStrategy.FULL_SHARD, ActivationCheckpointing.FULL_KEEP_ATTENTION))
                .containsExactly("embed[0, 1]", "block0[1, 2]", "block1[2, 3]", "head[0, 2, 3]", "block1[1, 2]",
                        "block1-back[1, 2]", "block0[1]", "block0-back[1]", "embed-back[]", "after[]");
        // selective: only the cheap part of each block is recomputed, with the block's parameters gathered
        assertThat(stagesOfOneStep("llama", ShardingStrategy.FULL_SHARD, ActivationCheckpointing.SELECTIVE)).containsExactly(
                "embed[0, 1]", "block0[1, 2]", "block1[2, 3]", "head[2, 3]", "block1-recompute-cheap[1, 2]",
                "block1-back[1, 2]", "block0-recompute-cheap[1]", "block0-back[1]", "embed-back[]", "after[]");
    }

    @org.junit.jupiter.api.Test
    void shardGradOpKeepsParametersFromForwardToBackward() {
        assertThat(stagesOfOneStep("llama", ShardingStrategy.SHARD_GRAD_OP, ActivationCheckpointing.NONE)).containsExactly(
                "embed[0, 1]", "block0[0, 1, 2]", "block1[0, 1, 2, 3]", "head[0, 1, 2, 3]", "block1-back[1, 2]",
                "block0-back[1]", "embed-back[]", "after[]");
    }
}
