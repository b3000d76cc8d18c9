package io.fsdp4j.eval;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.data.EvalAnswer;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.data.TextTokenizer;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.fsdp.ShardedForward;
import io.fsdp4j.model.Generator;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * {@link Evaluation}'s measures on a sharded model, on the ranks that train it (or that {@code eval} and
 * {@code score} start): forward only, through the same units ({@link ShardedForward}), on their backend. Every rank
 * of the job calls each method with the same inputs; rank r of W takes the sequences (or prompts) i with
 * {@code i % W == r}, batched ({@code batchSize} sequences of one length, or prompts, at a time), and the per-item
 * results are summed over the world, so that every rank returns the whole result. The numbers are those of the
 * whole-model evaluation computed in {@code fsdp.param_dtype} (with fp32 parameters: the same within fp32
 * rounding; a sequence evaluated alone, the same bits).
 */
public final class ShardedEvaluation {
    private final ShardedForward forward;
    private final RankContext rank;
    private final int batchSize;
    private Consumer<String> progress = line -> {};
    private long progressEveryNanos = 10_000_000_000L;

    /** @param batchSize sequences (of one length) or prompts per forward */
    public ShardedEvaluation(FsdpModel model, int batchSize) {
        if (batchSize < 1) {
            throw new IllegalArgumentException("batch size " + batchSize);
        }
        this.forward = new ShardedForward(model);
        this.rank = model.rank();
        this.batchSize = batchSize;
    }

    /** This rank's index in the job. */
    public int rank() {
        return rank.rank();
    }

    /**
     * Where this rank says how far generation has come ({@link #squad}, {@link #answers}): a line at most every
     * {@code every} seconds, "answered K of N prompts (S s)", K counted over the world; none by default.
     */
    public ShardedEvaluation reportProgressTo(Consumer<String> progress, double every) {
        this.progress = progress;
        this.progressEveryNanos = (long) (every * 1e9);
        return this;
    }

    /** The token-weighted mean loss over all sequences (as {@link Evaluation#loss}). */
    public Evaluation.LossResult loss(List<Sequence> sequences) {
        double sum = 0;
        long tokens = 0;
        for (Evaluation.SequenceLoss l : sequenceLosses(sequences)) {
            sum += l.sum();
            tokens += l.tokens();
        }
        return Evaluation.total(sum, tokens, sequences.size());
    }

