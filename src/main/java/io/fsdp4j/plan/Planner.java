package io.fsdp4j.plan;

import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.ParamCopy;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.model.Flops;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntPredicate;

/**
 * Predicts memory and step time of every strategy for a model on a cluster, and recommends the fastest
 * configuration that fits.
 */
public final class Planner {
    private Planner() {}

    /** One strategy with one checkpointing mode on the cluster. */
    public record Prediction(ShardingStrategy strategy, ActivationCheckpointing checkpointing, Sharding sharding,
                             MemoryModel.Estimate memory, StepSimulator.StepTime time, double tokensPerSecond,
                             double tokensPerSecondPerGpu, double mfu, boolean fits) {
        public String label() {
            return strategy.spelling() + " (checkpointing " + checkpointing.spelling() + ")";
        }
    }

    /**
     * What the predictions assume beyond the inputs.
     *
     * @param calibration the compute model's constants
     * @param replicaStream what-if: the replicas' all-reduce on a communication stream of its own
     * @param computeScale every compute stage's time multiplied by it: 1, or a measured step over the modelled one
     *     ({@code plan --bench}, {@link MeasuredStep})
     */
    public record Options(ComputeModel.Calibration calibration, boolean replicaStream, double computeScale) {
        public Options {
            if (!(computeScale > 0)) {
                throw new IllegalArgumentException("compute scale " + computeScale);
            }
        }

        public Options(ComputeModel.Calibration calibration, boolean replicaStream) {
            this(calibration, replicaStream, 1);
        }

        public static Options defaults() {
            return new Options(ComputeModel.Calibration.h200(), false);
        }
    }

    /**
     * Every prediction, the recommendation (null when nothing fits) with its reason in one line, what
     * {@code fsdp.param_copy: kept} and {@code fsdp.blocks_not_checkpointed} would do to it (each null unless
     * {@link #paramCopyAdvice}, {@link #checkpointingAdvice} advise it), and what {@code train} runs on
     * {@code trainStrategy} with {@code fsdp.activation_checkpointing} and {@code fsdp.param_copy} both {@code auto}
     * (a fine-tune's defaults on GPUs: {@link #chooseMemoryUse}).
     */
    public record Plan(ModelShape model, Cluster cluster, Workload workload, Options options,
                       List<Prediction> predictions, Prediction recommended, String reason, Longest longest,
                       ParamCopyAdvice paramCopyAdvice, CheckpointingAdvice checkpointingAdvice,
                       ShardingStrategy trainStrategy, Split auto) {
        public Plan {
            predictions = List.copyOf(predictions);
        }
    }

    /**
     * The recommended configuration as planned ({@code fsdp.param_copy: per_gather}) and with the kept copy: the
     * same strategy, checkpointing mode and workload, {@code kept} alone changed.
     */
    public record ParamCopyAdvice(Prediction perGather, Prediction kept) {
        /** The kept copy's tokens/s over per_gather's, less 1. */
        public double gain() {
            return kept.tokensPerSecond() / perGather.tokensPerSecond() - 1;
        }
    }

    /**
     * The recommended configuration as planned (every block checkpointed) and the fastest {@link Split} of it that
     * still fits: some of its last blocks left out of checkpointing ({@code fsdp.blocks_not_checkpointed}) and, where
     * it recomputes whole blocks, some before them checkpointed selectively ({@code fsdp.blocks_selective}).
     */
    public record CheckpointingAdvice(Prediction checkpointed, Split split) {
        /** The advised split's step, as predicted. */
        public Prediction partly() {
            return split.prediction();
        }

        /** The train keys that give the advised split. */
        public String keys() {
            int blocks = split.blocksNotCheckpointed(), selective = split.blocksSelective();
            return (blocks > 0 ? "--set fsdp.blocks_not_checkpointed=" + blocks : "")
                    + (blocks > 0 && selective > 0 ? " " : "")
                    + (selective > 0 ? "--set fsdp.blocks_selective=" + selective : "");
        }

