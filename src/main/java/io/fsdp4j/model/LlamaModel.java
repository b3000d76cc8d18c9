package io.fsdp4j.model;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.util.List;

/**
 * The Llama family: Llama, Mistral (sliding-window attention), Qwen2 (q/k/v biases), Qwen3 (an RMSNorm of each
 * query and key head, q_norm and k_norm, before the rotation), Phi-3 (q|k|v and gate|up fused in the checkpoint,
 * longrope for its long-context variants), and Gemma 2 and 3. A block ({@link LlamaBlock}) is
 * x -> x + attention(rmsnorm(x)) -> + mlp(rmsnorm(.)), with rotary position embedding on q and k,
 * grouped-query attention and a SwiGLU MLP.
 *
 * <p>Gemma's block is the same skeleton with these differences, each in one place: the embeddings are scaled by
 * sqrt(C) (rounded to the compute type, as transformers does) and the pad token's row gets no gradient (here); every
 * RMSNorm multiplies by (1 + w) ({@link LlamaNorm}); norms after attention and after the MLP as well as before
 * (x -> mid = x + postnorm(attention(norm(x))) -> mid + postnorm(mlp(prenorm(mid)))); scores q.k /
 * sqrt(query_pre_attn_scalar), soft-capped where attn_logit_softcapping is set (Gemma 2); a GeGLU MLP (GELU's tanh
 * approximation); layers sliding (a window of {@link ModelConfig#slidingWindow} tokens, rope base
 * rope_local_base_freq, unscaled: {@link LlamaRope}) or global (full causal attention, the config's rope base and
 * scaling); and logits soft-capped where final_logit_softcapping is set ({@link HeadLoss}). Gemma 3 has Qwen3's head
 * norms, Gemma 2 not.
 *
 * <p>The units' layout, with LoRA's adapters after each block's base: {@link LlamaLayout}; a block's parameters as
 * views of its flat buffer: {@link LlamaBlockParams}.
 */
public final class LlamaModel implements CausalLM {
    private final ModelConfig config;
    private final Backend backend;
    private final HeadLoss headLoss;
    private final List<UnitLayout> units;
    private final LlamaNorm norm;
    private final LlamaBlock block;
    /** Whether the blocks carry LoRA adapters, their base frozen. */
    private final boolean adapted;
    /** Elements of a block's flat buffer before its adapters: the frozen base under LoRA. */
    private final long baseBlockNumel;
    /** Gemma's settings (null for the other families). */
    private final ModelConfig.Gemma gemma;

    public LlamaModel(ModelConfig config, Backend backend) {
        this(config, backend, null);
    }

    /** With low-rank adapters on the linears {@code lora} names (null: none, every weight trains). */
    public LlamaModel(ModelConfig config, Backend backend, LoraSpec lora) {
        this(config, backend, lora, BlockLinears.PARAM_DTYPE);
    }

    /** As above, the blocks' linears computing as {@code linears} says. */
    public LlamaModel(ModelConfig config, Backend backend, LoraSpec lora, BlockLinears linears) {
        this.config = config;
        this.backend = backend;
        this.gemma = config.gemma();
        this.headLoss = new HeadLoss(backend, HeadLoss.maxLogits(), gemma == null ? 0f : (float) gemma.finalSoftcap());
        this.units = layout(config, lora);
        this.baseBlockNumel = layout(config).get(1).numel();
        BlockAdapters adapters;
        if (lora == null) {
            adapters = BlockAdapters.NONE;
        } else {
            long[] frozen = new long[config.layers()];
            java.util.Arrays.fill(frozen, baseBlockNumel);
            adapters = new BlockAdapters(java.util.Collections.nCopies(config.layers(),
                    LlamaLayout.adapters(config, lora, units.get(1))), lora.dropout(), frozen);
        }
        this.adapted = adapters.on();
        this.norm = new LlamaNorm(backend, config);
        this.block = new LlamaBlock(config, backend, new LlamaBlockParams(config, units.get(1)), norm,
                new LlamaRope(config, backend), adapters, linears);
    }

    /** The units of a model of this family, with Hugging Face parameter names. */
    public static List<UnitLayout> layout(ModelConfig c) {
        return LlamaLayout.units(c);
    }

    /**
     * The units with LoRA's adapters appended to each block, after its base parameters, with PEFT's names (less its
     * {@code base_model.model.} prefix). Without LoRA (null), {@link #layout(ModelConfig)}.
     */
    public static List<UnitLayout> layout(ModelConfig c, LoraSpec lora) {
        return LlamaLayout.units(c, lora);
    }

