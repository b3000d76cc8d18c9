package io.fsdp4j.config;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code train.*}: how long and how big. The global batch is {@code batchSize * gradAccum * world size} sequences.
 *
 * @param steps     {@code train.steps}: optimizer steps, >= 1
 * @param batchSize {@code train.batch_size}: sequences per rank per micro-batch, >= 1
 * @param gradAccum {@code train.grad_accum}: micro-batches per optimizer step, >= 1
 * @param seed      {@code train.seed}: seeds weight initialisation and data order
 * @param maxBadSteps {@code train.max_bad_steps}: steps in a row whose loss or gradient norm is not finite (each
 *                  skipped: no update) after which the run stops as diverged, >= 1
 */
public record TrainSection(int steps, int batchSize, int gradAccum, long seed, int maxBadSteps) {
    public static final int DEFAULT_MAX_BAD_STEPS = 3;

    public TrainSection {
        Check.atLeast("train.steps", steps, 1);
        Check.atLeast("train.batch_size", batchSize, 1);
        Check.atLeast("train.grad_accum", gradAccum, 1);
        Check.atLeast("train.max_bad_steps", maxBadSteps, 1);
    }

    public TrainSection(int steps, int batchSize, int gradAccum, long seed) {
        this(steps, batchSize, gradAccum, seed, DEFAULT_MAX_BAD_STEPS);
    }

    public static TrainSection defaults() {
        return new TrainSection(100, 2, 1, 1234);
    }

    static TrainSection bind(ConfigTree.Section s) {
        var d = defaults();
        int steps = s.integer("steps", d.steps());
        int batchSize = s.integer("batch_size", d.batchSize());
        int gradAccum = s.integer("grad_accum", d.gradAccum());
        long seed = s.longInteger("seed", d.seed());
        int maxBadSteps = s.integer("max_bad_steps", d.maxBadSteps());
        s.finish();
        return new TrainSection(steps, batchSize, gradAccum, seed, maxBadSteps);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("steps", steps);
        m.put("batch_size", batchSize);
        m.put("grad_accum", gradAccum);
        m.put("seed", seed);
        m.put("max_bad_steps", maxBadSteps);
        return m;
    }
}
