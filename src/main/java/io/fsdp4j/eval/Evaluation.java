package io.fsdp4j.eval;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.data.EvalAnswer;
import io.fsdp4j.data.JsonlTokens;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.data.TextTokenizer;
import io.fsdp4j.model.Generator;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tokenizer.Tokenizer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.ObjIntConsumer;
import java.util.stream.IntStream;

/**
 * The measures of evaluation, on a model whose every unit is whole on one device ({@link SingleDeviceModel}: the
 * reference that tests compare {@link ShardedEvaluation}, which {@code fsdp4j eval} and training use, with; and the
 * demo's), and the preparation of prompts and scoring of answers that both share:
 * <ul>
 *   <li>{@link #loss}: the token-weighted mean cross-entropy over sequences and its perplexity, exp(loss);</li>
 *   <li>{@link #squad}: greedy answers to SQuAD questions asked with {@link SquadPrompt}, scored with
 *       {@link SquadMetrics} and reported, as the official script does, in percent.</li>
 * </ul>
 * Nothing here changes the model; every result is deterministic for given parameters.
 */
public final class Evaluation {
    private Evaluation() {}

    /**
     * @param loss       token-weighted mean loss (nats per token) over every position that carries a label
     * @param perplexity exp(loss)
     * @param tokens     positions that carry a label
     * @param sequences  sequences evaluated
     */
    public record LossResult(double loss, double perplexity, long tokens, int sequences) {}

    /** One sequence's summed loss over its {@code tokens} labelled positions. */
    public record SequenceLoss(double sum, long tokens) {
        /** The mean loss per token, or NaN when no position carries a label. */
        public double mean() {
            return tokens == 0 ? Double.NaN : sum / tokens;
        }
    }

    /** One answered question; exactMatch and f1 in percent (0 to 100), against the best ground truth. */
    public record SquadPrediction(String id, String prediction, double exactMatch, double f1) {}

    /** exactMatch and f1: means over the questions, in percent (0 to 100); predictions in question order. */
    public record SquadResult(double exactMatch, double f1, int questions, List<SquadPrediction> predictions) {
        public SquadResult {
            predictions = List.copyOf(predictions);
        }
    }

    /**
     * Pre-tokenized JSONL ({@link JsonlTokens}) for this model: ids inside its vocabulary, no sequence longer than
     * its {@code max_position_embeddings}.
     */
    public static List<Sequence> readTokens(Path file, ModelConfig config) {
        List<Sequence> sequences = JsonlTokens.read(file, config.vocabSize());
        for (int i = 0; i < sequences.size(); i++) {
            if (sequences.get(i).length() > config.maxPositions()) {
                throw new UserError(file + ": sequence " + i + " has " + sequences.get(i).length()
                        + " tokens, more than the model's max_position_embeddings of " + config.maxPositions());
            }
        }
        return sequences;
    }

    /** The summed loss of one sequence (position t predicts label t+1; packed documents stay apart). */
    public static SequenceLoss sequenceLoss(SingleDeviceModel model, Backend backend, Sequence s) {
        int[][] ids = {s.ids()}, labels = {s.labels()};
        int[][] starts = s.documentStarts() == null ? null : new int[][] {s.documentStarts()};
        TokenBatch batch = TokenBatch.of(backend, ids, labels, starts);
        return new SequenceLoss(model.loss(batch, null), TokenBatch.countTargets(labels, starts));
    }

    /**
     * The token-weighted mean loss over all sequences, one forward pass per sequence (any lengths). A set in which
     * no position carries a label is a {@link UserError}.
     *
     * @param backend the backend the model's parameters live on
     */
    public static LossResult loss(SingleDeviceModel model, Backend backend, List<Sequence> sequences) {
        return loss(model, backend, sequences, (l, i) -> {});
    }

    /**
     * {@link #loss(SingleDeviceModel, Backend, List)}, calling {@code each} with every sequence's loss and index
     * as soon as it is known.
     */
    public static LossResult loss(SingleDeviceModel model, Backend backend, List<Sequence> sequences,
                                  ObjIntConsumer<SequenceLoss> each) {
        double sum = 0;
        long tokens = 0;
        for (int i = 0; i < sequences.size(); i++) {
            SequenceLoss l = sequenceLoss(model, backend, sequences.get(i));
            each.accept(l, i);
            sum += l.sum();
            tokens += l.tokens();
        }
        return total(sum, tokens, sequences.size());
    }

