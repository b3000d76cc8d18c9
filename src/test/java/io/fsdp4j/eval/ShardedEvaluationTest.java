package io.fsdp4j.eval;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.fsdp.FrozenHostShard;
import io.fsdp4j.fsdp.FrozenShard;
import io.fsdp4j.fsdp.FsdpPolicy;
import io.fsdp4j.fsdp.ShardedUnit;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.tokenizer.Tokenizer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.stream.Stream;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.FieldSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Evaluation on the ranks, through the sharded units, against the whole-model evaluation: the same loss of every
 * sequence and the same answers, on one rank and several, under every strategy, offloaded or not.
 */
class ShardedEvaluationTest {
    private static final CpuBackend CPU = CpuBackend.INSTANCE;
    static final List<String> MODELS = Stream.concat(Golden.MODELS.stream(), Stream.of("bloom", "gemma3", "qwen3"))
            .toList();

    @TempDir
    static Path tmp;
    static Tokenizer chars;
    static List<float[]> learnt;

    @BeforeAll
    static void trainTheSquadModel() {
        chars = Tokenizer.load(CharTokenizer.write(tmp.resolve("chars")));
        learnt = SquadFixture.train(tmp.resolve("ck"), null).finalParams();
    }

    @AfterAll
    static void closeTokenizer() {
        chars.close();
    }

    /** A layout of ranks: the world, its shard groups, the strategy, offload and prefetch depth. */
    record Layout(int ranks, int shardSize, ShardingStrategy strategy, boolean offload, int prefetch,
                  Precision params) {
        Layout(int ranks, int shardSize, ShardingStrategy strategy, boolean offload, int prefetch) {
            this(ranks, shardSize, strategy, offload, prefetch, Precision.FP32);
        }

        FsdpPolicy policy() {
            return new FsdpPolicy(strategy, params, Precision.FP32, ActivationCheckpointing.NONE, offload, prefetch);
        }

        @Override
        public String toString() {
            return strategy + " on " + ranks + " ranks (shard groups of " + shardSize + ")" + (offload ? ", offloaded"
                    : "") + ", prefetch " + prefetch + ", " + params + " parameters";
        }
    }

    static final List<Layout> LAYOUTS = List.of(
            new Layout(1, 1, ShardingStrategy.FULL_SHARD, false, 1),
            new Layout(2, 2, ShardingStrategy.FULL_SHARD, false, 1),
            new Layout(3, 3, ShardingStrategy.FULL_SHARD, false, 0),
            new Layout(2, 2, ShardingStrategy.SHARD_GRAD_OP, false, 2),
            new Layout(2, 1, ShardingStrategy.NO_SHARD, false, 1),
            new Layout(4, 2, ShardingStrategy.HYBRID_SHARD, false, 1),
            new Layout(4, 2, ShardingStrategy.HYBRID_SHARD_ZERO2, false, 1),
            new Layout(1, 1, ShardingStrategy.FULL_SHARD, true, 1),
            new Layout(2, 2, ShardingStrategy.FULL_SHARD, true, 1));

    static Stream<Arguments> modelsOnTwoRanksAndLayoutsOfQwen2() {
        return Stream.concat(MODELS.stream().map(m -> Arguments.of(m, LAYOUTS.get(1))),
                LAYOUTS.stream().map(l -> Arguments.of("qwen2", l)));
    }

    /**
     * Runs {@code body} on every rank of {@code layout} over the model sharded from {@code params} for forwards only,
     * as {@code eval} and {@code score} shard it; rank 0's result.
     */
    static <T> T onRanks(Layout layout, ModelConfig config, ParamSource params, Function<FsdpModel, T> body) {
        var world = new InProcessWorld(new DeviceMesh(layout.ranks() / layout.shardSize(), layout.shardSize()),
                Duration.ofSeconds(60));
        Map<Integer, T> results = new ConcurrentHashMap<>();
        RankThreads.run(world, r -> {
            RankContext rank = world.open(r);
            try {
                FsdpModel model = FsdpModel.forwardOnly(CausalLMs.create(config, rank.backend()), rank,
                        layout.policy(), params);
                results.put(r, body.apply(model));
            } finally {
                world.close(rank);
            }
        });
        for (int r = 1; r < layout.ranks(); r++) {
            assertThat(results.get(r)).as("rank %d's result", r).isEqualTo(results.get(0));
        }
        return results.get(0);
    }