        /** The partly checkpointed step's tokens/s over the fully checkpointed one's, less 1. */
        public double gain() {
            return partly().tokensPerSecond() / checkpointed.tokensPerSecond() - 1;
        }
    }

    /** The share of a GPU's usable memory that {@link #checkpointingAdvice} leaves free: 1% (1.4 GiB of an H200's). */
    static final double ADVICE_SPARE = 0.01;

    /**
     * What {@link #chooseCheckpointing} and {@link #chooseMemoryUse} leave free where the state is offloaded
     * ({@code fsdp.cpu_offload}): 15%, as the one offloaded step measured (Qwen2.5-7B's first 20 blocks on an H100)
     * peaked 12.2% over the prediction (docs/benchmarks.md, eleventh session).
     */
    static final double OFFLOAD_SPARE = 0.15;

    /**
     * The least spare in bytes, whatever the share: 1 GiB (1% of an H100's usable memory is 0.78 GiB, and measured
     * peaks with blocks left out came out up to 0.5 GiB over the prediction).
     */
    static final long LEAST_SPARE = 1L << 30;

    /**
     * The bytes a choice for {@code w} may plan on: the usable memory less the spare its kind of workload needs
     * ({@link #ADVICE_SPARE}, {@link #OFFLOAD_SPARE} offloaded), and less {@link #LEAST_SPARE} at the least.
     */
    public static double sparedBytes(Cluster cluster, Workload w) {
        long usable = cluster.gpu().usableBytes();
        return usable - Math.max(LEAST_SPARE, (w.cpuOffload() ? OFFLOAD_SPARE : ADVICE_SPARE) * usable);
    }

    /** Within this factor of the fastest a prediction is as fast (0.5%: {@link #recommend}, {@link #paramCopyAdvice}). */
    static final double AS_FAST = 1.005;

    /**
     * The longest sequence (a multiple of {@link #SEQ_STEP} tokens, at most the model's positions) whose step fits one
     * GPU under a strategy and checkpointing mode, at the plan's batch and dtypes; 0 when not even {@link #SEQ_STEP}
     * fits. {@code reserved} is the predicted peak at that length; {@code modelLimit}: the model's positions, not the
     * memory, set it.
     */
    public record Longest(ShardingStrategy strategy, ActivationCheckpointing checkpointing, int seq, long reserved,
                          boolean modelLimit) {}

    /** The granularity of {@link #longestSequence}. */
    static final int SEQ_STEP = 1024;

    /**
     * The longest sequence that fits (memory grows with the sequence: the search halves the range between what fits
     * and what does not).
     */
    public static Longest longestSequence(ModelShape m, Cluster cluster, Workload w, ShardingStrategy strategy,
                                          Options options) {
        Sharding s = Sharding.of(strategy, cluster);
        long usable = cluster.gpu().usableBytes();
        int most = Math.max(1, m.config().maxPositions() / SEQ_STEP);
        int low = mostThatFit(most, n -> MemoryModel.estimate(m, w.withSeq(n * SEQ_STEP), s).reserved() <= usable);
        long reserved = low == 0 ? 0 : MemoryModel.estimate(m, w.withSeq(low * SEQ_STEP), s).reserved();
        return new Longest(strategy, w.checkpointing(), low * SEQ_STEP, reserved, low == most);
    }

    /**
     * The largest n of 1 to {@code most} for which {@code fits} holds, or 0 for none, by halving: {@code fits} is taken
     * to hold up to some n and not beyond (memory that grows with n).
     */
    static int mostThatFit(int most, IntPredicate fits) {
        int low = 0, high = most + 1; // low fits (0: nothing), high does not
        while (high - low > 1) {
            int mid = (low + high) >>> 1;
            if (fits.test(mid)) {
                low = mid;
            } else {
                high = mid;
            }
        }
        return low;
    }

