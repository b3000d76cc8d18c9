package io.fsdp4j.train;

import io.fsdp4j.data.Sequence;
import io.fsdp4j.eval.Evaluation;
import io.fsdp4j.eval.ShardedEvaluation;
import io.fsdp4j.fsdp.FsdpModel;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The loss on held-out data during training ({@code log.eval_every}): before the first step of a fresh run, every
 * {@code every} steps (0: none between) and after the last step.
 *
 * @param listener told on rank 0 what each evaluation found
 */
public record HeldOutLoss(List<Sequence> data, int every, Listener listener) implements Evaluator {

    /** Called on rank 0 with the loss on the evaluation data after each evaluated step (0: before training). */
    public interface Listener {
        void onEval(int step, Evaluation.LossResult result);
    }

    @Override
    public boolean dueAt(int step, int firstStep, int lastStep) {
        if (step == firstStep - 1) {
            return step == 0; // the held-out loss before training: where the curve starts
        }
        return step == lastStep || every > 0 && step % every == 0;
    }

    /**
     * Every rank evaluates its share of the sequences forward through the sharded units ({@link ShardedEvaluation}:
     * no unit gathered whole, on the ranks' own backend); rank 0 reports the sum.
     */
    @Override
    public Map<String, Object> evaluate(FsdpModel model, int step) {
        Evaluation.LossResult result = new ShardedEvaluation(model, 1).loss(data);
        if (model.rank().rank() != 0) {
            return null;
        }
        listener.onEval(step, result);
        Map<String, Object> keys = new LinkedHashMap<>();
        keys.put("eval_loss", result.loss());
        keys.put("eval_perplexity", result.perplexity());
        keys.put("eval_tokens", result.tokens());
        return keys;
    }
}
