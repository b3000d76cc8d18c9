package io.fsdp4j.plan;

import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.model.ModelConfig;
import java.util.List;

/**
 * How long each stage of a step computes on one GPU. Each stage's work is counted at the GPU's ceilings, matrix
 * products at {@link GpuSpec#gemmFlops} and memory traffic at {@link GpuSpec#hbmBytesPerSecond}; the result is then
 * scaled by a calibrated slowdown, and every block pays a fixed time per step (kernel launches and the host's work
 * between them, which small models cannot hide):
 *
 * <pre>
 *   stage time = slowdown * (FLOPs / gemmFlops + bytes / hbmBytesPerSecond) + its share of perBlockSeconds
 * </pre>
 *
 * FLOPs: 2 per matrix parameter per token forward, 4 backward (6N per token, less the embedding lookup, which is
 * free), another 2 under full checkpointing (the recomputed forward), none under selective (its recomputed norms
 * and MLP activation are memory traffic only); causal attention 4 * NH * HS * (keys per
 * query) per token forward, 2.5 times that backward (flash attention's backward recomputes the scores).
 * Bytes: the activations each stage writes and reads (every allocation is zeroed), rounding shards to bf16 and
 * zeroing the gathered buffer for each all-gather, zeroing the fp32 gradient accumulator and adding each matrix
 * gradient into it (fp32 read and write), adding the reduced shard; after backward, zeroing, norm, clipping and
 * AdamW over this rank's shards (44 bytes per shard element).
 */
public final class ComputeModel {
    private ComputeModel() {}

    /**
     * The two constants fitted to measured steps: stage times are {@code slowdown} times their time at the
     * ceilings, plus {@code perBlockSeconds} per block per step (a quarter in forward, the rest in backward).
     */
    public record Calibration(double slowdown, double perBlockSeconds) {

        /**
         * The fit to fsdp4j's 1-GPU steps on an H200 (FULL_SHARD on one rank, seq 2048, batch 1, full
         * checkpointing, bf16 parameters, fp32 reduction): Qwen2.5-1.5B at 14,352 tokens/s (0.1427 s a step,
         * docs/benchmarks.md) and Qwen2.5-0.5B at 0.0711 s a step (measured for docs/plan.md). Two models fix the
         * two constants: the small one is dominated by the fixed cost per block, the larger by the work.
         */
        public static Calibration h200() {
            return fit(List.of(REFERENCE_0_5B, REFERENCE_1_5B));
        }

        /** Solves slowdown * ideal + perBlock * L = measured for two reference steps. */
        public static Calibration fit(List<Reference> refs) {
            if (refs.size() != 2) {
                throw new IllegalArgumentException("two reference steps fix the two constants");
            }
            double[] ideal = new double[2], blocks = new double[2], step = new double[2];
            for (int i = 0; i < 2; i++) {
                Reference r = refs.get(i);
                ideal[i] = idealStepSeconds(r.model(), r.workload(), GpuSpec.h200());
                blocks[i] = r.model().blocks();
                step[i] = r.stepSeconds();
            }
            double det = ideal[0] * blocks[1] - ideal[1] * blocks[0];
            double slowdown = (step[0] * blocks[1] - step[1] * blocks[0]) / det;
            double perBlock = (ideal[0] * step[1] - ideal[1] * step[0]) / det;
            return new Calibration(slowdown, perBlock);
        }
    }

    /** A measured step of one model on one H200. */
    public record Reference(ModelShape model, Workload workload, double stepSeconds) {}

    public static final Reference REFERENCE_1_5B = new Reference(
            ModelShape.of(ModelConfig.qwen25_1_5b()), Workload.benchmark(), 2048 / 14_352.0);
    public static final Reference REFERENCE_0_5B = new Reference(
            ModelShape.of(ModelConfig.qwen25_0_5b()), Workload.benchmark(), 0.0711017);

