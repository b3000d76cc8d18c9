package io.fsdp4j.train;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.model.SingleDeviceModel;
import java.util.ArrayList;
import java.util.List;
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

    /**
     * The model whole on rank 0's CPU backend, in fp32, for it to evaluate while the other ranks wait (null on them):
     * every unit is gathered onto rank 0 (collectives: every rank takes part).
     */
    static SingleDeviceModel wholeOnRankZero(FsdpModel model) {
        boolean rankZero = model.rank().rank() == 0;
        List<float[]> full = new ArrayList<>();
        for (int u = 0; u < model.units().size(); u++) {
            float[] unit = model.fullParameters(u);
            if (rankZero) {
                full.add(unit);
            }
        }
        return rankZero ? EvalModel.build(model.model().config(), CpuBackend.INSTANCE, full) : null;
    }
}
