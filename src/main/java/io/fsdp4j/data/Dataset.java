package io.fsdp4j.data;

import java.util.List;

/**
 * One split of a dataset, ready to train or evaluate on.
 *
 * @param name      what to call it in messages and the run summary (a path, or "built-in demo instructions")
 * @param sequences sequences of exactly the requested length, in dataset order ({@link BatchSampler} orders them)
 * @param answers   the split's examples with answers for generation-based evaluation (prepared Alpaca or SQuAD
 *                  data, the demo); empty otherwise
 * @param documents documents the sequences were cut from
 * @param truncated documents longer than a sequence and cut short (only without packing)
 * @param skipped   documents left out because no label within their first seq_len tokens carries a loss (only
 *                  without packing: a prompt longer than the sequence)
 */
public record Dataset(String name, List<Sequence> sequences, List<EvalAnswer> answers, int documents, int truncated,
                      int skipped) {
    public Dataset {
        answers = List.copyOf(answers);
    }
}
