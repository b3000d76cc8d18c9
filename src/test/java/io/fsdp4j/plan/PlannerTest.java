package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.model.ModelConfig;
import java.util.List;
import org.junit.jupiter.api.Test;

class PlannerTest {
    private static final double GIB = 1L << 30;
    private static final ModelShape QWEN_7B = ModelShape.of(ModelConfig.qwen25_7b());
    private static final ModelShape QWEN_1_5B = ModelShape.of(ModelConfig.qwen25_1_5b());
    private static final Planner.Options OPTIONS = Planner.Options.defaults();
    private static final List<ActivationCheckpointing> BOTH =
            List.of(ActivationCheckpointing.FULL, ActivationCheckpointing.NONE);

    private static Planner.Prediction onOneNode(ModelShape m, int gpus) {
        return Planner.predict(m, Cluster.of(GpuSpec.h200(), 1, gpus, 0, 50e9), Workload.benchmark(),
                ShardingStrategy.FULL_SHARD, OPTIONS);
    }

    @Test
    void theCalibrationReproducesTheOneGpuReferenceSteps() {
        var cal = ComputeModel.Calibration.h200();
        assertThat(cal.slowdown()).isBetween(1.0, 2.0);
        assertThat(cal.perBlockSeconds()).isBetween(0.5e-3, 3e-3);
        // Qwen2.5-1.5B on one H200: 14,352 tokens/s, MFU 14.2% (docs/benchmarks.md)
        var p = onOneNode(QWEN_1_5B, 1);
        assertThat(p.tokensPerSecond()).isCloseTo(14_352, within(1.0));
        assertThat(p.mfu()).isCloseTo(0.142, within(0.001));
        assertThat(p.time().exposedSeconds()).isCloseTo(0, within(1e-12)); // one rank: nothing to communicate
        assertThat(onOneNode(ModelShape.of(ModelConfig.qwen25_0_5b()), 1).time().stepSeconds())
                .isCloseTo(0.0711017, within(1e-6));
    }

    /** fsdp4j's bench on H200 (docs/benchmarks.md, after communication overlap): tokens/s and peak reserved GiB. */
    @Test
    void predictionsAreWithinTwentyPercentOfMeasuredThroughputAndTenOfMemory() {
        record Measured(ModelShape model, int gpus, double tokensPerSecond, double peakGib) {}
        for (Measured m : List.of(new Measured(QWEN_1_5B, 4, 62_782, 9.49), new Measured(QWEN_7B, 2, 10_193, 66.16),
                new Measured(QWEN_7B, 4, 22_019, 37.64), new Measured(QWEN_7B, 1, 4_519, 126.26))) {
            var p = onOneNode(m.model(), m.gpus());
            assertThat(p.tokensPerSecond()).as("%d GPUs tokens/s", m.gpus())
                    .isCloseTo(m.tokensPerSecond(), within(0.2 * m.tokensPerSecond()));
            assertThat(p.memory().reserved() / GIB).as("%d GPUs GiB", m.gpus())
                    .isCloseTo(m.peakGib(), within(0.1 * m.peakGib()));
            assertThat(p.fits()).isTrue();
        }
    }

    @Test
    void aModelThatDoesNotFitUnshardedIsNeverRecommendedNoShard() {
        // 7B with fp32 master weights, gradients and moments is 16 x 7.6e9 bytes: more than an H100 holds
        for (int nodes : new int[] {1, 2, 8}) {
            Cluster cluster = Cluster.of(GpuSpec.h100(), nodes, 8, 0, 3200e9 / 8);
            var plan = Planner.plan(QWEN_7B, cluster, Workload.benchmark(), BOTH, OPTIONS);
            assertThat(plan.predictions()).filteredOn(p -> p.strategy() == ShardingStrategy.NO_SHARD)
                    .allSatisfy(p -> assertThat(p.fits()).isFalse());
            assertThat(plan.recommended()).isNotNull();
            assertThat(plan.recommended().strategy()).isNotEqualTo(ShardingStrategy.NO_SHARD);
            assertThat(plan.recommended().fits()).isTrue();
        }
    }

    @Test
    void theRecommendationIsTheFastestThatFits() {
        var plan = Planner.plan(QWEN_7B, Cluster.of(GpuSpec.h200(), 2, 8, 0, 50e9), Workload.benchmark(), BOTH, OPTIONS);
        double fastest = plan.predictions().stream().filter(Planner.Prediction::fits)
                .mapToDouble(Planner.Prediction::tokensPerSecond).max().orElseThrow();
        assertThat(plan.recommended().tokensPerSecond()).isGreaterThanOrEqualTo(fastest / 1.005);
        assertThat(plan.reason()).startsWith(plan.recommended().label() + ": the fastest that fits")
                .doesNotContain("\n");
    }

