package io.fsdp4j.config;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code data.*}: the datasets and how sequences are cut.
 *
 * @param train  {@code data.train}: the training dataset file, or null for the built-in demo data
 * @param eval   {@code data.eval}: an evaluation dataset file, or null
 * @param seqLen {@code data.seq_len}: tokens per sequence, >= 2; 0 ({@code auto}, a fine-tune's default): the
 *               longest example's loss-carrying tokens, up to the model's context ({@link #AUTO_SEQ_LEN_MAX} at most)
 * @param pack   {@code data.pack}: pack several documents into one sequence (attention never crosses documents)
 */
public record DataSection(Path train, Path eval, int seqLen, boolean pack) {
    /** The longest sequence {@code data.seq_len: auto} chooses (also bounded by the model's context). */
    public static final int AUTO_SEQ_LEN_MAX = 4096;

    public DataSection {
        if (seqLen != 0) {
            Check.atLeast("data.seq_len", seqLen, 2);
        }
        if (eval != null && train == null) {
            throw new io.fsdp4j.UserError("config key 'data.eval' is set but 'data.train' is not; give data.train too"
                    + " (without it, train runs the built-in demo, which evaluates its own held-out examples)");
        }
    }

    public static DataSection defaults() {
        return new DataSection(null, null, 64, false);
    }

    /** Whether {@code data.seq_len} is {@code auto}: told from the data at the start of the run. */
    public boolean autoSeqLen() {
        return seqLen == 0;
    }

    static DataSection bind(ConfigTree.Section s, int seqLenDefault) {
        var d = defaults();
        var train = s.path("train");
        var eval = s.path("eval");
        int seqLen = s.integerOrAuto("seq_len", seqLenDefault);
        boolean pack = s.bool("pack", d.pack());
        s.finish();
        return new DataSection(train, eval, seqLen, pack);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("train", TrainConfig.text(train));
        m.put("eval", TrainConfig.text(eval));
        m.put("seq_len", seqLen == 0 ? ConfigTree.AUTO : seqLen);
        m.put("pack", pack);
        return m;
    }
}