    /**
     * Compute seconds of each stage of a step. Index u is the unit: {@code forward[0]} the embedding lookup,
     * {@code forward[1..L]} the blocks, {@code forward[L+1]} the head (loss and its backward in one stage);
     * {@code backward[1..L]} the blocks (with their recomputed forward), {@code backward[0]} the embedding's.
     *
     * @param tail after backward: zeroing, norm, clipping and the optimizer over this rank's shards
     */
    public record StageTimes(double[] forward, double[] backward, double tail) {
        public double total() {
            double t = tail;
            for (int u = 0; u < forward.length; u++) {
                t += forward[u] + backward[u];
            }
            return t;
        }
    }

    public static StageTimes stageTimes(ModelShape m, Workload w, Sharding s, GpuSpec gpu, Calibration cal) {
        Work work = new Work(m, w, s);
        int units = m.headUnit() + 1;
        double[] forward = new double[units], backward = new double[units];
        for (int u = 0; u < units; u++) {
            boolean block = u >= 1 && u <= m.blocks();
            forward[u] = cal.slowdown() * work.forward(u).seconds(gpu) + (block ? cal.perBlockSeconds() / 4 : 0);
            backward[u] = cal.slowdown() * work.backward(u).seconds(gpu) + (block ? cal.perBlockSeconds() * 3 / 4 : 0);
        }
        return new StageTimes(forward, backward, cal.slowdown() * work.tail().seconds(gpu));
    }

    /** A step's compute at the ceilings, without calibration: what the calibration scales. */
    static double idealStepSeconds(ModelShape m, Workload w, GpuSpec gpu) {
        return stageTimes(m, w, Sharding.of(ShardingStrategy.FULL_SHARD,
                Cluster.of(gpu, 1, 1, 0, 1)), gpu, new Calibration(1, 0)).total();
    }

    /** FLOPs and bytes of memory traffic of a stage. */
    record Cost(double flops, double bytes) {
        double seconds(GpuSpec gpu) {
            return flops / gpu.gemmFlops() + bytes / gpu.hbmBytesPerSecond();
        }

        Cost plus(Cost o) {
            return new Cost(flops + o.flops, bytes + o.bytes);
        }
    }

    /** The work of each stage for one model, workload and sharding. */
    private static final class Work {
        final ModelShape m;
        final Workload w;
        final int groupSize;
        final boolean regather;
        final long n, c, e, rb;

        Work(ModelShape m, Workload w, Sharding s) {
            this.m = m;
            this.w = w;
            this.groupSize = s.shardSize();
            this.regather = s.reshardAfterForward();
            this.n = w.tokens();
            this.c = m.config().hidden();
            this.e = w.paramBytes();
            this.rb = w.reduceBytes();
        }

        long shard(int u) {
            return m.shardNumel(u, groupSize);
        }

        long padded(int u) {
            return m.paddedNumel(u, groupSize);
        }

        /** Preparing one all-gather: the shard rounded to bf16 (a zeroed buffer, then the copy) and the zeroed full buffer. */
        Cost gather(int u) {
            return new Cost(0, e == 2 ? 8.0 * shard(u) + 2.0 * padded(u) : 4.0 * padded(u));
        }

        /** The fp32 accumulator zeroed when first used. */
        Cost accumulator(int u) {
            return new Cost(0, 4.0 * padded(u));
        }

        /** Matrix gradients added into the fp32 accumulator by the products' epilogue (read and write). */
        Cost weightGradients(long matrixParams) {
            return new Cost(0, 8.0 * matrixParams);
        }

        /** Around one reduction: the bf16 rounding if any, the zeroed receive shard, and the add into the gradient shard. */
        Cost reduction(int u) {
            return new Cost(0, (rb == 2 ? 8.0 * padded(u) : 0) + (2.0 * rb + 8) * shard(u));
        }

        /** Attention's forward FLOPs per block: 4 * NH * HS per (query, key) pair attended, causally (or in a window). */
        double attentionForward() {
            long t = w.seq(), window = m.config().slidingWindow();
            double keysPerQuery = window <= 0 || window >= t ? (t + 1) / 2.0
                    : (window * (window + 1) / 2.0 + (double) (t - window) * window) / t;
            return 4.0 * m.config().heads() * m.config().headDim() * keysPerQuery * n;
        }