    /** Selective recomputes no matrix product: within 3% of none's speed, faster than full's on one H200. */
    @Test
    void selectiveIsNearlyAsFastAsNoneAndFasterThanFull() {
        Cluster one = Cluster.of(GpuSpec.h200(), 1, 1, 0, 50e9);
        java.util.Map<ActivationCheckpointing, Double> tokS = new java.util.EnumMap<>(ActivationCheckpointing.class);
        for (ActivationCheckpointing mode : ActivationCheckpointing.values()) {
            tokS.put(mode, Planner.predict(QWEN_7B, one, Workload.benchmark().withCheckpointing(mode),
                    ShardingStrategy.FULL_SHARD, OPTIONS).tokensPerSecond());
        }
        assertThat(tokS.get(ActivationCheckpointing.SELECTIVE)).isLessThan(tokS.get(ActivationCheckpointing.NONE))
                .isGreaterThan(tokS.get(ActivationCheckpointing.NONE) * 0.97)
                .isGreaterThan(tokS.get(ActivationCheckpointing.FULL) * 1.1);
    }

    @Test
    void withSlowLinksBetweenNodesHybridShardingWins() {
        // two nodes of 8 joined by 26.4 Gb/s (3.3 GB/s, the loopback sockets measured between emulated hosts)
        Cluster slow = Cluster.of(GpuSpec.h200(), 2, 8, 0, 26.4e9 / 8);
        for (ModelShape m : List.of(QWEN_1_5B, QWEN_7B)) {
            var plan = Planner.plan(m, slow, Workload.benchmark(), BOTH, OPTIONS);
            assertThat(plan.recommended().strategy().hybrid()).as(plan.reason()).isTrue();
            double hybrid = Planner.predict(m, slow, Workload.benchmark(), ShardingStrategy.HYBRID_SHARD, OPTIONS)
                    .tokensPerSecond();
            double full = Planner.predict(m, slow, Workload.benchmark(), ShardingStrategy.FULL_SHARD, OPTIONS)
                    .tokensPerSecond();
            assertThat(hybrid).isGreaterThan(1.3 * full);
        }
    }

    @Test
    void onOneNodeHybridShardingIsFullSharding() {
        Cluster node = Cluster.of(GpuSpec.h200(), 1, 8, 0, 50e9);
        var hybrid = Planner.predict(QWEN_7B, node, Workload.benchmark(), ShardingStrategy.HYBRID_SHARD, OPTIONS);
        var full = Planner.predict(QWEN_7B, node, Workload.benchmark(), ShardingStrategy.FULL_SHARD, OPTIONS);
        assertThat(hybrid.tokensPerSecond()).isEqualTo(full.tokensPerSecond());
        assertThat(hybrid.memory().reserved()).isEqualTo(full.memory().reserved());
        var plan = Planner.plan(QWEN_7B, node, Workload.benchmark(), List.of(ActivationCheckpointing.FULL), OPTIONS);
        assertThat(plan.recommended().strategy()).isIn(ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP);
    }

    @Test
    void whenNothingFitsThereIsNoRecommendation() {
        Cluster one = Cluster.of(GpuSpec.h100(), 1, 1, 0, 50e9);
        var plan = Planner.plan(QWEN_7B, one, Workload.benchmark(), BOTH, OPTIONS);
        assertThat(plan.recommended()).isNull();
        assertThat(plan.reason()).startsWith("nothing fits");
    }

    @Test
    void theScalingTableFillsNodesBeforeAddingThem() {
        Cluster cluster = Cluster.of(GpuSpec.h200(), 1, 8, 0, 50e9);
        assertThat(cluster.withGpus(4)).extracting(Cluster::nodes, Cluster::gpusPerNode).containsExactly(1, 4);
        assertThat(cluster.withGpus(64)).extracting(Cluster::nodes, Cluster::gpusPerNode).containsExactly(8, 8);
        var table = Planner.scaling(QWEN_7B, cluster, Workload.benchmark(), List.of(1, 8, 64), OPTIONS);
        assertThat(table).containsOnlyKeys(1, 8, 64);
        assertThat(table.get(1).get(ShardingStrategy.NO_SHARD)).isNaN(); // 7B unsharded does not fit
        assertThat(table.get(8).get(ShardingStrategy.FULL_SHARD)).isGreaterThan(table.get(1).get(ShardingStrategy.FULL_SHARD));
    }
}
