package io.fsdp4j.model;

import io.fsdp4j.config.ActivationCheckpointing;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.LongStream;

/**
 * The activations of one micro-batch, as a model's forward and backward allocate them: one entry per tensor, in
 * bytes. Each model states its own ({@code LlamaBlock.activationSizes} (Gemma's form included),
 * {@code BloomModel.activationSizes}, beside its {@code Activations} record; {@link CausalLMs#activationSizes}
 * picks one); the planner's memory model and the FSDP engine's accounting read them here, and a test holds them to
 * the bytes the engine keeps. Activations are in the gathered parameters' dtype; per-row statistics (1/rms, means,
 * log-sum-exp) are fp32.
 *
 * @param residual        one (N,C) tensor of the residual stream: a block's input or output, or an output gradient
 * @param kept            what selective checkpointing keeps of a block forward's scope until the block's backward
 *                        (the outputs of the matrix products and of attention, with its log-sum-exp; the block's
 *                        output last), the block's input aside
 * @param recomputed      what selective checkpointing frees when a block's forward returns and recomputes in its
 *                        backward (the norms' statistics and outputs, the MLP's activation)
 * @param attention       attention's output and log-sum-exp, entries of {@code kept}: what full checkpointing that
 *                        keeps attention keeps of a block's forward besides its output
 * @param firstBlockExtra what the first block alone keeps besides (BLOOM's normalised embeddings); empty for most
 * @param backward        a block backward's own tensors (each activation's gradient, attention's fp32 row sums)
 * @param head            the head's scope: the final norm's statistics and output, one chunk of logits, per-row losses
 *                        and the norm output's gradient
 */
public record ActivationSizes(long residual, long[] kept, long[] recomputed, long[] attention, long[] firstBlockExtra,
                              long[] backward, long[] head) {

    public ActivationSizes {
        kept = kept.clone();
        recomputed = recomputed.clone();
        attention = attention.clone();
        firstBlockExtra = firstBlockExtra.clone();
        backward = backward.clone();
        head = head.clone();
    }

    /** A block forward's whole scope, its input aside: {@link #kept} then {@link #recomputed}. */
    public long[] forward() {
        return LongStream.concat(Arrays.stream(kept), Arrays.stream(recomputed)).toArray();
    }

    @Override
    public long[] kept() {
        return kept.clone();
    }

    @Override
    public long[] recomputed() {
        return recomputed.clone();
    }

    @Override
    public long[] attention() {
        return attention.clone();
    }

    /**
     * A block forward's whole scope less attention's output and log-sum-exp: what full checkpointing that keeps
     * attention recomputes in the block's backward.
     */
    public long[] forwardLessAttention() {
        List<Long> left = new ArrayList<>(Arrays.stream(forward()).boxed().toList());
        for (long a : attention) {
            if (!left.remove(Long.valueOf(a))) {
                throw new IllegalStateException("attention's " + a + " bytes are not an entry of the forward's");
            }
        }
        return left.stream().mapToLong(Long::longValue).toArray();
    }

    @Override
    public long[] firstBlockExtra() {
        return firstBlockExtra.clone();
    }

    @Override
    public long[] backward() {
        return backward.clone();
    }

    @Override
    public long[] head() {
        return head.clone();
    }

    /**
     * Bytes one block keeps from its forward to its backward under {@code mode}, besides its input: its whole
     * forward scope (none), what selective checkpointing keeps of it, (full) a copy of its output alone, or (full
     * keeping attention) its output and attention's output and log-sum-exp.
     */
    public long keptPerBlock(ActivationCheckpointing mode) {
        return switch (mode) {
            case NONE -> sum(forward());
            case SELECTIVE -> sum(kept);
            case FULL -> residual;
            case FULL_KEEP_ATTENTION -> residual + sum(attention);
        };
    }

    /**
     * Bytes a model of {@code blocks} blocks keeps from a micro-batch's forward to its backward under {@code mode}:
     * the embeddings' output (the first block's input), then what each block keeps (its output is the next block's
     * input, the last one's the head's).
     */
    public long keptBytes(ActivationCheckpointing mode, int blocks) {
        return keptBytes(mode, blocks, 0);
    }

    /**
     * As {@link #keptBytes(ActivationCheckpointing, int)}, the last {@code notCheckpointed} blocks (all, if more)
     * keeping every activation ({@code fsdp.blocks_not_checkpointed}).
     */
    public long keptBytes(ActivationCheckpointing mode, int blocks, int notCheckpointed) {
        return keptBytes(mode, blocks, notCheckpointed, 0);
    }

    /**
     * As {@link #keptBytes(ActivationCheckpointing, int, int)}, and where {@code mode} recomputes blocks the
     * {@code selective} blocks before those (all that are left, if more) checkpointed selectively
     * ({@code fsdp.blocks_selective}, {@link ActivationCheckpointing#ofBlock(int, int, int, int)}).
     */
    public long keptBytes(ActivationCheckpointing mode, int blocks, int notCheckpointed, int selective) {
        int whole = Math.min(blocks, notCheckpointed);
        int partly = mode.recomputesBlocks() ? Math.min(blocks - whole, selective) : 0;
        int checkpointed = blocks - whole - partly;
        ActivationCheckpointing first = mode.ofBlock(0, blocks, notCheckpointed, selective);
        long firstBlock = blocks > 0 && !first.recomputesBlocks() ? sum(firstBlockExtra) : 0;
        return residual + checkpointed * keptPerBlock(mode) + partly * keptPerBlock(ActivationCheckpointing.SELECTIVE)
                + whole * keptPerBlock(ActivationCheckpointing.NONE) + firstBlock;
    }

    /**
     * The head's logits: one chunk of rows, (R,V), R the micro-batch's N rows up to what {@link HeadLoss#maxLogits()}
     * elements hold (2^28: 1,765 rows of a 152,064-token vocabulary); with a soft cap, two buffers of half the rows.
     */
    public long logits() {
        return head[2];
    }

    static long sum(long[] bytes) {
        return Arrays.stream(bytes).sum();
    }

    /** Entries in order, for a record of tensors built from several optional groups. */
    static long[] concat(long[]... parts) {
        return Arrays.stream(parts).flatMapToLong(Arrays::stream).toArray();
    }

    /**
     * The head's scope, the same for every model here: the final norm's 1/rms and output, one chunk of logits (turned
     * into their gradient in place), per-row losses, the gradient of the norm's output.
     */
    static long[] head(long n, long e, ModelConfig c) {
        long v = c.vocabSize(), rows = Math.max(1, Math.min(n, HeadLoss.maxLogits() / v)); // one chunk of rows
        return new long[] {4 * n, e * n * c.hidden(), e * rows * v, 4 * n, e * n * c.hidden()};
    }

    @Override
    public String toString() {
        return "ActivationSizes[residual=" + residual + ", kept=" + Arrays.toString(kept) + ", recomputed="
                + Arrays.toString(recomputed) + ", attention=" + Arrays.toString(attention) + ", firstBlockExtra=" + Arrays.toString(firstBlockExtra) + ", backward="
                + Arrays.toString(backward) + ", head=" + Arrays.toString(head) + "]";
    }
}
