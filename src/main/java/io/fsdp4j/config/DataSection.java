package io.fsdp4j.config;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code data.*}: the datasets and how sequences are cut.
 *
 * @param train  {@code data.train}: the training dataset file, or null for the built-in demo data
 * @param eval   {@code data.eval}: an evaluation dataset file, or null
 * @param seqLen {@code data.seq_len}: tokens per sequence, >= 2
 * @param pack   {@code data.pack}: pack several documents into one sequence (attention never crosses documents)
 * @param format {@code data.format}: how the files are read ({@code auto}: told from the content)
 * @param chatTemplate {@code data.chat_template}: a Jinja file overriding the tokenizer's chat template, or null
 * @param trainOn {@code data.train_on}: the tokens of a conversation that carry loss
 * @param tooLong {@code data.too_long}: an example longer than seq_len is truncated or dropped
 */
public record DataSection(Path train, Path eval, int seqLen, boolean pack, DataFormat format, Path chatTemplate,
                          TrainOn trainOn, TooLong tooLong) {
    public DataSection {
        Check.atLeast("data.seq_len", seqLen, 2);
        if (eval != null && train == null) {
            throw new io.fsdp4j.UserError("config key 'data.eval' is set but 'data.train' is not; give data.train too"
                    + " (without it, train runs the built-in demo, which evaluates its own held-out examples)");
        }
    }

    /**
     * With {@code data.format auto}, the tokenizer's chat template, training on the assistant's turns, and long
     * examples truncated.
     */
    public DataSection(Path train, Path eval, int seqLen, boolean pack) {
        this(train, eval, seqLen, pack, DataFormat.AUTO, null, TrainOn.ASSISTANT, TooLong.TRUNCATE);
    }

    public static DataSection defaults() {
        return new DataSection(null, null, 64, false);
    }

    static DataSection bind(ConfigTree.Section s) {
        var d = defaults();
        var train = s.path("train");
        var eval = s.path("eval");
        int seqLen = s.integer("seq_len", d.seqLen());
        boolean pack = s.bool("pack", d.pack());
        var format = s.choice("format", DataFormat.class, d.format());
        var chatTemplate = s.path("chat_template");
        var trainOn = s.choice("train_on", TrainOn.class, d.trainOn());
        var tooLong = s.choice("too_long", TooLong.class, d.tooLong());
        s.finish();
        return new DataSection(train, eval, seqLen, pack, format, chatTemplate, trainOn, tooLong);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("train", TrainConfig.text(train));
        m.put("eval", TrainConfig.text(eval));
        m.put("seq_len", seqLen);
        m.put("pack", pack);
        m.put("format", format.spelling());
        m.put("chat_template", TrainConfig.text(chatTemplate));
        m.put("train_on", trainOn.spelling());
        m.put("too_long", tooLong.spelling());
        return m;
    }
}
