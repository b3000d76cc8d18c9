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
 */
public record TrainSection(int steps, int batchSize, int gradAccum, long seed) {
    public TrainSection {
        Check.atLeast("train.steps", steps, 1);
        Check.atLeast("train.batch_size", batchSize, 1);
        Check.atLeast("train.grad_accum", gradAccum, 1);
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
        s.finish();
        return new TrainSection(steps, batchSize, gradAccum, seed);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("steps", steps);
        m.put("batch_size", batchSize);
        m.put("grad_accum", gradAccum);
        m.put("seed", seed);
        return m;
    }
}
