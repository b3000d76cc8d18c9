package io.fsdp4j.config;

import io.fsdp4j.UserError;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code train.*}: how long and how big. The global batch is {@code batchSize * gradAccum * world size} sequences.
 *
 * @param steps     {@code train.steps}: optimizer steps, >= 1; 0 only with {@code epochs}, which then sets them
 * @param batchSize {@code train.batch_size}: sequences per rank per micro-batch, >= 1
 * @param gradAccum {@code train.grad_accum}: micro-batches per optimizer step, >= 1
 * @param seed      {@code train.seed}: seeds weight initialisation and data order
 * @param epochs    {@code train.epochs}: passes over the training data instead of a number of steps (the steps are
 *                  counted once the data and the world size are known, {@link #stepsFor}); 0: {@code steps} says
 * @param maxBadSteps {@code train.max_bad_steps}: steps in a row whose loss or gradient norm is not finite (each
 *                  skipped: no update) after which the run stops as diverged, >= 1
 */
public record TrainSection(int steps, int batchSize, int gradAccum, long seed, int epochs, int maxBadSteps) {
    public static final int DEFAULT_MAX_BAD_STEPS = 3;

    public TrainSection {
        Check.atLeast("train.epochs", epochs, 0);
        Check.atLeast("train.steps", steps, epochs > 0 ? 0 : 1);
        Check.atLeast("train.batch_size", batchSize, 1);
        Check.atLeast("train.grad_accum", gradAccum, 1);
        Check.atLeast("train.max_bad_steps", maxBadSteps, 1);
        if (epochs > 0 && steps > 0) {
            throw new UserError("config keys 'train.steps' (" + steps + ") and 'train.epochs' (" + epochs
                    + ") are both set; give one");
        }
    }

    /** A run of a number of steps. */
    public TrainSection(int steps, int batchSize, int gradAccum, long seed) {
        this(steps, batchSize, gradAccum, seed, 0, DEFAULT_MAX_BAD_STEPS);
    }

    public static TrainSection defaults() {
        return new TrainSection(100, 2, 1, 1234);
    }

    /**
     * The optimizer steps of this run over {@code sequences} training sequences with {@code worldSize} ranks:
     * {@code steps}, or with {@code epochs} as many as make that many passes (the last batch of a pass completed
     * from the next one's order), at least 1.
     */
    public int stepsFor(long sequences, int worldSize) {
        if (epochs == 0) {
            return steps;
        }
        long global = (long) batchSize * gradAccum * worldSize;
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, (epochs * sequences + global - 1) / global));
    }

    static TrainSection bind(ConfigSection s) {
        var d = defaults();
        int epochs = s.integer("epochs", d.epochs());
        int steps = s.integer("steps", epochs > 0 ? 0 : d.steps());
        int batchSize = s.integer("batch_size", d.batchSize());
        int gradAccum = s.integer("grad_accum", d.gradAccum());
        long seed = s.longInteger("seed", d.seed());
        int maxBadSteps = s.integer("max_bad_steps", d.maxBadSteps());
        s.finish();
        return new TrainSection(steps, batchSize, gradAccum, seed, epochs, maxBadSteps);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("steps", steps);
        m.put("batch_size", batchSize);
        m.put("grad_accum", gradAccum);
        m.put("seed", seed);
        m.put("epochs", epochs);
        m.put("max_bad_steps", maxBadSteps);
        return m;
    }
}
