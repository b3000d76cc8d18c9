package io.fsdp4j.model;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.List;

/**
 * A decoder-only language model written for one device, as stages over its units: the embeddings (unit 0),
 * each decoder block (units 1..L) and the final norm with the LM head (unit L+1). Each stage takes the full
 * flat parameter buffer of its unit and knows nothing of how that buffer came to be whole: a single-device run
 * holds it, the FSDP engine all-gathers it just before the call.
 *
 * <p>Gradients follow the backend's convention: parameter gradients are accumulated (+=) into the unit's flat
 * gradient buffer, which has the unit's layout.
 */
public interface CausalLM {

    ModelConfig config();

    /** Every unit's flat-buffer layout, in execution order. */
    List<UnitLayout> units();

    default int blockCount() {
        return units().size() - 2;
    }

    static int embeddingUnit() {
        return 0;
    }

    default int blockUnit(int layer) {
        return 1 + layer;
    }

    default int headUnit() {
        return units().size() - 1;
    }

    /**
     * Elements at the start of unit {@code unit}'s flat buffer that do not train (a frozen base under LoRA): the
     * stages compute no gradient for them (a frozen weight's product is left out of the backward). 0, the default:
     * every parameter trains. A block's gradient buffer holds the rest only ({@link #blockBackward}); a unit frozen
     * whole gets no gradient buffer ({@link #headLoss}).
     */
    default long frozenNumel(int unit) {
        return 0;
    }

    /**
     * The distinct attention shapes of a batch of {@code batch} sequences of {@code seqLen} tokens, one per kind of
     * layer (a sliding-window layer's differs from a global one's); empty for a model whose attention no engine but
     * fsdp4j's runs (the backend's choice of attention engine reads them: {@code CudaAttention.settle}).
     */
    default List<AttentionShape> attentionShapes(int batch, int seqLen) {
        return List.of();
    }

    /** Whether the head stage also reads (and accumulates gradients into) the embedding unit. */
    boolean headUsesEmbedding();

    /** x (N,C) = token embeddings of the batch. */
    Tensor embedForward(Tensor embeddingParams, TokenBatch batch);

    void embedBackward(Tensor embeddingGrads, TokenBatch batch, Tensor dx);

    BlockActivations blockForward(int layer, Tensor blockParams, Tensor x, TokenBatch batch);

    /**
     * A block's forward recomputed for its backward under full activation checkpointing: what {@link #blockBackward}
     * reads, bit for bit as {@link #blockForward} computes it; the block's output, which the backward does not read,
     * may be left out (null) with the work that only it needs. In fp8 the linears' casts may be kept in what it returns
     * for that backward ({@link io.fsdp4j.backend.Fp8Casts}): the block's parameters and the returned activations
     * then stay as they are, in memory, until the backward returns.
     */
    default BlockActivations blockRecompute(int layer, Tensor blockParams, Tensor x, TokenBatch batch) {
        return blockForward(layer, blockParams, x, batch);
    }

    /**
     * A block's forward for full activation checkpointing that keeps attention
     * ({@link io.fsdp4j.config.ActivationCheckpointing#FULL_KEEP_ATTENTION}): computes what {@link #blockForward}
     * does, allocating attention's output and log-sum-exp, and the block's output, while {@code kept} is entered and
     * everything else in the scope the caller entered (which it frees as soon as this returns). Returns those three
     * alone, for {@link #blockRecompute(int, Tensor, Tensor, TokenBatch, BlockActivations)}.
     */
    BlockActivations blockForwardKeepingAttention(int layer, Tensor blockParams, Tensor x, TokenBatch batch,
                                                  MemoryScope kept);

    /**
     * {@link #blockRecompute(int, Tensor, Tensor, TokenBatch)} with attention's output and log-sum-exp taken from
     * {@code keptAttention} ({@link #blockForwardKeepingAttention}'s) instead of computed again: the same bits, an
     * attention forward less.
     */
    BlockActivations blockRecompute(int layer, Tensor blockParams, Tensor x, TokenBatch batch,
                                    BlockActivations keptAttention);

    /**
     * A block's forward for selective activation checkpointing: computes what {@link #blockForward} does, but
     * allocates the activations that are cheap to recompute (element-wise ops and norms; each model's
     * {@code Activations} record names them) while {@code recomputable} is entered, so that the caller can free
     * them as soon as this returns. Returns the activations without them, for {@link #recomputeCheap}.
     */
    BlockActivations blockForwardSelective(int layer, Tensor blockParams, Tensor x, TokenBatch batch,
                                           MemoryScope recomputable);

    /**
     * The whole of a block's activations from those {@link #blockForwardSelective} kept: recomputes the cheap ones
     * (no matrix product, no attention), with the same arithmetic as the forward, so the backward is unchanged.
     */
    BlockActivations recomputeCheap(int layer, Tensor blockParams, BlockActivations kept, TokenBatch batch);

    /**
     * Returns dx (N,C), the gradient of the block's input; accumulates into blockGrads, or, with
     * {@code accumulateGrads} false, writes every element of blockGrads (whatever it held), which then need not be
     * zeroed first. blockGrads holds the gradients of what trains: the unit's elements from
     * {@link #frozenNumel} on, at their offsets less frozenNumel (the whole unit when nothing is frozen).
     */
    Tensor blockBackward(int layer, Tensor blockParams, Tensor blockGrads, BlockActivations saved, Tensor dOut,
                         TokenBatch batch, boolean accumulateGrads);

    /**
     * Final norm, LM head and cross-entropy against the batch's targets. Returns the sum of the per-token losses.
     * With {@code gradScale != 0}, also back-propagates d(loss sum * gradScale): writes dx (N,C) and accumulates
     * into headGrads (and embeddingGrads when the head is tied to the embeddings); a gradient buffer that is null
     * belongs to a frozen unit, whose gradient is not computed. lossPerRow (N) may be null.
     *
     * @param embeddingParams the embedding unit's parameters, needed only if {@link #headUsesEmbedding()}
     */
    double headLoss(Tensor headParams, Tensor embeddingParams, Tensor x, TokenBatch batch, float gradScale,
                    Tensor headGrads, Tensor embeddingGrads, Tensor dx, Tensor lossPerRow);

    /** Final norm and LM head: the logits (N,V) of x (N,C). Every model of {@link CausalLMs} has them. */
    default Tensor logits(Tensor headParams, Tensor embeddingParams, Tensor x) {
        throw new UnsupportedOperationException(getClass().getSimpleName() + " computes no logits");
    }

    /**
     * Empty caches for generating {@code batch} sequences of up to {@code capacity} tokens each, in {@code dtype}
     * (that of the activations: of the parameters the blocks compute with).
     */
    KvCache newKvCache(int batch, int capacity, DType dtype);

    /**
     * A block's forward for generation: what {@link #blockForward(int, Tensor, Tensor, TokenBatch)} computes, the
     * same code, except that the keys and values of the batch's tokens are written into {@code cache} at their
     * positions and each query attends to its sequence's cached tokens up to its own position (so that a sequence
     * is continued a token at a time). Returns the block's output (N,C); nothing is kept for a backward.
     */
    Tensor blockForward(int layer, Tensor blockParams, Tensor x, TokenBatch batch, KvCache cache);
}
