package io.fsdp4j.config;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code data.*}: the datasets and how sequences are cut.
 *
 * @param train  {@code data.train}: the training dataset (a file or directory), or null for the built-in demo data
 * @param eval   {@code data.eval}: an evaluation dataset, or null
 * @param seqLen {@code data.seq_len}: tokens per sequence, >= 2; 0 ({@code auto}, a fine-tune's default): the
 *               longest example's loss-carrying tokens, up to the model's context ({@link #AUTO_SEQ_LEN_MAX} at most)
 * @param pack   {@code data.pack}: pack several documents into one sequence (attention never crosses documents)
 * @param format {@code data.format}: how the files are read ({@code auto}: told from the content)
 * @param chatTemplate {@code data.chat_template}: a Jinja file overriding the tokenizer's chat template, or null
 * @param trainOn {@code data.train_on}: the tokens of a conversation that carry loss
 * @param tooLong {@code data.too_long}: an example longer than seq_len is truncated or dropped
 * @param trainMix {@code data.train} given as a list of two or more {@code {path, weight}}: a weighted mix (then
 *                 {@code train} is its first path); null for one dataset
 * @param evalMix  the same for {@code data.eval}
 * @param chatTemplateTimeout {@code data.chat_template_timeout}: seconds the chat template may take to render one
 *                 conversation (an endless loop in a downloaded template stops there, with an error), &gt; 0
 */
public record DataSection(Path train, Path eval, int seqLen, boolean pack, DataFormat format, Path chatTemplate,
                          TrainOn trainOn, TooLong tooLong, List<WeightedPath> trainMix, List<WeightedPath> evalMix,
                          double chatTemplateTimeout) {
    /** {@code data.chat_template_timeout}'s default, seconds (the renderer's: {@code ChatTemplate}). */
    public static final double CHAT_TEMPLATE_TIMEOUT = 30;

    /** The longest sequence {@code data.seq_len: auto} chooses (also bounded by the model's context). */
    public static final int AUTO_SEQ_LEN_MAX = 4096;

    public DataSection {
        if (seqLen != 0) {
            Check.atLeast("data.seq_len", seqLen, 2);
        }
        if (!(chatTemplateTimeout > 0) || !Double.isFinite(chatTemplateTimeout)) {
            throw new io.fsdp4j.UserError("config key 'data.chat_template_timeout' must be a number of seconds > 0, "
                    + "got " + chatTemplateTimeout);
        }
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
        this(train, eval, seqLen, pack, DataFormat.AUTO, null, TrainOn.ASSISTANT, TooLong.TRUNCATE, null, null,
                CHAT_TEMPLATE_TIMEOUT);
    }

    public static DataSection defaults() {
        return new DataSection(null, null, 64, false);
    }

    /** Whether {@code data.seq_len} is {@code auto}: told from the data at the start of the run. */
    public boolean autoSeqLen() {
        return seqLen == 0;
    }

    static DataSection bind(ConfigSection s, int seqLenDefault) {
        var d = defaults();
        var trainList = s.weightedPaths("train");
        var evalList = s.weightedPaths("eval");
        var train = trainList == null ? null : trainList.getFirst().path();
        var eval = evalList == null ? null : evalList.getFirst().path();
        int seqLen = s.integerOrAuto("seq_len", seqLenDefault);
        boolean pack = s.bool("pack", d.pack());
        var format = s.choice("format", DataFormat.class, d.format());
        var chatTemplate = s.path("chat_template");
        var trainOn = s.choice("train_on", TrainOn.class, d.trainOn());
        var tooLong = s.choice("too_long", TooLong.class, d.tooLong());
        double timeout = s.number("chat_template_timeout", d.chatTemplateTimeout());
        s.finish();
        return new DataSection(train, eval, seqLen, pack, format, chatTemplate, trainOn, tooLong, mix(trainList),
                mix(evalList), timeout);
    }

    private static List<WeightedPath> mix(List<WeightedPath> list) {
        return list == null || list.size() < 2 ? null : list;
    }

    private static Object pathOrMix(Path path, List<WeightedPath> mix) {
        if (mix == null) {
            return TrainConfig.text(path);
        }
        List<Map<String, Object>> items = new ArrayList<>();
        for (WeightedPath w : mix) {
            var item = new LinkedHashMap<String, Object>();
            item.put("path", w.path().toString());
            item.put("weight", w.weight());
            items.add(item);
        }
        return items;
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("train", pathOrMix(train, trainMix));
        m.put("eval", pathOrMix(eval, evalMix));
        m.put("seq_len", seqLen == 0 ? ConfigTree.AUTO : seqLen);
        m.put("pack", pack);
        m.put("format", format.spelling());
        m.put("chat_template", TrainConfig.text(chatTemplate));
        m.put("train_on", trainOn.spelling());
        m.put("too_long", tooLong.spelling());
        m.put("chat_template_timeout", chatTemplateTimeout);
        return m;
    }
}
