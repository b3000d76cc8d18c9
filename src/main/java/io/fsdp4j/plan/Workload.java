package io.fsdp4j.plan;

import io.fsdp4j.UserError;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.FsdpSection;
import io.fsdp4j.config.Fp8Recipe;
import io.fsdp4j.config.ParamCopy;
import io.fsdp4j.config.Precision;

/**
 * What each GPU computes per optimizer step: {@code batch} sequences of {@code seq} tokens (one micro-batch), with
 * parameters gathered in {@code paramDtype} (activations are computed in it too) and gradients reduced in
 * {@code reduceDtype}; with {@code cpuOffload} ({@code fsdp.cpu_offload}) the fp32 master and gradient shards and
 * the AdamW moments live in host memory and AdamW runs on the host; {@code prefetch} ({@code fsdp.prefetch}) is how
 * many units ahead of the computing one have their all-gather started; {@code paramCopy} ({@code fsdp.param_copy}) is
 * whether the gathers round the fp32 master shard each time or send a half-precision copy kept beside it
 * ({@link #keptCopy}); {@code fp8Recipe} ({@code fsdp.fp8_recipe}) how fp8 products scale their operands;
 * {@code blocksNotCheckpointed} ({@code fsdp.blocks_not_checkpointed}) how many of the last blocks keep every
 * activation whatever {@code checkpointing} says; {@code blocksSelective} ({@code fsdp.blocks_selective}) how many
 * before those are checkpointed selectively where {@code checkpointing} recomputes whole blocks;
 * {@code documentTokens} the length of the documents packed into each sequence (chat conversations packed to
 * {@code seq}), whose tokens attend only within their document: 0 (or {@code seq} and more) for one document a
 * sequence. It changes attention's work and the engine that runs it (cuDNN takes no packed documents), nothing else.
 */