    @Override
    public long frozenNumel(int unit) {
        if (!adapted) {
            return 0;
        }
        return unit == CausalLM.embeddingUnit() || unit == headUnit() ? units.get(unit).numel() : baseBlockNumel;
    }

    @Override
    public ModelConfig config() {
        return config;
    }

    @Override
    public List<UnitLayout> units() {
        return units;
    }

    @Override
    public List<AttentionShape> attentionShapes(int batch, int seqLen) {
        var shapes = new java.util.LinkedHashSet<AttentionShape>();
        for (int layer = 0; layer < config.layers(); layer++) {
            shapes.add(block.attentionShape(layer, batch, seqLen));
        }
        return List.copyOf(shapes);
    }

    @Override
    public boolean headUsesEmbedding() {
        return config.tieEmbeddings();
    }

    /** Per-row statistics (1/rms, log-sum-exp), fp32: written whole by the op that computes them, not zeroed first. */
    private Tensor rowStats(int... shape) {
        return backend.allocateForWrite(DType.F32, shape);
    }

    /** Activations, in the type of the parameters they are computed with; each written whole by its op. */
    private Tensor act(Tensor params, int... shape) {
        return backend.allocateForWrite(params.dtype(), shape);
    }

    private void checkLength(TokenBatch batch) {
        if (batch.seqLen() > config.maxPositions()) {
            throw new io.fsdp4j.UserError("sequence length " + batch.seqLen() + " exceeds the model's "
                    + "max_position_embeddings of " + config.maxPositions() + beyondMaxPositions());
        }
    }

    /**
     * Why longer sequences are refused, for dynamic rope scaling: transformers then recomputes the base from the
     * longest position of the batch, so every position's rotation depends on the batch's length; fsdp4j keeps one
     * table per model and does not.
     */
    private String beyondMaxPositions() {
        return config.ropeScaling().type() != RopeScaling.Type.DYNAMIC ? "; use a shorter data.seq_len"
                : " (rope_type dynamic: transformers would rescale every position's frequencies to the sequence's "
                + "length, which fsdp4j does not do); use a data.seq_len of at most " + config.maxPositions();
    }

    /** Gemma's sqrt(C), in the type of the embeddings as transformers multiplies them. */
    private float embedScale(Tensor embeddings) {
        float s = (float) Math.sqrt(config.hidden());
        return switch (embeddings.dtype()) {
            case BF16 -> Half.roundBf16(s);
            case F16 -> Half.roundF16(s);
            default -> s;
        };
    }

    @Override
    public Tensor embedForward(Tensor embeddingParams, TokenBatch batch) {
        checkLength(batch);
        Tensor x = act(embeddingParams, batch.rows(), config.hidden());
        backend.embeddingForward(x, batch.ids(), embeddingTable(embeddingParams));
        if (gemma != null) {
            backend.scale(x, embedScale(embeddingParams));
        }
        return x;
    }

    /**
     * dTable += scatter of dx; Gemma's: of dx * sqrt(C), and the row of pad_token_id keeps what it had (transformers'
     * padding_idx: looking the pad token up trains nothing; a tied head's gradient into that row, added elsewhere,
     * stays).
     */
    @Override
    public void embedBackward(Tensor embeddingGrads, TokenBatch batch, Tensor dx) {
        Tensor table = embeddingTable(embeddingGrads);
        if (gemma == null) {
            backend.embeddingBackward(table, batch.ids(), dx);
            return;
        }
        int C = config.hidden();
        Tensor scaled = backend.allocateForWrite(dx.dtype(), dx.shape());
        backend.copy(dx, scaled);
        backend.scale(scaled, embedScale(dx));
        Tensor padRow = null, kept = null;
        if (gemma.padTokenId() >= 0) {
            padRow = table.view((long) gemma.padTokenId() * C, C);
            kept = backend.allocateForWrite(padRow.dtype(), C);
            backend.copy(padRow, kept);
        }
        backend.embeddingBackward(table, batch.ids(), scaled);
        if (padRow != null) {
            backend.copy(kept, padRow);
        }
    }

    private Tensor embeddingTable(Tensor unit) {
        return unit.view(0, config.vocabSize(), config.hidden());
    }

    @Override
    public BlockActivations blockForward(int layer, Tensor w, Tensor x, TokenBatch batch) {
        return block.forward(layer, w, x, batch, MemoryScope.NONE, null, true);
    }