    public static Prediction predict(ModelShape m, Cluster cluster, Workload w, ShardingStrategy strategy,
                                     Options options) {
        Sharding s = Sharding.of(strategy, cluster);
        MemoryModel.Estimate memory = MemoryModel.estimate(m, w, s);
        var stages = ComputeModel.stageTimes(m, w, s, cluster.gpu(), options.calibration()).scaled(options.computeScale());
        var comm = StepSimulator.CommTimes.of(m, w, s, cluster);
        StepSimulator.StepTime time = StepSimulator.simulate(m, s, stages, comm, options.replicaStream(),
                w.prefetch());
        double perGpu = w.tokens() / time.stepSeconds();
        // attention within each packed document, as a run's report counts it
        double mfu = Flops.perToken(m.config(), m.parameters(), w.attentionSpan()) * perGpu
                / cluster.gpu().peakFlops();
        return new Prediction(strategy, w.checkpointing(), s, memory, time, perGpu * cluster.world(), perGpu, mfu,
                memory.reserved() <= cluster.gpu().usableBytes());
    }

    /** Every strategy under each of {@code modes}, in the order strategy then mode; auto's choice on full_shard. */
    public static Plan plan(ModelShape m, Cluster cluster, Workload w, List<ActivationCheckpointing> modes,
                            Options options) {
        return plan(m, cluster, w, modes, options, ShardingStrategy.FULL_SHARD);
    }

    /** As {@link #plan(ModelShape, Cluster, Workload, List, Options)}, auto's choice on {@code trainStrategy}. */
    public static Plan plan(ModelShape m, Cluster cluster, Workload w, List<ActivationCheckpointing> modes,
                            Options options, ShardingStrategy trainStrategy) {
        List<Prediction> predictions = new ArrayList<>();
        for (ShardingStrategy strategy : ShardingStrategy.values()) {
            for (ActivationCheckpointing mode : modes) {
                predictions.add(predict(m, cluster, w.withCheckpointing(mode), strategy, options));
            }
        }
        Prediction best = recommend(predictions);
        // the longest sequence: for what is recommended, else for what holds the least (full_shard under the
        // checkpointing mode that keeps the least)
        Prediction basis = best != null ? best : predictions.stream()
                .min(Comparator.comparingLong(p -> p.memory().reserved())).orElseThrow();
        Longest longest = longestSequence(m, cluster, w.withCheckpointing(basis.checkpointing()), basis.strategy(),
                options);
        return new Plan(m, cluster, w, options, predictions, best, reason(best, predictions, cluster), longest,
                paramCopyAdvice(m, cluster, w, best, options), checkpointingAdvice(m, cluster, w, best, options),
                trainStrategy, chooseMemoryUse(m, cluster, w, trainStrategy, options, true, true));
    }

    /**
     * {@code fsdp.blocks_not_checkpointed} and {@code fsdp.blocks_selective} for the recommended configuration, where it
     * checkpoints blocks and the workload leaves none out: of the splits that still fit with {@link #ADVICE_SPARE} of
     * the usable memory to spare (1 GiB at the least; {@link #OFFLOAD_SPARE} offloaded: {@link #sparedBytes}), for
     * each count of the last blocks left out (fewer than all: all is {@code none},
     * which the plan weighed already) the most blocks before them checkpointed selectively (where the mode recomputes
     * whole blocks), the fastest, if that is faster by more than 0.5% ({@link #AS_FAST}); else null. The spare: the
     * peaks measured with blocks left out came out up to 0.5 GiB over the prediction (Qwen2.5-7B, one H200,
     * docs/benchmarks.md), and advice that runs out of memory at the first step is worse than none.
     */
    static CheckpointingAdvice checkpointingAdvice(ModelShape m, Cluster cluster, Workload w, Prediction best,
                                                   Options options) {
        if (best == null || best.checkpointing() == ActivationCheckpointing.NONE || w.blocksNotCheckpointed() > 0
                || w.blocksSelective() > 0 || m.blocks() < 2) {
            return null;
        }
        Workload base = w.withCheckpointing(best.checkpointing());
        Split fastest = fastestSplit(m, cluster, base, best.strategy(), options, sparedBytes(cluster, base));
        return fastest != null && fastest.prediction().tokensPerSecond() > best.tokensPerSecond() * AS_FAST
                ? new CheckpointingAdvice(best, fastest)
                : null;
    }