public record Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                       Precision reduceDtype, boolean cpuOffload, int prefetch, ParamCopy paramCopy,
                       Fp8Recipe fp8Recipe, int blocksNotCheckpointed, int blocksSelective, int documentTokens) {

    public Workload {
        if (seq < 1 || batch < 1) {
            throw new UserError("--seq and --batch must be at least 1");
        }
        if (prefetch < 0 || prefetch > FsdpSection.MAX_PREFETCH) {
            throw new UserError("--prefetch must be between 0 and " + FsdpSection.MAX_PREFETCH);
        }
        java.util.Objects.requireNonNull(paramCopy, "paramCopy");
        java.util.Objects.requireNonNull(fp8Recipe, "fp8Recipe");
        if (blocksNotCheckpointed < 0) {
            throw new UserError("--blocks-not-checkpointed must be at least 0");
        }
        if (blocksSelective < 0) {
            throw new UserError("--blocks-selective must be at least 0");
        }
        if (documentTokens < 0) {
            throw new UserError("--document-tokens must be at least 0 (0: one document a sequence)");
        }
    }

    /** One document a sequence. */
    public Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                    Precision reduceDtype, boolean cpuOffload, int prefetch, ParamCopy paramCopy, Fp8Recipe fp8Recipe,
                    int blocksNotCheckpointed, int blocksSelective) {
        this(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy, fp8Recipe,
                blocksNotCheckpointed, blocksSelective, 0);
    }

    /** The last {@code blocksNotCheckpointed} blocks keep every activation, the others as {@code checkpointing} says. */
    public Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                    Precision reduceDtype, boolean cpuOffload, int prefetch, ParamCopy paramCopy, Fp8Recipe fp8Recipe,
                    int blocksNotCheckpointed) {
        this(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy, fp8Recipe,
                blocksNotCheckpointed, 0);
    }

    /** Every block checkpointed as {@code checkpointing} says. */
    public Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                    Precision reduceDtype, boolean cpuOffload, int prefetch, ParamCopy paramCopy, Fp8Recipe fp8Recipe) {
        this(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy, fp8Recipe, 0);
    }

    /** fp8 products (if any) scaled per tensor ({@code fsdp.fp8_recipe: tensorwise}, the default). */
    public Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                    Precision reduceDtype, boolean cpuOffload, int prefetch, ParamCopy paramCopy) {
        this(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy,
                FsdpSection.DEFAULT_FP8_RECIPE);
    }

    /** Parameters rounded at each gather ({@code fsdp.param_copy: per_gather}, the default). */
    public Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                    Precision reduceDtype, boolean cpuOffload, int prefetch) {
        this(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, FsdpSection.DEFAULT_PARAM_COPY);
    }

    public Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                    Precision reduceDtype, boolean cpuOffload) {
        this(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, FsdpSection.DEFAULT_PREFETCH);
    }

    public Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                    Precision reduceDtype) {
        this(seq, batch, checkpointing, paramDtype, reduceDtype, false);
    }

    /** The benchmark's settings: seq 2048, batch 1, full checkpointing, bf16 parameters, fp32 reduction. */
    public static Workload benchmark() {
        return new Workload(2048, 1, ActivationCheckpointing.FULL, Precision.BF16, Precision.FP32);
    }

    public Workload withCheckpointing(ActivationCheckpointing mode) {
        return new Workload(seq, batch, mode, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy, fp8Recipe,
                blocksNotCheckpointed, blocksSelective, documentTokens);
    }

    public Workload withCpuOffload(boolean offload) {
        return new Workload(seq, batch, checkpointing, paramDtype, reduceDtype, offload, prefetch, paramCopy, fp8Recipe,
                blocksNotCheckpointed, blocksSelective, documentTokens);
    }

    public Workload withSeq(int tokens) {
        return new Workload(tokens, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy, fp8Recipe,
                blocksNotCheckpointed, blocksSelective, documentTokens);
    }

    public Workload withPrefetch(int depth) {
        return new Workload(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, depth, paramCopy, fp8Recipe,
                blocksNotCheckpointed, blocksSelective, documentTokens);
    }

    public Workload withFp8Recipe(Fp8Recipe recipe) {
        return new Workload(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy, recipe,
                blocksNotCheckpointed, blocksSelective, documentTokens);
    }

    public Workload withBlocksNotCheckpointed(int blocks) {
        return new Workload(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy, fp8Recipe,
                blocks, blocksSelective, documentTokens);
    }

    public Workload withBlocksSelective(int blocks) {
        return new Workload(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy, fp8Recipe,
                blocksNotCheckpointed, blocks, documentTokens);
    }

    /** Documents of {@code tokens} packed into each sequence (0: one a sequence). */
    public Workload withDocumentTokens(int tokens) {
        return new Workload(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, paramCopy,
                fp8Recipe, blocksNotCheckpointed, blocksSelective, tokens);
    }

    /**
     * The tokens a query's document spans: {@code documentTokens} where documents are packed shorter than the
     * sequence, else the sequence.
     */
    public int attentionSpan() {
        return attentionSpan(seq, documentTokens);
    }

    /** {@link #attentionSpan()} of sequences of {@code seq} tokens packing documents of {@code documentTokens}. */
    public static int attentionSpan(int seq, int documentTokens) {
        return documentTokens > 0 && documentTokens < seq ? documentTokens : seq;
    }

    /** Whether each sequence packs documents shorter than itself, whose tokens attend within their own. */
    public boolean packsDocuments() {
        return attentionSpan() < seq;
    }

    public Workload withParamCopy(ParamCopy copy) {
        return new Workload(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch, copy, fp8Recipe,
                blocksNotCheckpointed, blocksSelective, documentTokens);
    }

    /**
     * Whether each trained shard keeps its master's copy in the parameter dtype for the gathers, as
     * {@code FsdpPolicy.keptCopyDtype} and {@code ShardedUnit.Holding.training} decide: {@code fsdp.param_copy: kept},
     * half-precision parameters (bf16, fp16; fp8 gathers bf16), and the master on the device (offloaded, the staged
     * master is rounded at each gather). Frozen shards (LoRA's base) are held in the parameter dtype already: no copy.
     */
    public boolean keptCopy() {
        return paramCopy == ParamCopy.KEPT && paramDtype.isHalf() && !cpuOffload;
    }

    /** N, the rows (tokens) of one micro-batch on one GPU. */
    public long tokens() {
        return (long) seq * batch;
    }

    /** Bytes of one element of gathered parameters and of activations. */
    public int paramBytes() {
        return bytes(paramDtype);
    }

    /** Bytes of one element of a gradient reduction. */
    public int reduceBytes() {
        return bytes(reduceDtype);
    }

    static int bytes(Precision p) {
        return p.dtype().bytes();
    }

    /** Full checkpointing (attention kept or not): every block's forward is recomputed in its backward. */
    public boolean recompute() {
        return checkpointing.recomputesBlocks();
    }

    /**
     * Block {@code layer}'s checkpointing, of a model of {@code blocks}: none for the last
     * {@code blocksNotCheckpointed}, selective for the {@code blocksSelective} before them
     * ({@link ActivationCheckpointing#ofBlock(int, int, int, int)}, the engine's rule).
     */
    public ActivationCheckpointing checkpointing(int layer, int blocks) {
        return checkpointing.ofBlock(layer, blocks, blocksNotCheckpointed, blocksSelective);
    }

    /** Full checkpointing that keeps attention: its recompute leaves attention's forward out. */
    public boolean keepsAttention() {
        return checkpointing == ActivationCheckpointing.FULL_KEEP_ATTENTION;
    }

    /** Selective checkpointing: a block's norms and MLP activation are recomputed in its backward. */
    public boolean selective() {
        return checkpointing == ActivationCheckpointing.SELECTIVE;
    }
}