    /** The mean of {@code sum} over {@code tokens} labelled positions of {@code sequences} sequences. */
    public static LossResult total(double sum, long tokens, int sequences) {
        if (tokens == 0) {
            throw new UserError("no position of the " + sequences + " evaluation sequences carries a label "
                    + "(every label is -100, or every sequence has one token)");
        }
        double loss = sum / tokens;
        return new LossResult(loss, Math.exp(loss), tokens, sequences);
    }

    /** {@link #squad(SingleDeviceModel, Tokenizer, List, int, Consumer)} without a per-question callback. */
    public static SquadResult squad(SingleDeviceModel model, Tokenizer tokenizer, List<SquadQuestion> questions,
                                    int maxNewTokens) {
        return squad(model, tokenizer, questions, maxNewTokens, p -> {});
    }

    /**
     * Answers each question greedily and scores it: the prompt ({@link SquadPrompt}, encoded with the tokenizer's
     * special tokens, as transformers' {@code tokenizer(prompt)}, less a final EOS that some tokenizers append; as
     * {@link io.fsdp4j.data.AlpacaFormat} encodes prompts for training) is continued by up to {@code maxNewTokens}
     * tokens, stopping at EOS or at a token holding a newline; the text before the first newline, stripped, is
     * the prediction. Every prompt is checked to fit the model before any is answered.
     *
     * @param each called with each question's prediction as soon as it is scored, in order
     */
    public static SquadResult squad(SingleDeviceModel model, Tokenizer tokenizer, List<SquadQuestion> questions,
                                    int maxNewTokens, Consumer<SquadPrediction> each) {
        return squad(model, asText(tokenizer), questions, maxNewTokens, each);
    }

    /** As {@link #squad(SingleDeviceModel, Tokenizer, List, int, Consumer)}, with any tokenizer (bytes too). */
    public static SquadResult squad(SingleDeviceModel model, TextTokenizer tokenizer, List<SquadQuestion> questions,
                                    int maxNewTokens, Consumer<SquadPrediction> each) {
        List<int[]> prompts = squadPrompts(model.model().config(), tokenizer, questions, maxNewTokens);
        int[] stop = stopTokens(tokenizer, model.model().config().vocabSize());
        List<int[]> generated = Generator.greedy(model, prompts, maxNewTokens, GENERATION_BATCH, stop);
        return scored(tokenizer, generated, questions.stream().map(SquadQuestion::id).toList(),
                questions.stream().map(SquadQuestion::answers).toList(), each);
    }

    /** Prompts answered at once by the whole-model evaluation (any number gives the same answers). */
    static final int GENERATION_BATCH = 16;

    /**
     * The prompts of SQuAD questions ({@link SquadPrompt}, encoded with the tokenizer's special tokens, as
     * transformers' {@code tokenizer(prompt)}, less a final EOS that some tokenizers append; as
     * {@link io.fsdp4j.tokenizer.AlpacaFormat} encodes prompts for training), each checked to fit the model with
     * {@code maxNewTokens} more before any is answered.
     */
    static List<int[]> squadPrompts(ModelConfig config, TextTokenizer tokenizer, List<SquadQuestion> questions,
                                    int maxNewTokens) {
        if (maxNewTokens < 1) {
            throw new UserError("the number of new tokens must be at least 1, got " + maxNewTokens);
        }
        if (questions.isEmpty()) {
            throw new UserError("no SQuAD questions to evaluate");
        }
        List<int[]> prompts = new ArrayList<>();
        int eos = tokenizer.eosId().orElse(-1);
        for (SquadQuestion q : questions) {
            int[] prompt = tokenizer.encode(q.prompt(), true);
            if (prompt.length > 0 && prompt[prompt.length - 1] == eos) { // a tokenizer that appends EOS
                prompt = Arrays.copyOf(prompt, prompt.length - 1);
            }
            for (int id : prompt) {
                if (id >= config.vocabSize()) {
                    throw new UserError("the tokenizer gives token id " + id + " (question " + q.id()
                            + "), outside the model's vocabulary of " + config.vocabSize()
                            + ": tokenizer and model do not match");
                }
            }
            if (prompt.length + maxNewTokens > config.maxPositions()) {
                throw new UserError("question " + q.id() + ": its prompt of " + prompt.length + " tokens and up to "
                        + maxNewTokens + " new ones exceed the model's max_position_embeddings of "
                        + config.maxPositions());
            }
            prompts.add(prompt);
        }
        return prompts;
    }

