package io.fsdp4j.config;

/** {@code fsdp.activation_checkpointing}: which activations are recomputed in backward instead of kept. */
public enum ActivationCheckpointing implements ConfigChoice {
    /** Keep every activation that backward needs. */
    NONE,
    /** Keep only each block's input; recompute the block's forward in its backward. */
    FULL,
    /**
     * As {@link #FULL}, but keep each block's attention output and its log-sum-exp as well: the backward recomputes
     * the block's forward except attention, the one part of it that grows with the square of the sequence. Per block
     * 2N*A + 4*B*NH*T bytes more than full (Qwen2.5-7B at B=1: 14 MiB plus 0.2 MiB at T=2048, 112 MiB plus 1.8 MiB at
     * T=16384, the size of the block's input), for an attention forward less per block and step: about 2% of a
     * Qwen2.5-7B step at 8192 tokens and 4% at 16384, where that forward is 2.5% and 4% of the step. The results are
     * the same bits as full's: the kept output is what the recompute would compute again.
     */
    FULL_KEEP_ATTENTION,
    /**
     * Keep the outputs of the matrix products and of attention (with its log-sum-exp), recompute the element-wise
     * ones (norms and the MLP's activation function) in backward from the kept tensors; the models' {@code Activations}
     * records mark which are recomputed, {@code CausalLM.blockForwardSelective} and {@code recomputeCheap} do it.
     *
     * <p>Why this split. What a tensor costs to keep is its bytes; what it costs to recompute is the work since the
     * last kept tensor. A matrix product or attention is the expensive kind (tensor-core FLOPs, and flash attention's
     * forward again at long sequences); a norm or SwiGLU reads and writes a few (N,C) or (N,F) rows once. So the
     * backward does no matrix product or attention again, only a few memory-bound passes. Llama family, bf16, per
     * block (N = B*T rows, Q = (NH+2NKV)*HS, A = NH*HS, fp32 row statistics), kept from forward to backward:
     * <ul>
     *   <li>none: 2N(4C + Q + A + 3F) + 8N + 4*B*NH*T bytes (input, normed1, qkv, attention, mid, normed2, gate|up,
     *       hidden; two 1/rms, the log-sum-exp);</li>
     *   <li>selective: 2N(2C + Q + A + 2F) + 4*B*NH*T (drops normed1, normed2, hidden and the 1/rms), recomputed at
     *       about 10*N*(C + F) element-wise FLOPs: two rmsnorms and a SwiGLU;</li>
     *   <li>full: 2NC (the input), recomputing the whole forward: 2N(C*Q + A*C + 3C*F) GEMM FLOPs plus attention.</li>
     * </ul>
     * Qwen2.5-7B at B=1, T=2048: 310, 208 and 14 MiB per block (8.5, 5.7 and 0.4 GiB for 28 blocks); selective
     * recomputes ~0.3 GB of memory traffic per block (well under 0.1 ms on an H200) where full recomputes ~0.95
     * TFLOP of GEMMs and an attention forward (~1.6 ms). The other usual split, keeping attention's inputs and
     * outputs and recomputing the MLP, keeps only 2N(2C + Q + A) but redoes the gate|up product, 4NCF FLOPs (about
     * 60% of the block's GEMMs): a middle ground between this and full that fsdp4j does not offer. BLOOM likewise:
     * 2N*16C down to 2N*10C (input, qkv, attention, mid, up kept; two LayerNorms and the GELU recomputed).
     */
    SELECTIVE;

    /**
     * Block {@code layer}'s checkpointing, of a model of {@code blocks}, under this mode with the last
     * {@code notCheckpointed} blocks left out ({@code fsdp.blocks_not_checkpointed}): none for those, this for the
     * others. The one rule the engine runs by and the planner models.
     */
    public ActivationCheckpointing ofBlock(int layer, int blocks, int notCheckpointed) {
        return ofBlock(layer, blocks, notCheckpointed, 0);
    }

    /**
     * As {@link #ofBlock(int, int, int)}, and where this mode recomputes blocks the {@code selective} blocks before
     * those left out ({@code fsdp.blocks_selective}) under {@link #SELECTIVE}: from the last block back, none, then
     * selective, then this mode.
     *
     * <p>Why selective beside none. Where memory binds, each block that is not recomputed costs the bytes it keeps:
     * selective keeps a block's matrix products' and attention's outputs and drops its norms' outputs and the MLP's
     * activation (Qwen2.5-7B at 16384 tokens: 1.63 GiB against none's 2.42), recomputed at the cost of a few
     * element-wise passes (under 1 ms on an H200) where full checkpointing redoes every product of the block. So the
     * memory that leaves N blocks out of checkpointing leaves about 1.5 N out selectively.
     */
    public ActivationCheckpointing ofBlock(int layer, int blocks, int notCheckpointed, int selective) {
        if (layer >= blocks - notCheckpointed) {
            return NONE;
        }
        return recomputesBlocks() && layer >= blocks - notCheckpointed - selective ? SELECTIVE : this;
    }

    /** Whether each block's forward is recomputed in its backward (full, with or without attention kept). */
    public boolean recomputesBlocks() {
        return this == FULL || this == FULL_KEEP_ATTENTION;
    }

    @Override
    public String toString() {
        return spelling();
    }
}
