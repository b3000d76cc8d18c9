package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * The LM head and the loss over the rows that carry a label, a chunk of rows at a time: the logits of a long sequence
 * (16k tokens x 152k vocabulary: 5 GB in bf16) never exist at once, and rows without a label (a chat's prompts and role
 * headers, a document's last token) cost no product at all. Per chunk: gather its labelled rows of the normed hidden
 * states (a view where they are contiguous), logits = x W^T, cross-entropy (the logits become their gradient), then
 * dx = dlogits W scattered back and dW += dlogits^T x. The numbers are those of one pass over all rows up to the
 * order of sums: each row's loss and input gradient comes from its own row alone, and the weight gradient sums the
 * same labelled rows (unlabelled rows would add exact zeros); with several chunks it is summed chunk by chunk.
 * With a soft cap (Gemma 2's final_logit_softcapping) the logits are {@code cap * tanh(z / cap)} of the products z,
 * their gradient times {@code 1 - tanh^2} before it goes back through the product.
 *
 * <p>Shapes: N rows, C width, V vocabulary, R rows of a chunk.
 */
public final class HeadLoss {
    /**
     * The most logits elements the head holds at once by default: 2^28 (512 MiB in bf16; 1,765 rows of a 152k
     * vocabulary), in one chunk of logits, or in two of half the rows where a soft cap's backward keeps the capped logits.
     */
    public static final long DEFAULT_MAX_LOGITS = 1L << 28;

    /** The system property that overrides {@link #DEFAULT_MAX_LOGITS} (tests use a few rows to run many chunks). */
    public static final String MAX_LOGITS_PROPERTY = "fsdp4j.headMaxLogits";

    private final Backend backend;
    private final long maxLogits;
    /** The logits' soft cap, 0 for none. */
    private final float softcap;

    /** The most logits elements a chunk holds: {@value #MAX_LOGITS_PROPERTY}, else the default. */
    public static long maxLogits() {
        return Long.getLong(MAX_LOGITS_PROPERTY, DEFAULT_MAX_LOGITS);
    }

    public HeadLoss(Backend backend, long maxLogits) {
        this(backend, maxLogits, 0f);
    }

    /** A head whose logits are soft-capped at {@code softcap} (0: not capped). */
    public HeadLoss(Backend backend, long maxLogits, float softcap) {
        if (maxLogits < 1) {
            throw new IllegalArgumentException("a chunk of the head needs room for at least one row of logits");
        }
        if (!(softcap >= 0)) {
            throw new IllegalArgumentException("logit soft cap " + softcap);
        }
        this.backend = backend;
        this.maxLogits = maxLogits;
        this.softcap = softcap;
    }

    /** logits (R,V) = x lmHead^T, soft-capped when the head caps them. */
    public void logits(Tensor logits, Tensor x, Tensor lmHead) {
        backend.linearForward(logits, x, lmHead, null);
        if (softcap > 0) {
            backend.softcapForward(logits, softcap);
        }
    }

    /** A run of consecutive rows [start, start + length). */
    record Run(int start, int length) {}

    /**
     * Sum of the losses of the labelled rows. normed (N,C) the final norm's output, lmHead (V,C), targets (N) I32 with
     * -100 for rows without a label; {@code labelledRuns} the runs of rows that have one, or null (then every row is
     * taken, in chunks). With {@code gradScale != 0}: dNormed (N,C) written (zero on unlabelled rows) and dLmHead
     * accumulated, both for loss sum x gradScale; dLmHead null: a frozen head, its weight gradient not computed. lossPerRow (N) F32, if not null, receives each row's loss (0 unlabelled).
     */
    public double run(Tensor normed, Tensor lmHead, Tensor targets, int[] labelledRuns, float gradScale,
                      Tensor dLmHead, Tensor dNormed, Tensor lossPerRow) {
        int n = normed.dim(0), c = normed.dim(1), v = lmHead.dim(0);
        List<Run> runs = runs(labelledRuns, n);
        int labelled = runs.stream().mapToInt(Run::length).sum();
        boolean backward = gradScale != 0f;
        if (labelled < n) { // unlabelled rows get no product: their gradient and loss are zero
            if (backward) {
                backend.fill(dNormed, 0f);
            }
            if (lossPerRow != null) {
                backend.fill(lossPerRow, 0f);
            }
        }
        if (labelled == 0) {
            return 0;
        }
        // a soft cap's backward keeps the capped logits beside their gradient: half the rows, the same bytes
        int buffers = softcap > 0 && backward ? 2 : 1;
        int chunkRows = (int) Math.max(1, Math.min(labelled, maxLogits / buffers / v));
        double lossSum = 0;
        try (MemoryScope scope = backend.newScope(); var entered = scope.enter()) {
            Tensor logits = backend.allocateForWrite(normed.dtype(), chunkRows, v);
            Tensor capped = softcap > 0 && backward ? backend.allocateForWrite(normed.dtype(), chunkRows, v) : null;
            Tensor gathered = null, gatheredTargets = null, gatheredLoss = null, gatheredDx = null;
            for (List<Run> chunk : chunks(runs, chunkRows)) {
                int rows = chunk.stream().mapToInt(Run::length).sum();
                boolean contiguous = chunk.size() == 1;
                Tensor x, t, loss = null, dx = null;
                if (contiguous) {
                    int start = chunk.getFirst().start();
                    x = normed.view((long) start * c, rows, c);
                    t = targets.view(start, rows);
                    loss = lossPerRow == null ? null : lossPerRow.view(start, rows);
                    dx = backward ? dNormed.view((long) start * c, rows, c) : null;
                } else {
                    if (gathered == null) {
                        gathered = backend.allocateForWrite(normed.dtype(), chunkRows, c);
                        gatheredTargets = backend.allocateForWrite(DType.I32, chunkRows);
                        gatheredLoss = lossPerRow == null ? null : backend.allocateForWrite(DType.F32, chunkRows);
                        gatheredDx = backward ? backend.allocateForWrite(normed.dtype(), chunkRows, c) : null;
                    }
                    x = gathered.view(0, rows, c);
                    t = gatheredTargets.view(0, rows);
                    int at = 0;
                    for (Run r : chunk) {
                        backend.copy(normed.view((long) r.start() * c, r.length(), c), x.view((long) at * c, r.length(), c));
                        backend.copy(targets.view(r.start(), r.length()), t.view(at, r.length()));
                        at += r.length();
                    }
                    loss = gatheredLoss == null ? null : gatheredLoss.view(0, rows);
                    dx = backward ? gatheredDx.view(0, rows, c) : null;
                }
                Tensor z = logits.view(0, rows, v);
                logits(z, x, lmHead);
                if (capped != null) { // the capped logits, for the gradient through the cap
                    backend.copy(z, capped.view(0, rows, v));
                }
                lossSum += backend.crossEntropy(z, t, gradScale, loss); // z now holds dlogits when backward
                if (capped != null) {
                    backend.softcapBackward(z, capped.view(0, rows, v), softcap);
                }
                if (backward) {
                    backend.linearBackward(dx, dLmHead, null, z, x, lmHead);
                }
                if (!contiguous) { // scatter what belongs to the rows back to them
                    int at = 0;
                    for (Run r : chunk) {
                        if (loss != null) {
                            backend.copy(loss.view(at, r.length()), lossPerRow.view(r.start(), r.length()));
                        }
                        if (backward) {
                            backend.copy(dx.view((long) at * c, r.length(), c), dNormed.view((long) r.start() * c, r.length(), c));
                        }
                        at += r.length();
                    }
                }
            }
        }
        return lossSum;
    }

    /** The labelled runs as records, or one run of every row. */
    static List<Run> runs(int[] labelledRuns, int n) {
        if (labelledRuns == null) {
            return List.of(new Run(0, n));
        }
        List<Run> runs = new ArrayList<>(labelledRuns.length / 2);
        for (int i = 0; i < labelledRuns.length; i += 2) {
            runs.add(new Run(labelledRuns[i], labelledRuns[i + 1] - labelledRuns[i]));
        }
        return runs;
    }

    /** Consecutive groups of rows of at most {@code chunkRows} rows, runs split where a chunk fills. */
    static List<List<Run>> chunks(List<Run> runs, int chunkRows) {
        List<List<Run>> chunks = new ArrayList<>();
        List<Run> current = new ArrayList<>();
        int filled = 0;
        for (Run run : runs) {
            int start = run.start(), left = run.length();
            while (left > 0) {
                int take = Math.min(left, chunkRows - filled);
                current.add(new Run(start, take));
                filled += take;
                start += take;
                left -= take;
                if (filled == chunkRows) {
                    chunks.add(current);
                    current = new ArrayList<>();
                    filled = 0;
                }
            }
        }
        if (!current.isEmpty()) {
            chunks.add(current);
        }
        return chunks;
    }

    /**
     * The runs of rows whose target is not {@link TokenBatch#IGNORE}, as [start0, end0, start1, end1, ...]: read from
     * the host's targets when a batch is built.
     */
    public static int[] labelledRuns(int[] targets) {
        int[] runs = new int[16];
        int count = 0;
        for (int i = 0; i < targets.length; ) {
            if (targets[i] == TokenBatch.IGNORE) {
                i++;
                continue;
            }
            int start = i;
            while (i < targets.length && targets[i] != TokenBatch.IGNORE) {
                i++;
            }
            if (count + 2 > runs.length) {
                runs = java.util.Arrays.copyOf(runs, runs.length * 2);
            }
            runs[count++] = start;
            runs[count++] = i;
        }
        return java.util.Arrays.copyOf(runs, count);
    }
}
