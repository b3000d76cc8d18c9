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
 * @param truncated documents longer than a sequence and cut short
 * @param skipped   documents left out: longer than a sequence with {@code data.too_long=drop}, or (without packing)
 *                  no label within their first seq_len tokens carries a loss (a prompt longer than the sequence)
 */
public record Dataset(String name, List<Sequence> sequences, List<EvalAnswer> answers, int documents, int truncated,
                      int skipped) {
    public Dataset {
        answers = List.copyOf(answers);
    }

    /** Positions that carry a loss over all positions of the sequences ({@link SequenceWindows#efficiency}). */
    public double packingEfficiency() {
        return SequenceWindows.efficiency(sequences);
    }
}
