package io.fsdp4j.data;

import java.util.List;

/**
 * A held-out example for generation-based evaluation (exact match and F1): the prompt's token ids as they were
 * trained (the document's first tokens, those that carry no loss), and every accepted answer.
 *
 * @param document the document's index in its dataset
 * @param id       the example's id (SQuAD's question id; otherwise the document index)
 * @param promptIds the ids to generate from
 * @param answers  the accepted answers, as text (SQuAD: all annotators' answers; Alpaca: the output)
 */
public record EvalAnswer(int document, String id, int[] promptIds, List<String> answers) {
    public EvalAnswer {
        answers = List.copyOf(answers);
    }
}