    /**
     * A model sharded for forwards only holds its parameters in {@code fsdp.param_dtype} and no gradient (and no fp32
     * master): its units' shards are {@link FrozenShard}s, where training's hold fp32 masters and gradients. Offloaded,
     * the shards stay in host memory, as training's, but with no gradient shard ({@link FrozenHostShard}s: the
     * parameters in fp32, the bytes of training's masters).
     */
    @ParameterizedTest(name = "{0}")
    @FieldSource("LAYOUTS")
    void aForwardOnlyModelHoldsNoGradient(Layout layout) {
        ModelConfig config = Golden.config("qwen2");
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(config))) {
            for (Precision params : Precision.values()) {
                var policy = new Layout(layout.ranks(), layout.shardSize(), layout.strategy(), layout.offload(),
                        layout.prefetch(), params).policy();
                List<Object> held = onRanks(layout, config, weights, m -> {
                    FsdpModel training = FsdpModel.apply(CausalLMs.create(config, m.rank().backend()), m.rank(), policy,
                            weights);
                    FsdpModel forward = FsdpModel.forwardOnly(CausalLMs.create(config, m.rank().backend()), m.rank(),
                            policy, weights);
                    return List.of(training.shardBytes(), forward.shardBytes(), forward.units().stream()
                            .map(u -> ((ShardedUnit) u).storage().getClass().getSimpleName()).distinct().toList());
                });
                var training = (FsdpModel.ShardBytes) held.get(0);
                var forward = (FsdpModel.ShardBytes) held.get(1);
                assertThat(training.grads()).as("training's gradient shards").isPositive();
                if (layout.offload()) {
                    assertThat(held.get(2)).as("the units' storage").isEqualTo(List.of("FrozenHostShard"));
                    assertThat(forward).as("offloaded: fp32 parameters in host memory, no gradient")
                            .isEqualTo(new FsdpModel.ShardBytes(training.params(), 0, true));
                    continue;
                }
                assertThat(held.get(2)).as("the units' storage").isEqualTo(List.of("FrozenShard"));
                assertThat(forward.grads()).as("gradient bytes").isZero();
                assertThat(forward.params()).as("parameter bytes: %s, not fp32 masters", params)
                        .isEqualTo(training.params() / (4 / params.dtype().bytes())); // fp32 masters: 4 bytes
            }
        }
    }

    /**
     * With adapters ({@code eval --adapter}) the forward-only model holds the adapters frozen too: no gradient shard
     * anywhere (offloaded or not), where training's adapters have one; and it computes the loss that training's
     * sharding of the same base and adapters computes.
     */
    @ParameterizedTest(name = "{0}")
    @FieldSource("LAYOUTS")
    void anAdaptedForwardOnlyModelHoldsNoGradient(Layout layout) {
        ModelConfig config = Golden.config("qwen2");
        var lora = new io.fsdp4j.model.LoraSpec(4, 2.0, io.fsdp4j.model.LoraSpec.linears(config.architecture()));
        ParamSource adapters = (unit, start, dst, offset, count) -> {
            for (int i = 0; i < count; i++) { // small non-zero values: the adapters change the loss
                dst[offset + i] = (float) (0.01 * Math.sin(1 + unit * 7919 + start + i));
            }
        };
        List<Sequence> batch = EvaluationTest.goldenBatch("qwen2");
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir("qwen2"), CausalLMs.layout(config))) {
            var policy = layout.policy();
            List<Object> held = onRanks(layout, config, weights, m -> {
                FsdpModel training = FsdpModel.apply(CausalLMs.create(config, m.rank().backend(), lora), m.rank(),
                        policy, weights, adapters);
                FsdpModel forward = FsdpModel.forwardOnly(CausalLMs.create(config, m.rank().backend(), lora),
                        m.rank(), policy, weights, adapters, io.fsdp4j.config.BaseQuantization.NONE);
                double trainingLoss = new ShardedEvaluation(training, 1).loss(batch).loss();
                double forwardLoss = new ShardedEvaluation(forward, 1).loss(batch).loss();
                return List.of(training.shardBytes(), forward.shardBytes(), trainingLoss, forwardLoss);
            });
            var training = (FsdpModel.ShardBytes) held.get(0);
            var forward = (FsdpModel.ShardBytes) held.get(1);
            assertThat(training.grads()).as("training's adapters' gradient shards").isPositive();
            assertThat(forward.grads()).as("gradient bytes of the forward-only adapted model").isZero();
            assertThat((double) held.get(3)).as("loss").isEqualTo((double) held.get(2));
        }
    }

    /** The golden batch and the same sequences cut to other lengths: batches of one length, and lone ones. */
    private static List<Sequence> sequences(String name) {
        List<Sequence> golden = EvaluationTest.goldenBatch(name);
        List<Sequence> all = new ArrayList<>(golden);
        for (int i = 0; i < golden.size(); i++) {
            Sequence s = golden.get(i);
            int length = 5 + 3 * i;
            all.add(new Sequence(Arrays.copyOf(s.ids(), length), Arrays.copyOf(s.labels(), length)));
        }
        return all;
    }

    @ParameterizedTest(name = "{0}, {1}")
    @MethodSource("modelsOnTwoRanksAndLayoutsOfQwen2")
    void everySequenceHasTheLossOfTheWholeModel(String name, Layout layout) {
        ModelConfig config = Golden.config(name);
        List<Sequence> sequences = sequences(name);
        SingleDeviceModel whole = EvalModel.fromHf(Golden.dir(name)).load();
        List<Evaluation.SequenceLoss> expected = new ArrayList<>();
        Evaluation.LossResult total = Evaluation.loss(whole, CPU, sequences, (l, i) -> expected.add(l));
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir(name), CausalLMs.layout(config))) {
            // alone (a batch of one): the same bits; batched: within fp32 rounding
            List<Evaluation.SequenceLoss> alone = onRanks(layout, config, weights,
                    m -> new ShardedEvaluation(m, 1).sequenceLosses(sequences));
            assertThat(alone).isEqualTo(expected);
            Evaluation.LossResult batched = onRanks(layout, config, weights,
                    m -> new ShardedEvaluation(m, 3).loss(sequences));
            assertThat(batched.tokens()).isEqualTo(total.tokens());
            assertThat(batched.sequences()).isEqualTo(total.sequences());
            assertThat(batched.loss()).isCloseTo(total.loss(), Percentage.withPercentage(1e-4));
        }
    }

    /**
     * With bf16 parameters the units are gathered in bf16 and computed with (on the CPU, widened to fp32): the loss
     * is that of the whole model whose weights are the bf16-rounded masters, as training's forward computes.
     */
    @ParameterizedTest(name = "{0}")
    @FieldSource("MODELS")
    void bf16ParametersGiveTheLossOfTheRoundedWeights(String name) {
        ModelConfig config = Golden.config(name);
        List<Sequence> sequences = sequences(name);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir(name), CausalLMs.layout(config))) {
            ParamSource rounded = (unit, start, dst, offset, count) -> {
                weights.read(unit, start, dst, offset, count);
                for (int i = offset; i < offset + count; i++) {
                    dst[i] = io.fsdp4j.tensor.Half.roundBf16(dst[i]);
                }
            };
            List<Evaluation.SequenceLoss> expected = new ArrayList<>();
            Evaluation.loss(EvalModel.build(config, CPU, rounded), CPU, sequences, (l, i) -> expected.add(l));
            var layout = new Layout(2, 2, ShardingStrategy.FULL_SHARD, false, 1, Precision.BF16);
            List<Evaluation.SequenceLoss> got = onRanks(layout, config, weights,
                    m -> new ShardedEvaluation(m, 1).sequenceLosses(sequences));
            assertThat(got).isEqualTo(expected);
        }
    }

    static final List<Layout> GENERATION_LAYOUTS = List.of(LAYOUTS.get(0), LAYOUTS.get(1), LAYOUTS.get(2),
            LAYOUTS.get(5), LAYOUTS.get(8));

    @ParameterizedTest(name = "{0}")
    @FieldSource("GENERATION_LAYOUTS")
    void answersAreThoseOfTheWholeModel(Layout layout) {
        SingleDeviceModel whole = EvalModel.build(SquadFixture.CONFIG, CPU, learnt);
        List<SquadQuestion> questions = new ArrayList<>(SquadFixture.questions());
        SquadQuestion first = questions.getFirst();
        // a question it did not learn: a longer prompt, an answer that runs to the limit of new tokens
        questions.add(new SquadQuestion("new", "Bob lives in Rome.", "Where does Bob live?", List.of("Rome")));
        questions.add(new SquadQuestion("again", first.context(), first.question(), first.answers()));
        var text = new io.fsdp4j.data.TextTokenizer.HuggingFace(chars, "");
        Evaluation.SquadResult expected = Evaluation.squad(whole, text, questions, 12, p -> {});
        assertThat(expected.predictions().subList(0, 3)).extracting(Evaluation.SquadPrediction::prediction)
                .containsExactly("Paris", "red", "Oslo");
        ParamSource params = (unit, start, dst, offset, count) ->
                System.arraycopy(learnt.get(unit), Math.toIntExact(start), dst, offset, count);
        for (int batch : new int[] {1, 2}) {
            Evaluation.SquadResult sharded = onRanks(layout, SquadFixture.CONFIG, params,
                    m -> new ShardedEvaluation(m, batch).squad(text, questions, 12, p -> {}));
            assertThat(sharded).as("batches of %d", batch).isEqualTo(expected);
        }
    }

    @Test
    void generationSaysHowFarItHasComeAndAnswersAlike() {
        SingleDeviceModel whole = EvalModel.build(SquadFixture.CONFIG, CPU, learnt);
        List<SquadQuestion> questions = SquadFixture.questions();
        var text = new io.fsdp4j.data.TextTokenizer.HuggingFace(chars, "");
        Evaluation.SquadResult expected = Evaluation.squad(whole, text, questions, 12, p -> {});
        ParamSource params = (unit, start, dst, offset, count) ->
                System.arraycopy(learnt.get(unit), Math.toIntExact(start), dst, offset, count);
        List<String> lines = java.util.Collections.synchronizedList(new ArrayList<>());
        Evaluation.SquadResult reported = onRanks(LAYOUTS.get(0), SquadFixture.CONFIG, params,
                m -> new ShardedEvaluation(m, 1).reportProgressTo(lines::add, 0).squad(text, questions, 12, p -> {}));
        assertThat(reported).isEqualTo(expected);
        // a line after each batch but the last: 1, 2, ... of the questions
        assertThat(lines).hasSize(questions.size() - 1);
        assertThat(lines.getFirst()).matches("answered about 1 of " + questions.size() + " prompts \\(\\d+\\.\\d s\\)");
    }
}