    /** Each sequence's summed loss and labelled positions, in order. */
    public List<Evaluation.SequenceLoss> sequenceLosses(List<Sequence> sequences) {
        int n = sequences.size(), world = rank.worldSize();
        List<List<Integer>> mine = batches(sequences, rank.rank(), world);
        int rounds = 0;
        for (int r = 0; r < world; r++) { // every rank runs as many forwards as the busiest: they gather together
            rounds = Math.max(rounds, r == rank.rank() ? mine.size() : batches(sequences, r, world).size());
        }
        double[] sums = new double[2 * n];
        Backend be = rank.backend();
        for (int round = 0; round < rounds; round++) {
            List<Integer> batch = round < mine.size() ? mine.get(round) : List.of();
            try (MemoryScope scope = be.newScope(); var entered = scope.enter()) {
                if (batch.isEmpty()) {
                    forward.loss(null, null);
                    continue;
                }
                int[][] ids = new int[batch.size()][], labels = new int[batch.size()][], starts = null;
                boolean packed = batch.stream().anyMatch(i -> sequences.get(i).documentStarts() != null);
                if (packed) {
                    starts = new int[batch.size()][];
                }
                for (int b = 0; b < batch.size(); b++) {
                    Sequence s = sequences.get(batch.get(b));
                    ids[b] = s.ids();
                    labels[b] = s.labels();
                    if (packed) { // a sequence without starts is one document: every start 0
                        starts[b] = s.documentStarts() != null ? s.documentStarts() : new int[s.length()];
                    }
                }
                TokenBatch tokens = TokenBatch.of(be, ids, labels, starts);
                int T = ids[0].length;
                Tensor perRow = batch.size() == 1 ? null : be.allocate(DType.F32, batch.size() * T);
                double sum = forward.loss(tokens, perRow);
                float[] rows = perRow == null ? null : be.toFloats(perRow);
                for (int b = 0; b < batch.size(); b++) {
                    int i = batch.get(b);
                    double own = 0;
                    if (rows == null) {
                        own = sum;
                    } else {
                        for (int t = 0; t < T; t++) {
                            own += rows[b * T + t];
                        }
                    }
                    sums[2 * i] = own;
                    sums[2 * i + 1] = TokenBatch.countTargets(new int[][] {labels[b]},
                            starts == null ? null : new int[][] {starts[b]});
                }
            }
        }
        double[] all = rank.world().allReduce(sums); // each sequence's numbers come from one rank
        List<Evaluation.SequenceLoss> result = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            result.add(new Evaluation.SequenceLoss(all[2 * i], (long) all[2 * i + 1]));
        }
        return result;
    }

    /**
     * The fp32 logits (B,T,V) of every position of sequences of one length, computed by rank 0 in one batch while
     * the others take part in the gathers: on rank 0, null on the others.
     */
    public float[] logits(List<Sequence> sequences) {
        Backend be = rank.backend();
        try (MemoryScope scope = be.newScope(); var entered = scope.enter()) {
            if (rank.rank() != 0) {
                forward.logits(null, null, null);
                return null;
            }
            int[][] ids = sequences.stream().map(Sequence::ids).toArray(int[][]::new);
            TokenBatch batch = TokenBatch.of(be, ids, ids);
            int[] all = java.util.stream.IntStream.range(0, batch.rows()).toArray();
            return be.toFloats(forward.logits(batch, null, be.uploadInts(all, all.length)));
        }
    }

    /** The sequences of rank r of {@code world}, in batches of up to batchSize consecutive ones of one length. */
    private List<List<Integer>> batches(List<Sequence> sequences, int r, int world) {
        List<List<Integer>> batches = new ArrayList<>();
        List<Integer> current = new ArrayList<>();
        for (int i = r; i < sequences.size(); i += world) {
            if (!current.isEmpty() && (current.size() == batchSize
                    || sequences.get(current.getFirst()).length() != sequences.get(i).length())) {
                batches.add(current);
                current = new ArrayList<>();
            }
            current.add(i);
        }
        if (!current.isEmpty()) {
            batches.add(current);
        }
        return batches;
    }

    /** As {@link Evaluation#squad(io.fsdp4j.model.SingleDeviceModel, TextTokenizer, List, int, Consumer)}. */
    public Evaluation.SquadResult squad(TextTokenizer tokenizer, List<SquadQuestion> questions, int maxNewTokens,
                                        Consumer<Evaluation.SquadPrediction> each) {
        ModelConfig config = forward.model().config();
        List<int[]> prompts = Evaluation.squadPrompts(config, tokenizer, questions, maxNewTokens);
        List<int[]> generated = generate(prompts, maxNewTokens, Evaluation.stopTokens(tokenizer, config.vocabSize()));
        return Evaluation.scored(tokenizer, generated, questions.stream().map(SquadQuestion::id).toList(),
                questions.stream().map(SquadQuestion::answers).toList(), each);
    }

    /** As {@link Evaluation#answers}. */
    public Evaluation.SquadResult answers(TextTokenizer tokenizer, List<EvalAnswer> examples, int maxNewTokens) {
        ModelConfig config = forward.model().config();
        List<int[]> prompts = Evaluation.answerPrompts(config, examples, maxNewTokens);
        List<int[]> generated = generate(prompts, maxNewTokens, Evaluation.stopTokens(tokenizer, config.vocabSize()));
        return Evaluation.scored(tokenizer, generated, examples.stream().map(EvalAnswer::id).toList(),
                examples.stream().map(EvalAnswer::answers).toList(), p -> {});
    }

    /**
     * Greedy continuations of every prompt: this rank generates its share, in lockstep with the others (the same
     * number of batches, each continued while a sequence of any rank is still generating), then the tokens of all
     * are summed over the world.
     */
    List<int[]> generate(List<int[]> prompts, int maxNewTokens, int[] stopTokens) {
        int n = prompts.size(), world = rank.worldSize(), r = rank.rank();
        List<int[]> mine = new ArrayList<>();
        for (int i = r; i < n; i += world) {
            mine.add(prompts.get(i));
        }
        int rounds = Generator.rounds((n + world - 1) / world, batchSize); // rank 0's share is the largest
        long start = System.nanoTime();
        long[] lastLine = {start};
        List<int[]> generated = Generator.greedy(forward, mine, maxNewTokens, batchSize, rounds,
                active -> (int) rank.world().allReduce(new double[] {active})[0],
                done -> {
                    long now = System.nanoTime();
                    if (now - lastLine[0] >= progressEveryNanos && done < mine.size()) {
                        lastLine[0] = now;
                        // every rank answers batchSize a round, rank 0 the most: its count times the world, at most n
                        long answered = Math.min(n, (long) done * world);
                        progress.accept(String.format(java.util.Locale.ROOT, "answered about %,d of %,d prompts "
                                + "(%.1f s)", answered, n, (now - start) / 1e9));
                    }
                }, stopTokens);
        int stride = maxNewTokens + 1; // each prompt's count, then its tokens
        double[] all = new double[n * stride];
        for (int k = 0; k < generated.size(); k++) {
            int i = r + k * world;
            int[] tokens = generated.get(k);
            all[i * stride] = tokens.length;
            for (int j = 0; j < tokens.length; j++) {
                all[i * stride + 1 + j] = tokens[j];
            }
        }
        all = rank.world().allReduce(all);
        List<int[]> result = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            int[] tokens = new int[(int) all[i * stride]];
            for (int j = 0; j < tokens.length; j++) {
                tokens[j] = (int) all[i * stride + 1 + j];
            }
            result.add(tokens);
        }
        return result;
    }
}