    /**
     * A checkpointing mode with its last {@code blocksNotCheckpointed} blocks left out and the
     * {@code blocksSelective} before them checkpointed selectively, with the parameters' copy {@code paramCopy}, as
     * predicted.
     */
    public record Split(Prediction prediction, int blocksNotCheckpointed, int blocksSelective, ParamCopy paramCopy) {
        public ActivationCheckpointing mode() {
            return prediction.checkpointing();
        }

        /**
         * The blocks left out of checkpointing and those checkpointed selectively, in words ("the last 2 blocks not
         * checkpointed and the 7 before them checkpointed selectively"); empty where there are neither. What
         * {@code plan} and a run's {@code fsdp4j: auto:} line both say of a split.
         */
        public String blocksInWords() {
            int n = blocksNotCheckpointed, k = blocksSelective;
            if (n == 0) {
                return k == 0 ? "" : "the last " + blocks(k) + " checkpointed selectively";
            }
            return "the last " + blocks(n) + " not checkpointed" + (k == 0 ? "" : " and the " + (k == 1 ? "one" : k)
                    + " before " + (n == 1 ? "it" : "them") + " checkpointed selectively");
        }

        private static String blocks(int count) {
            return count == 1 ? "block" : count + " blocks";
        }
    }

    /**
     * Of the splits of {@code base}'s checkpointing mode (which must checkpoint blocks) whose predicted peak is at
     * most {@code spared} bytes: for each count of the last blocks left out (fewer than all), the most blocks before
     * them checkpointed selectively (where the mode recomputes whole blocks), the fastest; null where none of them
     * leaves a block out or selective. Only the memory of each candidate is needed to tell whether it fits.
     */
    static Split fastestSplit(ModelShape m, Cluster cluster, Workload base, ShardingStrategy strategy,
                              Options options, double spared) {
        Sharding s = Sharding.of(strategy, cluster);
        int most = mostThatFit(m.blocks() - 1,
                n -> MemoryModel.estimate(m, base.withBlocksNotCheckpointed(n), s).reserved() <= spared);
        boolean selectively = base.checkpointing().recomputesBlocks();
        Split fastest = null;
        for (int n = 0; n <= most; n++) {
            Workload left = base.withBlocksNotCheckpointed(n);
            int selective = !selectively ? 0 : mostThatFit(m.blocks() - 1 - n,
                    k -> MemoryModel.estimate(m, left.withBlocksSelective(k), s).reserved() <= spared);
            if (n + selective == 0) {
                continue;
            }
            Prediction partly = predict(m, cluster, left.withBlocksSelective(selective), strategy, options);
            if (fastest == null || partly.tokensPerSecond() > fastest.prediction().tokensPerSecond()) {
                fastest = new Split(partly, n, selective, base.paramCopy());
            }
        }
        return fastest;
    }