        /** Element traffic per token of a block's forward, in activation elements (see the class comment). */
        double forwardElements() {
            long q = m.qkvWidth(), a = m.attentionWidth(), up = m.mlpUpWidth(), f = m.config().intermediate();
            // zeroed outputs (4C+Q+A+U+F), two norms (4C), rotary (2Q), attention (Q+A), two residual adds (6C),
            // the MLP activation (U+F)
            return (4 * c + q + a + up + f) + 4 * c + 2 * q + (q + a) + 6 * c + (up + f);
        }

        /** Element traffic per token of selective checkpointing's recompute: outputs (2C+F), two norms, the MLP activation. */
        double recomputedElements() {
            long up = m.mlpUpWidth(), f = m.config().intermediate();
            return (2 * c + f) + 4 * c + (up + f);
        }

        double backwardElements() {
            long q = m.qkvWidth(), a = m.attentionWidth(), up = m.mlpUpWidth(), f = m.config().intermediate();
            // zeroed gradients (4C+F+U+A+Q), MLP activation (F+2U), two norms (6C), two residual adds (6C),
            // attention (3A+2Q), rotary (2Q), q|k|v bias (Q)
            return (4 * c + f + up + a + q) + (f + 2 * up) + 6 * c + 6 * c + (3 * a + 2 * q) + 2 * q + q;
        }

        Cost forward(int u) {
            if (u == 0) {
                return gather(0).plus(new Cost(0, 3.0 * n * c * e));
            }
            if (u == m.headUnit()) {
                return head();
            }
            Cost cost = new Cost(2.0 * m.matrixParams(u) * n + attentionForward(), forwardElements() * n * e)
                    .plus(gather(u));
            return w.recompute() ? cost.plus(new Cost(0, 3.0 * n * c * e)) : cost; // the kept copy of the output
        }

        /** The head: final norm, logits, cross-entropy and their backward, one stage. */
        Cost head() {
            int h = m.headUnit();
            long v = m.config().vocabSize();
            Cost cost = new Cost(6.0 * m.matrixParams(h) * n, e * (3.0 * n * v + 8.0 * n * c))
                    .plus(gather(h)).plus(accumulator(h)).plus(weightGradients(m.matrixParams(h)))
                    .plus(reduction(h));
            if (m.tied()) { // the embedding table is the head's matrix: gathered again if resharded, accumulated
                cost = cost.plus(accumulator(0));
                if (regather) {
                    cost = cost.plus(gather(0));
                }
            }
            return cost;
        }

        Cost backward(int u) {
            if (u == m.headUnit()) {
                return new Cost(0, 0);
            }
            if (u == 0) {
                Cost cost = new Cost(0, 4.0 * n * c + (double) n * c * e).plus(reduction(0));
                return m.tied() ? cost : cost.plus(accumulator(0));
            }
            Cost cost = new Cost(4.0 * m.matrixParams(u) * n + 2.5 * attentionForward(), backwardElements() * n * e)
                    .plus(accumulator(u)).plus(weightGradients(m.matrixParams(u))).plus(reduction(u));
            if (w.recompute()) {
                cost = cost.plus(new Cost(2.0 * m.matrixParams(u) * n + attentionForward(), forwardElements() * n * e));
            } else if (w.selective()) {
                cost = cost.plus(new Cost(0, recomputedElements() * n * e));
            }
            return regather ? cost.plus(gather(u)) : cost;
        }

        /** Zeroing the gradient shards, their norm, clipping and AdamW: 4 + 4 + 8 + 28 bytes per shard element. */
        Cost tail() {
            double elements = 0;
            for (int u = 0; u <= m.headUnit(); u++) {
                elements += shard(u);
            }
            return new Cost(0, 44.0 * elements);
        }
    }
}
