package io.fsdp4j.train;

import io.fsdp4j.config.DataSection;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Dataset;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.TokenBatch;
import java.io.PrintStream;
import java.util.Locale;

/**
 * What the training data decides about a run before it starts: {@code data.seq_len: auto} (the longest example's
 * loss-carrying tokens), {@code train.epochs} as a number of steps, and a warning when many examples carry no loss
 * within their window (a prompt longer than {@code data.seq_len}: an Alpaca prompt alone is 150 to 240 byte tokens).
 */
final class DataFit {
    /** More than this fraction of examples left out for want of a loss-carrying token is warned of. */
    static final double NO_LOSS_WARNING = 0.03;
    /** An automatic sequence length is a multiple of this. */
    static final int ROUND = 8;

    private DataFit() {}

    /**
     * The length the training data is read at: {@code data.seq_len}, or with {@code auto} the model's context
     * ({@link DataSection#AUTO_SEQ_LEN_MAX} at most), cut down to the data's by {@link #fit}.
     */
    static int readLength(TrainConfig config, ModelConfig model) {
        var d = config.data();
        return d.autoSeqLen() ? Math.min(model.maxPositions(), DataSection.AUTO_SEQ_LEN_MAX) : d.seqLen();
    }

    /**
     * {@code config} with the data's decisions in it: {@code data.seq_len} for {@code auto}, from {@code data} as
     * read at {@link #readLength}; {@code train.steps} for {@code train.epochs} over {@code worldSize} ranks. Says
     * each on {@code out}, and warns there when examples carry no loss within their window.
     */
    static TrainConfig fit(TrainConfig config, ModelConfig model, Dataset data, int worldSize, PrintStream out) {
        int readAt = readLength(config, model);
        if (config.data().autoSeqLen()) {
            int len = config.data().pack() ? readAt : longestLabelled(data, readAt);
            out.printf(Locale.ROOT, "fsdp4j: data.seq_len=auto: %d tokens (%s, up to the model's context of %d)%n",
                    len, config.data().pack() ? "packed windows" : "the longest example's loss-carrying tokens",
                    model.maxPositions());
            config = config.with("data.seq_len=" + len);
        }
        if (data.documents() > 0 && data.skipped() > NO_LOSS_WARNING * data.documents()) {
            out.printf(Locale.ROOT, "fsdp4j: warning: %d of %d examples (%.1f%%) have no loss-carrying token within"
                            + " data.seq_len=%d (the prompt fills the window) and are left out; raise data.seq_len, or"
                            + " set it to auto (the longest example's, up to the model's context)%n",
                    data.skipped(), data.documents(), 100.0 * data.skipped() / data.documents(), readAt);
        }
        var train = config.train();
        if (train.epochs() > 0) {
            int steps = train.stepsFor(data.sequences().size(), worldSize);
            out.printf(Locale.ROOT, "fsdp4j: train.epochs=%d: %d steps of %d sequences (%d a step over %d ranks)%n",
                    train.epochs(), steps, data.sequences().size(),
                    train.batchSize() * train.gradAccum() * worldSize, worldSize);
            config = config.with("train.epochs=0", "train.steps=" + steps);
        }
        return config;
    }

    /** The last position with a label in any sequence, plus one, rounded up to {@link #ROUND}, at most {@code max}. */
    static int longestLabelled(Dataset data, int max) {
        int longest = 2;
        for (Sequence s : data.sequences()) {
            int[] labels = s.labels();
            for (int p = labels.length - 1; p >= longest; p--) {
                if (labels[p] != TokenBatch.IGNORE) {
                    longest = p + 1;
                    break;
                }
            }
        }
        return Math.min(max, (longest + ROUND - 1) / ROUND * ROUND);
    }
}
