package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.function.IntConsumer;
import java.util.function.IntUnaryOperator;
import java.util.stream.IntStream;

/**
 * Greedy decoding of a batch of prompts with a KV cache, through the model's own block forward
 * ({@link CausalLM#blockForward(int, Tensor, Tensor, TokenBatch, KvCache)}): the prompts of a batch, longest
 * first and right-padded to the longest, are processed at once (the padding lies after each prompt, so causal
 * attention never sees it, and the rows it wrote in the cache are overwritten before they are read), then one new
 * token per sequence per step, each at its own position, until every sequence has stopped or made
 * {@code maxNewTokens} tokens. Each row is computed as it would be alone: the tokens are those of generating
 * each prompt by itself.
 */
public final class Generator {
    private Generator() {}

    /** One sequence: {@link #greedy(ForwardPass, List, int, int, int[])} of {@code prompt} alone. */
    public static int[] greedy(ForwardPass model, int[] prompt, int maxNewTokens, int... stopTokens) {
        return greedy(model, List.of(prompt), maxNewTokens, 1, stopTokens).getFirst();
    }

    /**
     * The tokens generated after each prompt, in the prompts' order: at most {@code maxNewTokens}, stopping after any
     * token of {@code stopTokens} (which is included), {@code batchSize} prompts at a time.
     */
    public static List<int[]> greedy(ForwardPass model, List<int[]> prompts, int maxNewTokens, int batchSize,
                                     int... stopTokens) {
        return greedy(model, prompts, maxNewTokens, batchSize, rounds(prompts.size(), batchSize), a -> a, stopTokens);
    }

    /** Batches of {@code batchSize} that {@code prompts} prompts make. */
    public static int rounds(int prompts, int batchSize) {
        return (prompts + batchSize - 1) / batchSize;
    }

    /**
     * As {@link #greedy(ForwardPass, List, int, int, int[])}, for a model whose units need every rank that shares
     * them to run the same forwards (a sharded model gathers each unit with its shard group): {@code rounds}
     * batches, the same on every such rank (a rank whose prompts make fewer runs empty ones), and the steps of a
     * batch continued while {@code activeAnywhere} (given this rank's count of sequences still generating, returning
     * the count over all those ranks) is above zero.
     */
    public static List<int[]> greedy(ForwardPass model, List<int[]> prompts, int maxNewTokens, int batchSize,
                                     int rounds, IntUnaryOperator activeAnywhere, int... stopTokens) {
        return greedy(model, prompts, maxNewTokens, batchSize, rounds, activeAnywhere, done -> {}, stopTokens);
    }

    /**
     * As {@link #greedy(ForwardPass, List, int, int, int, IntUnaryOperator, int[])}, telling {@code afterRound} the
     * number of this rank's prompts answered after each batch.
     */
    public static List<int[]> greedy(ForwardPass model, List<int[]> prompts, int maxNewTokens, int batchSize,
                                     int rounds, IntUnaryOperator activeAnywhere, IntConsumer afterRound,
                                     int... stopTokens) {
        if (batchSize < 1 || maxNewTokens < 1) {
            throw new IllegalArgumentException("batch size " + batchSize + ", new tokens " + maxNewTokens);
        }
        // longest first: the prompts batched together are of similar lengths, padded little
        Integer[] order = IntStream.range(0, prompts.size()).boxed().toArray(Integer[]::new);
        Arrays.sort(order, Comparator.comparingInt((Integer i) -> prompts.get(i).length).reversed());
        if (prompts.stream().anyMatch(p -> p.length == 0)) {
            throw new IllegalArgumentException("an empty prompt: generation needs at least one token to continue");
        }
        int[][] generated = new int[prompts.size()][];
        for (int round = 0; round < rounds; round++) {
            int from = Math.min(prompts.size(), round * batchSize), to = Math.min(prompts.size(), from + batchSize);
            List<int[]> batch = new ArrayList<>();
            for (int i = from; i < to; i++) {
                batch.add(prompts.get(order[i]));
            }
            int[][] out = batch(model, batch, maxNewTokens, activeAnywhere, stopTokens);
            for (int i = from; i < to; i++) {
                generated[order[i]] = out[i - from];
            }
            afterRound.accept(to);
        }
        return Arrays.asList(generated);
    }

    /** One batch of prompts (empty: this rank only takes part), each continued greedily. */
    private static int[][] batch(ForwardPass model, List<int[]> prompts, int maxNewTokens,
                                 IntUnaryOperator activeAnywhere, int[] stopTokens) {
        Backend be = model.backend();
        int B = prompts.size(), T = prompts.stream().mapToInt(p -> p.length).max().orElse(0);
        int[][] generated = new int[B][maxNewTokens];
        int[] counts = new int[B], lengths = prompts.stream().mapToInt(p -> p.length).toArray();
        boolean[] stopped = new boolean[B];
        try (MemoryScope scope = be.newScope(); var entered = scope.enter()) {
            KvCache cache = B == 0 ? null : model.model().newKvCache(B, T + maxNewTokens, model.activationType());
            // the prompts, right-padded to T: the logits of each one's last token
            int[] ids = new int[B * T], positions = new int[B * T], last = new int[B];
            for (int b = 0; b < B; b++) {
                System.arraycopy(prompts.get(b), 0, ids, b * T, lengths[b]);
                for (int t = 0; t < T; t++) {
                    positions[b * T + t] = t;
                }
                last[b] = b * T + lengths[b] - 1;
            }
            step(model, B, T, ids, positions, last, cache, generated, counts, stopped, stopTokens);
            // then a token a step, each sequence at its own position
            for (int k = 1; k < maxNewTokens; k++) {
                int active = 0;
                for (boolean s : stopped) {
                    active += s ? 0 : 1;
                }
                if (activeAnywhere.applyAsInt(active) == 0) {
                    break;
                }
                int[] next = new int[B], at = new int[B], rows = new int[B];
                for (int b = 0; b < B; b++) {
                    next[b] = generated[b][counts[b] - 1];
                    at[b] = lengths[b] + k - 1;
                    rows[b] = b;
                }
                step(model, B, 1, next, at, rows, cache, generated, counts, stopped, stopTokens);
            }
        }
        int[][] result = new int[B][];
        for (int b = 0; b < B; b++) {
            result[b] = Arrays.copyOf(generated[b], counts[b]);
        }
        return result;
    }

    /**
     * One forward of B sequences of T tokens; each sequence not yet stopped takes the argmax of its row's logits
     * ({@link Backend#argmaxRows}).
     */
    private static void step(ForwardPass model, int B, int T, int[] ids, int[] positions, int[] rows, KvCache cache,
                             int[][] generated, int[] counts, boolean[] stopped, int[] stopTokens) {
        Backend be = model.backend();
        try (MemoryScope scope = be.newScope(); var entered = scope.enter()) {
            TokenBatch batch = B == 0 ? null : new TokenBatch(B, T, be.uploadInts(ids, B * T),
                    be.uploadInts(positions, B * T), null, null);
            Tensor logits = model.logits(batch, cache, B == 0 ? null : be.uploadInts(rows, B));
            if (B == 0) {
                return;
            }
            int[] best = be.argmaxRows(logits); // B ints from where the logits are, not B x V floats
            for (int b = 0; b < B; b++) {
                if (stopped[b]) {
                    continue;
                }
                int token = best[b];
                generated[b][counts[b]++] = token;
                stopped[b] = Arrays.stream(stopTokens).anyMatch(s -> s == token);
            }
        }
    }
}
