package io.fsdp4j.data;

import java.util.SplittableRandom;

/**
 * Which sequences make up each global batch: a pure function of (seed, step), so a resumed run continues the
 * exact order. Epoch e visits every sequence once in a permutation drawn from (seed, e) (or in file order
 * without shuffling). Within a global batch of G = ranks * microBatches * batchSize sequences, rank r's
 * micro-batch m is the slice starting at (r * microBatches + m) * batchSize, so the global batch, and hence
 * training, does not depend on how it is split across ranks and micro-batches.
 */
public final class BatchSampler {
    private final int sequences;
    private final int globalBatch;
    private final long seed;
    private final boolean shuffle;
    private int cachedEpoch = -1;
    private int[] cachedOrder;

    public BatchSampler(int sequences, int globalBatch, long seed, boolean shuffle) {
        this.sequences = sequences;
        this.globalBatch = globalBatch;
        this.seed = seed;
        this.shuffle = shuffle;
    }

    /**
     * Where rank {@code rank}'s micro-batch {@code microBatch} (of {@code microBatches} a step, {@code batchSize}
     * sequences each) begins in the global batch: (rank * microBatches + microBatch) * batchSize.
     */
    public static int firstOf(int rank, int microBatches, int microBatch, int batchSize) {
        return (rank * microBatches + microBatch) * batchSize;
    }

    /** Indices of the sequences of the global batch of step {@code step} (0-based). */
    public int[] globalBatch(long step) {
        int[] result = new int[globalBatch];
        for (int i = 0; i < globalBatch; i++) {
            long position = step * globalBatch + i;
            result[i] = order((int) (position / sequences))[(int) (position % sequences)];
        }
        return result;
    }

    /** The epoch a step's first sequence belongs to. */
    public long epochOf(long step) {
        return step * globalBatch / sequences;
    }

    private int[] order(int epoch) {
        if (epoch != cachedEpoch) {
            int[] order = new int[sequences];
            for (int i = 0; i < sequences; i++) {
                order[i] = i;
            }
            if (shuffle) {
                SplittableRandom random = new SplittableRandom(seed * 1_000_003L + epoch);
                for (int i = sequences - 1; i > 0; i--) {
                    int j = random.nextInt(i + 1);
                    int t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
            }
            cachedOrder = order;
            cachedEpoch = epoch;
        }
        return cachedOrder;
    }
}