    /**
     * What {@code fsdp.activation_checkpointing: auto} runs: of every mode under {@code strategy}, each as it is and
     * (for those that checkpoint blocks and models of two or more) with its {@link #fastestSplit}, the fastest whose
     * predicted peak leaves {@link #ADVICE_SPARE} of the usable memory free, as {@code plan}'s advice does
     * ({@link #OFFLOAD_SPARE} where the state is offloaded: {@link #sparedBytes}); of
     * predictions within 0.5% ({@link #AS_FAST}) of each other the first in the order none, selective,
     * full_keep_attention, full, each before its splits. Where nothing fits, full with no block left out: the least
     * memory, and the run's own out-of-memory message if that does not fit either. {@code w}'s mode and block
     * counts are ignored.
     */
    public static Split chooseCheckpointing(ModelShape m, Cluster cluster, Workload w, ShardingStrategy strategy,
                                            Options options) {
        double spared = sparedBytes(cluster, w);
        Workload plain = w.withBlocksNotCheckpointed(0).withBlocksSelective(0);
        Split best = null;
        for (ActivationCheckpointing mode : List.of(ActivationCheckpointing.NONE, ActivationCheckpointing.SELECTIVE,
                ActivationCheckpointing.FULL_KEEP_ATTENTION, ActivationCheckpointing.FULL)) {
            Workload base = plain.withCheckpointing(mode);
            List<Split> candidates = new ArrayList<>();
            Prediction whole = predict(m, cluster, base, strategy, options);
            if (whole.memory().reserved() <= spared) {
                candidates.add(new Split(whole, 0, 0, w.paramCopy()));
            }
            if (mode != ActivationCheckpointing.NONE && m.blocks() >= 2) {
                Split split = fastestSplit(m, cluster, base, strategy, options, spared);
                if (split != null) {
                    candidates.add(split);
                }
            }
            for (Split c : candidates) {
                if (best == null || c.prediction().tokensPerSecond() > best.prediction().tokensPerSecond() * AS_FAST) {
                    best = c;
                }
            }
        }
        return best != null ? best
                : new Split(predict(m, cluster, plain.withCheckpointing(ActivationCheckpointing.FULL), strategy,
                        options), 0, 0, w.paramCopy());
    }

    /**
     * What {@code fsdp.activation_checkpointing: auto} and {@code fsdp.param_copy: auto} run, each where asked
     * ({@code chooseCheckpointing}, {@code chooseParamCopy}), else {@code w}'s own setting: for each parameter copy
     * considered (per_gather, and kept where it would hold a copy: {@link Workload#keptCopy}), the checkpointing
     * {@link #chooseCheckpointing} picks or {@code w}'s; of those whose predicted peak leaves the spare of
     * {@link #sparedBytes} free, the fastest (per_gather unless kept is faster by more than 0.5%, {@link #AS_FAST});
     * where none does, per_gather's.
     */
    public static Split chooseMemoryUse(ModelShape m, Cluster cluster, Workload w, ShardingStrategy strategy,
                                        Options options, boolean chooseCheckpointing, boolean chooseParamCopy) {
        double spared = sparedBytes(cluster, w);
        List<ParamCopy> copies = !chooseParamCopy ? List.of(w.paramCopy())
                : w.withParamCopy(ParamCopy.KEPT).keptCopy() ? List.of(ParamCopy.PER_GATHER, ParamCopy.KEPT)
                : List.of(ParamCopy.PER_GATHER);
        Split best = null, first = null;
        for (ParamCopy copy : copies) {
            Workload wc = w.withParamCopy(copy);
            Split s = chooseCheckpointing ? chooseCheckpointing(m, cluster, wc, strategy, options)
                    : new Split(predict(m, cluster, wc, strategy, options), wc.blocksNotCheckpointed(),
                            wc.blocksSelective(), copy);
            first = first == null ? s : first;
            if (s.prediction().memory().reserved() <= spared && (best == null
                    || s.prediction().tokensPerSecond() > best.prediction().tokensPerSecond() * AS_FAST)) {
                best = s;
            }
        }
        return best != null ? best : first;
    }

    /**
     * {@code fsdp.param_copy: kept} for the recommended configuration, where the workload has the default per_gather,
     * kept would hold a copy (half-precision parameters, not offloaded: {@link Workload#keptCopy}; LoRA's adapters
     * too), the copy still fits ({@link Prediction#fits}, the rule of every prediction) and the step is faster by more
     * than 0.5% ({@link #AS_FAST}); else null (also when nothing is recommended).
     */
    static ParamCopyAdvice paramCopyAdvice(ModelShape m, Cluster cluster, Workload w, Prediction best,
                                           Options options) {
        Workload kept = w.withParamCopy(ParamCopy.KEPT);
        if (best == null || w.paramCopy() != ParamCopy.PER_GATHER || !kept.keptCopy()) {
            return null;
        }
        Prediction k = predict(m, cluster, kept.withCheckpointing(best.checkpointing()), best.strategy(), options);
        return k.fits() && k.tokensPerSecond() > best.tokensPerSecond() * AS_FAST ? new ParamCopyAdvice(best, k) : null;
    }

