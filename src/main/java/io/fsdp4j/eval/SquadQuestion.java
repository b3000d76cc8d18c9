package io.fsdp4j.eval;

import io.fsdp4j.data.SquadPrompt;
import java.util.List;

/**
 * One question of a SQuAD v1.1 file, with its paragraph's context and every ground-truth answer text.
 *
 * @param answers at least one; a prediction is scored against each and the best score is kept
 */
public record SquadQuestion(String id, String context, String question, List<String> answers) {
    public SquadQuestion {
        answers = List.copyOf(answers);
    }

    /** The prompt the model answers ({@link SquadPrompt#prompt}). */
    public String prompt() {
        return SquadPrompt.prompt(context, question);
    }
}
