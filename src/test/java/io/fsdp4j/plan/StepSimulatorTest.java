package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.model.Architecture;
import io.fsdp4j.model.ModelConfig;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class StepSimulatorTest {
    private static final ModelShape TINY = ModelShape.of(ModelConfig.tiny()); // 4 blocks, units 0..5, tied head
    private static final ModelShape UNTIED = ModelShape.of(new ModelConfig(Architecture.LLAMA, 256, 128, 352, 4, 4,
            2, 32, 10000.0, 1e-5, false, false, 0, 1024));
    private static final Sharding FULL = Sharding.of(ShardingStrategy.FULL_SHARD, Cluster.of(GpuSpec.h200(), 1, 4, 0, 1e9));
    private static final Sharding ZERO2 = Sharding.of(ShardingStrategy.SHARD_GRAD_OP, Cluster.of(GpuSpec.h200(), 1, 4, 0, 1e9));

    private static double[] each(double v) {
        double[] a = new double[TINY.headUnit() + 1];
        Arrays.fill(a, v);
        return a;
    }

    /** Every stage the same; the head's backward is part of its one stage. */
    private static ComputeModel.StageTimes compute(double forward, double backward) {
        double[] b = each(backward);
        b[TINY.headUnit()] = 0;
        return new ComputeModel.StageTimes(each(forward), b, 0.01);
    }

    @Test
    void withoutCommunicationTheStepIsTheComputeTime() {
        var t = compute(1e-3, 2e-3);
        var none = new StepSimulator.CommTimes(each(0), each(0), each(0), 0);
        var step = StepSimulator.simulate(TINY, FULL, t, none, false);
        assertThat(step.stepSeconds()).isCloseTo(t.total(), within(1e-12));
        assertThat(step.exposedSeconds()).isCloseTo(0, within(1e-12));
    }

    @Test
    void prefetchedGathersAndLaterReductionsHideBehindComputeButTheFirstAndLastDoNot() {
        double ag = 0.1e-3, rs = 0.2e-3, small = 0.05e-3;
        var t = compute(1e-3, 2e-3); // every stage far longer than any collective
        var comm = new StepSimulator.CommTimes(each(ag), each(rs), each(0), small);
        var step = StepSimulator.simulate(UNTIED, FULL, t, comm, false);
        // exposed: the embeddings' gather before anything computes (issued first: the first block's, prefetched
        // after it, hides behind the embeddings' compute), the embeddings' reduction after the last backward, and
        // the step's scalar all-reduces
        assertThat(step.exposedSeconds()).isCloseTo(ag + rs + small, within(1e-12));
        // FULL_SHARD gathers every block twice but the last (kept from its forward to its backward), the embeddings
        // and the head once
        int blocks = UNTIED.blocks();
        assertThat(step.allGatherSeconds()).isCloseTo((2 * blocks - 1 + 2) * ag, within(1e-12));
        assertThat(step.reduceScatterSeconds()).isCloseTo((blocks + 2) * rs, within(1e-12));
    }

    @Test
    void aTiedHeadGathersTheEmbeddingsAgainWithoutPrefetch() {
        double ag = 0.1e-3, rs = 0.2e-3;
        var comm = new StepSimulator.CommTimes(each(ag), each(rs), each(0), 0);
        var step = StepSimulator.simulate(TINY, FULL, compute(1e-3, 2e-3), comm, false);
        // at the head the embeddings' gather (not prefetched) is exposed; the last block is still gathered
        assertThat(step.exposedSeconds()).isCloseTo(ag + ag + rs, within(1e-12));
        assertThat(step.allGatherSeconds()).isCloseTo((2 * TINY.blocks() - 1 + 3) * ag, within(1e-12));
    }

    @Test
    void shardGradOpGathersOnce() {
        double ag = 0.1e-3;
        var comm = new StepSimulator.CommTimes(each(ag), each(0), each(0), 0);
        var step = StepSimulator.simulate(TINY, ZERO2, compute(1e-3, 2e-3), comm, false);
        assertThat(step.allGatherSeconds()).isCloseTo((TINY.blocks() + 2) * ag, within(1e-12));
    }

    @Test
    void whenCommunicationDominatesTheStepIsTheCommunicationStream() {
        double ag = 10e-3, rs = 20e-3;
        var t = compute(1e-6, 1e-6);
        var comm = new StepSimulator.CommTimes(each(ag), each(rs), each(0), 0);
        var step = StepSimulator.simulate(TINY, FULL, t, comm, false);
        double stream = step.allGatherSeconds() + step.reduceScatterSeconds();
        assertThat(step.stepSeconds()).isBetween(stream, stream + t.total());
    }

    @Test
    void aReplicaStreamOfItsOwnNeverSlowsTheStep() {
        var t = compute(1e-3, 2e-3);
        var comm = new StepSimulator.CommTimes(each(0.5e-3), each(1e-3), each(3e-3), 0);
        double shared = StepSimulator.simulate(TINY, FULL, t, comm, false).stepSeconds();
        double own = StepSimulator.simulate(TINY, FULL, t, comm, true).stepSeconds();
        assertThat(own).isLessThan(shared);
    }

    /**
     * fsdp.prefetch: with none every gather waits in front of its compute (10 on TINY: the embeddings, four blocks,
     * the head and the embeddings again at the tied head, three blocks in backward); with 1 only the first and the
     * tied head's embeddings; more cannot hide what 1 already hides. A long gather (the head's) needs depth: at 2 it
     * starts two blocks early.
     */
    @Test
    void thePrefetchDepthDecidesWhichGathersWait() {
        double ag = 0.1e-3;
        var t = compute(1e-3, 2e-3);
        var comm = new StepSimulator.CommTimes(each(ag), each(0), each(0), 0);
        assertThat(StepSimulator.simulate(TINY, FULL, t, comm, false, 0).exposedSeconds()).isCloseTo(10 * ag, within(1e-12));
        assertThat(StepSimulator.simulate(TINY, FULL, t, comm, false, 1).exposedSeconds()).isCloseTo(2 * ag, within(1e-12));
        assertThat(StepSimulator.simulate(TINY, FULL, t, comm, false, 3).exposedSeconds()).isCloseTo(2 * ag, within(1e-12));
        double[] slowHead = each(ag);
        slowHead[TINY.headUnit()] = 1.5e-3; // longer than one block's forward (1 ms), shorter than two
        var withSlowHead = new StepSimulator.CommTimes(slowHead, each(0), each(0), 0);
        double one = StepSimulator.simulate(TINY, FULL, t, withSlowHead, false, 1).exposedSeconds();
        double two = StepSimulator.simulate(TINY, FULL, t, withSlowHead, false, 2).exposedSeconds();
        assertThat(one).isCloseTo(2 * ag + 0.5e-3, within(1e-12)); // the head's gather behind the last block only
        assertThat(two).isCloseTo(2 * ag, within(1e-12));
    }
}