    /**
     * The fastest prediction that fits; within 0.5% of it, the first in order (full_shard before the hybrids, whose
     * single-node form is the same thing).
     */
    static Prediction recommend(List<Prediction> predictions) {
        Prediction best = null;
        for (Prediction p : predictions) {
            if (p.fits() && (best == null || p.tokensPerSecond() > best.tokensPerSecond() * AS_FAST)) {
                best = p;
            }
        }
        return best;
    }

    static String reason(Prediction best, List<Prediction> predictions, Cluster cluster) {
        double usable = gib(cluster.gpu().usableBytes());
        if (best == null) {
            Prediction smallest = predictions.stream()
                    .min(Comparator.comparingLong(p -> p.memory().reserved())).orElseThrow();
            return "nothing fits: the smallest, %s, needs %.1f GiB per GPU of %.1f; add GPUs, use full checkpointing or shorten the sequences"
                    .formatted(smallest.label(), gib(smallest.memory().reserved()), usable);
        }
        String text = "%s: the fastest that fits, %,.0f tokens/s per GPU with %.1f of %.1f GiB"
                .formatted(best.label(), best.tokensPerSecondPerGpu(), gib(best.memory().reserved()), usable);
        Prediction next = null, fasterUnfit = null; // other strategies: the best that fits, the best that does not
        for (Prediction p : predictions) {
            if (p.strategy() == best.strategy() || sameAs(p, best, cluster)) {
                continue;
            }
            if (p.fits() && (next == null || p.tokensPerSecond() > next.tokensPerSecond())) {
                next = p;
            }
            if (!p.fits() && p.tokensPerSecond() > best.tokensPerSecond()
                    && (fasterUnfit == null || p.tokensPerSecond() > fasterUnfit.tokensPerSecond())) {
                fasterUnfit = p;
            }
        }
        if (next != null) {
            double slower = 1 - next.tokensPerSecond() / best.tokensPerSecond();
            text += slower < 0.005 ? "; %s is as fast".formatted(next.label())
                    : "; next %s at %,.0f (%.0f%% slower, %.0f ms a step waiting on communication)".formatted(
                            next.label(), next.tokensPerSecondPerGpu(), 100 * slower,
                            1e3 * next.time().exposedSeconds());
        }
        if (fasterUnfit != null) {
            text += "; %s would be faster but needs %.1f GiB".formatted(fasterUnfit.label(),
                    gib(fasterUnfit.memory().reserved()));
        }
        return text;
    }

    /** On one node a hybrid strategy is its non-hybrid form (one replica). */
    private static boolean sameAs(Prediction a, Prediction b, Cluster cluster) {
        return cluster.nodes() == 1 && a.sharding().shard().equals(b.sharding().shard())
                && a.strategy().reshardAfterForward() == b.strategy().reshardAfterForward();
    }

    /** Predicted tokens/s (all GPUs) per strategy at each GPU count, NaN where it does not fit. */
    public static Map<Integer, Map<ShardingStrategy, Double>> scaling(ModelShape m, Cluster cluster, Workload w,
                                                                      List<Integer> gpuCounts, Options options) {
        Map<Integer, Map<ShardingStrategy, Double>> table = new LinkedHashMap<>();
        for (int gpus : gpuCounts) {
            Cluster c = cluster.withGpus(gpus);
            Map<ShardingStrategy, Double> row = new LinkedHashMap<>();
            for (ShardingStrategy strategy : ShardingStrategy.values()) {
                Prediction p = predict(m, c, w, strategy, options);
                row.put(strategy, p.fits() ? p.tokensPerSecond() : Double.NaN);
            }
            table.put(gpus, row);
        }
        return table;
    }

    static double gib(long bytes) {
        return bytes / (double) (1L << 30);
    }
}
