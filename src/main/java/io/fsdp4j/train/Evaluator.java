package io.fsdp4j.train;

import io.fsdp4j.fsdp.FsdpModel;
import java.util.Map;

/**
 * An evaluation that the training loop runs at its own cadence ({@link TrainingLoop#evaluateIfDue}): the held-out
 * loss ({@link HeldOutLoss}), the demo's held-out answers ({@link Demo}). Every rank calls it alike, so it may use
 * collectives; what it finds is reported from rank 0.
 */
public interface Evaluator {
    /**
     * Whether to evaluate the weights after step {@code step} of a run that takes steps {@code firstStep} to
     * {@code lastStep}; {@code step == firstStep - 1} asks about the weights the run starts from.
     */
    boolean dueAt(int step, int firstStep, int lastStep);

    /**
     * Evaluates {@code model} after step {@code step} (0: before training). Returns, on rank 0, the {@code eval_} keys
     * of that step's metrics line (empty: none); on the other ranks, null.
     */
    Map<String, Object> evaluate(FsdpModel model, int step);
}
