package io.fsdp4j.plan;

import io.fsdp4j.model.Architecture;
import io.fsdp4j.model.HeadLoss;
import java.util.stream.LongStream;

/**
 * The activation buffers a block and the head allocate, one entry per tensor in bytes, following the models'
 * forward and backward ({@code LlamaModel}, {@code BloomModel}): N rows (tokens of the micro-batch), C width,
 * Q the q|k|v width, A = NH*HS, U the MLP's first product (2F for SwiGLU), F the MLP width. Activations are in
 * the parameters' dtype (e bytes); per-row statistics (1/rms, means, log-sum-exp) are fp32. Qwen3's head norms
 * keep q|k|v twice (before and after them) and a 1/rms per query and key head; Gemma 3's norms after attention and
 * after the MLP keep their inputs and 1/rms.
 */
final class Activations {
    private Activations() {}

    /**
     * A block forward's scope: what its saved-activations record holds except the input, {@link #blockKept} and
     * {@link #blockRecomputed}. Under full checkpointing it lives only while the block computes (and again while its
     * backward recomputes it); without, from the block's forward to its backward.
     */
    static long[] blockForward(ModelShape m, Workload w) {
        return LongStream.concat(LongStream.of(blockKept(m, w)), LongStream.of(blockRecomputed(m, w))).toArray();
    }

    /**
     * What selective checkpointing keeps of a block forward's scope until the block's backward: the outputs of the
     * matrix products (q|k|v, mid, the MLP's first product, the output) and of attention, with its log-sum-exp.
     */
    static long[] blockKept(ModelShape m, Workload w) {
        long n = w.tokens(), e = w.paramBytes(), c = m.config().hidden();
        long lse = 4L * w.batch() * m.config().heads() * w.seq();
        long[] kept = {e * n * m.qkvWidth(), e * n * m.attentionWidth(), lse, e * n * c, e * n * m.mlpUpWidth(),
            e * n * c};
        if (m.config().architecture().normsQueriesAndKeys()) { // Qwen3, Gemma 3: q|k|v before the head norms too,
            // and each query and key head's 1/rms
            kept = LongStream.concat(LongStream.of(kept), LongStream.of(e * n * m.qkvWidth(),
                    4 * n * m.config().heads(), 4 * n * m.config().kvHeads())).toArray();
        }
        if (m.config().architecture() == Architecture.GEMMA3) { // the inputs of the norms after attention and MLP
            kept = LongStream.concat(LongStream.of(kept), LongStream.of(e * n * c, 4 * n, e * n * c, 4 * n)).toArray();
        }
        return kept;
    }

    /**
     * What selective checkpointing frees at the end of a block's forward and recomputes in its backward: both norms'
     * statistics and outputs, and the MLP's activation (F wide).
     */
    static long[] blockRecomputed(ModelShape m, Workload w) {
        long n = w.tokens(), e = w.paramBytes(), c = m.config().hidden();
        long stats = 4 * n;
        boolean layerNorm = !m.gatedMlp(); // LayerNorm keeps a mean beside 1/std
        return layerNorm
                ? new long[] {stats, stats, e * n * c, stats, stats, e * n * c, e * n * m.config().intermediate()}
                : new long[] {stats, e * n * c, stats, e * n * c, e * n * m.config().intermediate()};
    }

    /** A block backward's own tensors: the gradient of each activation, and attention's fp32 row sums (delta). */
    static long[] blockBackward(ModelShape m, Workload w) {
        long n = w.tokens(), e = w.paramBytes(), c = m.config().hidden();
        long delta = 4L * w.batch() * m.config().heads() * w.seq();
        long[] own = {e * n * m.config().intermediate(), e * n * m.mlpUpWidth(), e * n * c, e * n * c,
            e * n * m.attentionWidth(), e * n * m.qkvWidth(), delta, e * n * c, e * n * c};
        return m.config().architecture() != Architecture.GEMMA3 ? own // Gemma 3: the gradients of the two post-norms' inputs
                : LongStream.concat(LongStream.of(own), LongStream.of(e * n * c, e * n * c)).toArray();
    }

    /** One (N,C) residual-stream tensor: a block's input (kept for recomputation) or an output gradient. */
    static long residual(ModelShape m, Workload w) {
        return w.paramBytes() * w.tokens() * m.config().hidden();
    }

    /** The head's scope: final norm output, 1/rms, logits (N,V) (turned into their gradient in place), per-row losses, and the norm output's gradient. */
    static long[] head(ModelShape m, Workload w) {
        long n = w.tokens(), e = w.paramBytes(), c = m.config().hidden();
        return new long[] {4 * n, e * n * c, logits(m, w), 4 * n, e * n * c};
    }

    /**
     * The logits the head holds at once: one chunk of rows, (R,V), R the micro-batch's tokens up to what
     * {@link HeadLoss#maxLogits()} elements hold (2^28: at 16k tokens and a 152k vocabulary, 1,765 of 16,384 rows).
     */
    static long logits(ModelShape m, Workload w) {
        long v = m.config().vocabSize();
        long rows = Math.max(1, Math.min(w.tokens(), HeadLoss.maxLogits() / v));
        return w.paramBytes() * rows * v;
    }
}