    /**
     * Greedy answers to held-out prompt-and-response examples (prepared Alpaca or SQuAD data, the built-in demo's
     * instructions): each prompt, as it was trained, is continued by up to {@code maxNewTokens} tokens, stopping at
     * EOS or a newline, and the answer text ({@link #answerText}) is scored with {@link SquadMetrics} against the
     * accepted answers, in percent as {@link #squad} reports.
     */
    public static SquadResult answers(SingleDeviceModel model, TextTokenizer tokenizer, List<EvalAnswer> examples,
                                      int maxNewTokens) {
        List<int[]> prompts = answerPrompts(model.model().config(), examples, maxNewTokens);
        int[] stop = stopTokens(tokenizer, model.model().config().vocabSize());
        List<int[]> generated = Generator.greedy(model, prompts, maxNewTokens, GENERATION_BATCH, stop);
        return scored(tokenizer, generated, examples.stream().map(EvalAnswer::id).toList(),
                examples.stream().map(EvalAnswer::answers).toList(), p -> {});
    }

    /** The examples' prompts, each checked to fit the model with {@code maxNewTokens} more before any is answered. */
    static List<int[]> answerPrompts(ModelConfig config, List<EvalAnswer> examples, int maxNewTokens) {
        if (maxNewTokens < 1) {
            throw new UserError("the number of new tokens must be at least 1, got " + maxNewTokens);
        }
        if (examples.isEmpty()) {
            throw new UserError("no examples with answers to evaluate");
        }
        for (EvalAnswer example : examples) {
            if (example.promptIds().length + maxNewTokens > config.maxPositions()) {
                throw new UserError("example " + example.id() + ": its prompt of " + example.promptIds().length
                        + " tokens and up to " + maxNewTokens + " new ones exceed the model's max_position_embeddings"
                        + " of " + config.maxPositions());
            }
        }
        return examples.stream().map(EvalAnswer::promptIds).toList();
    }

    /**
     * The generated tokens of each question or example as answer text ({@link #answerText}), scored against its
     * accepted answers; {@code each} is called with every prediction, in order.
     */
    static SquadResult scored(TextTokenizer tokenizer, List<int[]> generated, List<String> ids,
                              List<List<String>> answers, Consumer<SquadPrediction> each) {
        double em = 0, f1 = 0;
        List<SquadPrediction> predictions = new ArrayList<>();
        for (int i = 0; i < generated.size(); i++) {
            String answer = answerText(tokenizer, generated.get(i));
            var p = new SquadPrediction(ids.get(i), answer, 100 * SquadMetrics.exactMatch(answer, answers.get(i)),
                    100 * SquadMetrics.f1(answer, answers.get(i)));
            em += p.exactMatch();
            f1 += p.f1();
            predictions.add(p);
            each.accept(p);
        }
        return new SquadResult(em / generated.size(), f1 / generated.size(), generated.size(), predictions);
    }

    /**
     * Where generation stops: the EOS token (if the tokenizer names one) and every token of the model's vocabulary
     * whose text holds a newline ("\n", "\n\n", ".\n", a byte-fallback {@code <0x0A>}, ...).
     */
    static int[] stopTokens(Tokenizer tokenizer, int modelVocab) {
        return stopTokens(asText(tokenizer), modelVocab);
    }

    static int[] stopTokens(TextTokenizer tokenizer, int modelVocab) {
        int known = Math.min(modelVocab, tokenizer.vocabSize());
        IntStream newlines = IntStream.range(0, known)
                .filter(id -> tokenizer.decode(new int[] {id}, false).indexOf('\n') >= 0);
        IntStream eos = tokenizer.eosId().stream();
        return IntStream.concat(eos, newlines).distinct().toArray();
    }

    /**
     * The answer in generated tokens: EOS and ids the tokenizer does not know (a model's vocabulary may be padded
     * beyond the tokenizer's) are dropped, special tokens skipped, and the text cut at its first newline, stripped.
     */
    static String answerText(Tokenizer tokenizer, int[] generated) {
        return answerText(asText(tokenizer), generated);
    }

    static String answerText(TextTokenizer tokenizer, int[] generated) {
        int eos = tokenizer.eosId().orElse(-1);
        int[] kept = Arrays.stream(generated).filter(id -> id != eos && id < tokenizer.vocabSize()).toArray();
        String text = tokenizer.decode(kept, true);
        int newline = text.indexOf('\n');
        return (newline < 0 ? text : text.substring(0, newline)).strip();
    }

    /** A Hugging Face tokenizer seen as a {@link TextTokenizer} (not to be closed: the caller owns it). */
    private static TextTokenizer asText(Tokenizer tokenizer) {
        return new TextTokenizer.HuggingFace(tokenizer, "");
    }
}