    /**
     * Without the MLP's down projection and the residual add (Llama's form: the backward reads neither their output
     * nor anything only they compute): a ninth of a block's matrix work less in every recomputed forward. Gemma's
     * post-MLP norm reads the projection, so its form computes everything but the last add.
     */
    @Override
    public BlockActivations blockRecompute(int layer, Tensor w, Tensor x, TokenBatch batch) {
        return block.forward(layer, w, x, batch, MemoryScope.NONE, null, false);
    }

    @Override
    public BlockActivations blockForwardKeepingAttention(int layer, Tensor w, Tensor x, TokenBatch batch,
                                                         MemoryScope kept) {
        return block.forward(layer, w, x, batch, MemoryScope.NONE, null, true, kept, null).attentionAndOutput();
    }

    /** As {@link #blockRecompute(int, Tensor, Tensor, TokenBatch)}, attention's output and lse taken as kept. */
    @Override
    public BlockActivations blockRecompute(int layer, Tensor w, Tensor x, TokenBatch batch,
                                           BlockActivations keptAttention) {
        return block.forward(layer, w, x, batch, MemoryScope.NONE, null, false, MemoryScope.NONE,
                LlamaBlock.activations(keptAttention));
    }

    @Override
    public Tensor blockForward(int layer, Tensor w, Tensor x, TokenBatch batch, KvCache cache) {
        return block.forward(layer, w, x, batch, MemoryScope.NONE, cache, true).output();
    }

    @Override
    public BlockActivations blockForwardSelective(int layer, Tensor w, Tensor x, TokenBatch batch,
                                                  MemoryScope recomputable) {
        return block.forward(layer, w, x, batch, recomputable, null, true).withoutRecomputed();
    }

    @Override
    public BlockActivations recomputeCheap(int layer, Tensor w, BlockActivations kept, TokenBatch batch) {
        return block.recomputeCheap(w, kept, batch);
    }

    @Override
    public Tensor blockBackward(int layer, Tensor w, Tensor g, BlockActivations saved, Tensor dOut, TokenBatch batch,
                                boolean accumulateGrads) {
        return block.backward(layer, w, g, saved, dOut, batch, accumulateGrads);
    }

    @Override
    public KvCache newKvCache(int batch, int capacity, DType dtype) {
        if (capacity > config.maxPositions()) {
            throw new io.fsdp4j.UserError("generation of " + capacity + " tokens exceeds the model's "
                    + "max_position_embeddings of " + config.maxPositions() + beyondMaxPositions());
        }
        return KvCache.allocate(backend, config.layers(), batch, capacity, config.kvHeads() * config.headDim(), dtype);
    }

    /** Logits (N,V) of the final hidden states x (N,C): the final norm, then the LM head (soft-capped if set). */
    @Override
    public Tensor logits(Tensor headParams, Tensor embeddingParams, Tensor x) {
        int C = config.hidden(), N = Math.toIntExact(x.numel() / C);
        Tensor normed = act(headParams, N, C);
        norm.forward(normed, rowStats(N), x, headParams.view(0, C));
        Tensor lmHead = config.tieEmbeddings() ? embeddingTable(embeddingParams)
                : headParams.view(C, config.vocabSize(), C);
        Tensor logits = act(headParams, N, config.vocabSize());
        headLoss.logits(logits, normed, lmHead);
        return logits;
    }

    @Override
    public double headLoss(Tensor headParams, Tensor embeddingParams, Tensor x, TokenBatch batch, float gradScale,
                           Tensor headGrads, Tensor embeddingGrads, Tensor dx, Tensor lossPerRow) {
        int N = batch.rows(), C = config.hidden(), V = config.vocabSize();
        Tensor normWeight = headParams.view(0, C);
        Tensor lmHead = config.tieEmbeddings() ? embeddingTable(embeddingParams) : headParams.view(C, V, C);
        Tensor rstd = rowStats(N), normed = act(headParams, N, C);
        norm.forward(normed, rstd, x, normWeight);
        boolean backward = gradScale != 0f;
        Tensor lmHeadGrads = config.tieEmbeddings() ? embeddingGrads : headGrads; // null: frozen, no product for it
        Tensor dLmHead = !backward || lmHeadGrads == null ? null
                : config.tieEmbeddings() ? embeddingTable(lmHeadGrads) : lmHeadGrads.view(C, V, C);
        Tensor dNormed = backward ? act(headParams, N, C) : null;
        double lossSum = headLoss.run(normed, lmHead, batch.targets(), batch.labelledRuns(), gradScale, dLmHead, dNormed,
                lossPerRow);
        if (backward) {
            norm.backward(dx, norm.grad(headGrads, h -> h.view(0, C), C), dNormed, x, normWeight, rstd, true);
        }
        return lossSum;
    }
}
