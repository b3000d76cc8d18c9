package io.fsdp4j.backend;

import java.util.Map;
import java.util.PriorityQueue;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Into how many parts attention_sm90's dk/dv kernel splits each key head's group of query heads: the divisor of the
 * group whose predicted time is least. A block does 128 keys of one key head over its split's query heads and the
 * query tiles of 64 that see those keys, so with causal masking the first key tiles' blocks have the most work. The
 * GPU starts blocks in launch order (the longest first) on whichever multiprocessor is free, one block each; the
 * prediction replays that: the time until the last multiprocessor is done, plus, for more than one split, the fp32
 * partial sums written and read back by the sum kernel. Fewer splits mean fewer, longer blocks and an uneven end; more
 * mean more memory traffic.
 *
 * <p>The costs are an H100's at head size 128 (2026-11-27, `attention_sm90_harness --splits`): a (query head, query
 * tile) step 1.54 us, a block's start and its stores two steps, memory 3 TB/s. With them the rule picked the fastest
 * of the measured split counts at every one of 16 shapes (28 / 4, 12 / 2, 14 / 2 and 32 / 8 heads of 128; 2048 to
 * 16384 tokens), where "the first divisor reaching two waves of blocks" had been up to 21% slower (32 / 8 heads at
 * 2048 tokens: 4 splits where 2 are fastest; Qwen2.5-7B at 8192 tokens: 7 splits, 1.45 ms, where one takes 1.30). Documents packed in a sequence are not known here:
 * the prediction takes the causal mask (a sliding window shortens the blocks).
 */
final class HopperDkdvSplits {
    /** A block's 128 keys (the kernel's SM90_BN) and a step's 64 queries. */
    private static final int KEYS = 128, QUERIES = 64;
    /** A step (one query head, one query tile) at head size 128, in seconds; it scales with the head size. */
    private static final double STEP_SECONDS = 1.54e-6;
    /** A block's start (K and V copied in) and end (dk and dv stored), in steps. */
    private static final double BLOCK_STEPS = 2;
    private static final double BYTES_PER_SECOND = 3.0e12;

    private record Key(int batch, int seqLen, int heads, int kvHeads, int headDim, int window, int sms) {}

    private static final Map<Key, Integer> CHOSEN = new ConcurrentHashMap<>();

    private HopperDkdvSplits() {}

    /** The split count for {@code s} on {@code sms} multiprocessors (a divisor of the group). */
    static int choose(AttentionShape s, int sms) {
        Key key = new Key(s.batch(), s.seqLen(), s.heads(), s.kvHeads(), s.headDim(), s.slidingWindow(), sms);
        return CHOSEN.computeIfAbsent(key, k -> fastest(s, sms));
    }

    private static int fastest(AttentionShape s, int sms) {
        int group = s.heads() / s.kvHeads();
        int best = 1;
        double bestSeconds = Double.MAX_VALUE;
        for (int splits = 1; splits <= group; splits++) {
            if (group % splits == 0) {
                double seconds = predictedSeconds(s, splits, sms);
                if (seconds < bestSeconds) {
                    best = splits;
                    bestSeconds = seconds;
                }
            }
        }
        return best;
    }

    /** The predicted time of the kernel and, for more than one split, of the splits' sum. */
    static double predictedSeconds(AttentionShape s, int splits, int sms) {
        double step = STEP_SECONDS * s.headDim() / 128.0;
        int t = s.seqLen(), tiles = (t + KEYS - 1) / KEYS, heads = s.heads() / s.kvHeads() / splits;
        long blocksPerTile = (long) s.kvHeads() * splits * s.batch();
        PriorityQueue<Double> busyUntil = new PriorityQueue<>();
        for (int i = 0; i < sms; i++) {
            busyUntil.add(0.0);
        }
        for (int tile = 0; tile < tiles; tile++) { // the kernel's order: the first key tiles (the longest) first
            int k0 = tile * KEYS;
            int lastQuery = s.slidingWindow() > 0 ? Math.min(t - 1, k0 + KEYS - 2 + s.slidingWindow()) : t - 1;
            double blockSteps = BLOCK_STEPS + (double) heads * ((lastQuery - k0) / QUERIES + 1);
            for (long b = 0; b < blocksPerTile; b++) {
                busyUntil.add(busyUntil.poll() + blockSteps);
            }
        }
        double end = 0;
        for (double d : busyUntil) {
            end = Math.max(end, d);
        }
        double seconds = end * step;
        if (splits > 1) { // each split's fp32 dk and dv written, read back, and the bf16 sum written
            double bytes = (double) s.batch() * t * s.kvHeads() * s.headDim() * 2 * (4.0 * 2 * splits + 2);
            seconds += bytes / BYTES_PER_SECOND;
        }
        return seconds;
    }
}
