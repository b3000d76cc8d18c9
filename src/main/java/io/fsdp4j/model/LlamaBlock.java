package io.fsdp4j.model;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.Fp8Casts;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.List;
import java.util.Objects;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;

/**
 * A Llama-family decoder block, forward and backward over its flat buffer: x -> x + attention(rmsnorm(x)) ->
 * + mlp(rmsnorm(.)), with rotary position embedding on q and k, grouped-query attention and a SwiGLU MLP; Qwen3's
 * and Gemma 3's RMSNorm of each query and key head before the rotation; Gemma's norms after attention and after the
 * MLP as well ({@link LlamaModel} lists Gemma's differences), its GeGLU, sliding and global layers and soft-capped
 * scores. The LoRA adapters' products are added beside their linears' ({@link BlockAdapters}).
 */
final class LlamaBlock {
    private final ModelConfig config;
    private final Backend backend;
    private final LlamaBlockParams params;
    private final LlamaNorm norm;
    private final LlamaRope rope;
    /** The adapters of the blocks' linears (every block's at the same offsets): none without LoRA. */
    private final BlockAdapters adapters;
    /** Gemma's settings (null for the other families). */
    private final ModelConfig.Gemma gemma;
    /** How the linears compute: in the parameters' type, or fp8. */
    private final BlockLinears linears;

    LlamaBlock(ModelConfig config, Backend backend, LlamaBlockParams params, LlamaNorm norm, LlamaRope rope,
               BlockAdapters adapters, BlockLinears linears) {
        this.linears = linears;
        this.config = config;
        this.backend = backend;
        this.params = params;
        this.norm = norm;
        this.rope = rope;
        this.adapters = adapters;
        this.gemma = config.gemma();
    }

    /**
     * What a block's forward saves for its backward. Shapes: N rows, C width, F MLP width. Under selective
     * checkpointing the cheap ones, marked (recomputed), are left null from forward to backward and recomputed there
     * from the input, mid and gateUp: two rmsnorms and a SwiGLU, element-wise work, while every matrix product and
     * the attention are kept (the reasons and the bytes: {@link io.fsdp4j.config.ActivationCheckpointing#SELECTIVE}).
     *
     * @param input (N,C) block input, the residual stream
     * @param rstd1 (N) attention norm's 1/rms (recomputed)
     * @param normed1 (N,C) attention norm output (recomputed)
     * @param qkvRaw (N, (NH+2NKV)*HS) projected q|k|v before the head norms (Qwen3, Gemma 3; null without them)
     * @param rstdQ (N,NH) each query head's 1/rms (null without head norms)
     * @param rstdK (N,NKV) each key head's 1/rms (null without head norms)
     * @param qkv (N, (NH+2NKV)*HS) projected q|k|v, after the head norms and rotary embedding
     * @param attention (N, NH*HS) attention output
     * @param lse (B,NH,T) attention log-sum-exp
     * @param attnOut (N,C) attention output projected, before the norm after attention (Gemma; null without it)
     * @param rstdAttnOut (N) that norm's 1/rms (Gemma; null without it)
     * @param mid (N,C) residual stream after attention
     * @param rstd2 (N) MLP norm's 1/rms (recomputed)
     * @param normed2 (N,C) MLP norm output (recomputed)
     * @param gateUp (N,2F) gate and up projections
     * @param hidden (N,F) silu(gate) * up, or gelu(gate) * up (recomputed)
     * @param mlpOut (N,C) the MLP's output, before the norm after the MLP (Gemma; null without it)
     * @param rstdMlpOut (N) that norm's 1/rms (Gemma; null without it)
     * @param output (N,C) block output
     * @param casts the linears' fp8 casts a forward recomputed for the backward kept for it (null: none kept)
     */
    record Activations(Tensor input, Tensor rstd1, Tensor normed1, Tensor qkvRaw, Tensor rstdQ, Tensor rstdK,
                       Tensor qkv, Tensor attention, Tensor lse, Tensor attnOut, Tensor rstdAttnOut, Tensor mid,
                       Tensor rstd2, Tensor normed2, Tensor gateUp, Tensor hidden, Tensor mlpOut,
                       Tensor rstdMlpOut, Tensor output, Fp8Casts casts)
            implements BlockActivations {

        /** Attention's output and log-sum-exp, and the block's output: what full checkpointing keeping attention keeps. */
        Activations attentionAndOutput() {
            return new Activations(null, null, null, null, null, null, null, attention, lse, null, null, null, null, null,
                    null, null, null, null, output, null);
        }

        /** These activations less the recomputed ones. */
        Activations withoutRecomputed() {
            return new Activations(input, null, null, qkvRaw, rstdQ, rstdK, qkv, attention, lse, attnOut, rstdAttnOut,
                    mid, null, null, gateUp, null, mlpOut, rstdMlpOut, output, null);
        }

        @Override
        public List<Tensor> tensors() {
            return Stream.of(input, rstd1, normed1, qkvRaw, rstdQ, rstdK, qkv, attention, lse, attnOut, rstdAttnOut,
                    mid, rstd2, normed2, gateUp, hidden, mlpOut, rstdMlpOut, output).filter(Objects::nonNull).toList();
        }
    }

    /**
     * The bytes of {@link Activations} and of a block's backward for {@code batch} sequences of {@code seq} tokens,
     * activations of {@code e} bytes an element: kept by selective checkpointing qkv (and Qwen3's qkvRaw, rstdQ,
     * rstdK), attention, lse, mid, gateUp, output; recomputed rstd1, normed1, rstd2, normed2, hidden.
     */
    static ActivationSizes activationSizes(ModelConfig c, int seq, int batch, int e) {
        if (c.gemma() != null) {
            return gemmaActivationSizes(c, seq, batch, e);
        }
        long n = (long) seq * batch, C = c.hidden(), F = c.intermediate(), Q = c.qkvWidth();
        long A = (long) c.heads() * c.headDim(), lse = 4L * batch * c.heads() * seq;
        long[] headNorms = c.architecture().normsQueriesAndKeys()
                ? new long[] {e * n * Q, 4 * n * c.heads(), 4 * n * c.kvHeads()} : new long[0];
        long[] kept = ActivationSizes.concat(headNorms, new long[] {e * n * Q, e * n * A, lse, e * n * C,
            e * n * 2 * F, e * n * C});
        long[] recomputed = {4 * n, e * n * C, 4 * n, e * n * C, e * n * F};
        long[] backward = {e * n * F, e * n * C, e * n * C, e * n * A, e * n * Q, lse, e * n * C, e * n * C};
        // dHidden, dNormed2, dMid, dAttention, dQkv, attention's delta, dNormed1, dx (dGateUp is written over gateUp)
        return new ActivationSizes(e * n * C, kept, recomputed, new long[] {e * n * A, lse}, new long[0], backward,
                ActivationSizes.head(n, e, c));
    }

    /**
     * Gemma's form of the block (config.gemma() set): the bytes of {@link Activations} and of a block's backward for
     * {@code batch} sequences of {@code seq} tokens, activations of {@code e} bytes an element: kept by selective
     * checkpointing qkvRaw, rstdQ, rstdK, qkv, attention, lse, attnOut, rstdAttnOut, mid, gateUp, mlpOut, rstdMlpOut,
     * output; recomputed rstd1, normed1, rstd2, normed2, hidden.
     */
    private static ActivationSizes gemmaActivationSizes(ModelConfig c, int seq, int batch, int e) {
        long n = (long) seq * batch, C = c.hidden(), F = c.intermediate(), Q = c.qkvWidth();
        long A = (long) c.heads() * c.headDim(), lse = 4L * batch * c.heads() * seq;
        long[] kept = {e * n * Q, 4 * n * c.heads(), 4 * n * c.kvHeads(), e * n * Q, e * n * A, lse, e * n * C, 4 * n,
            e * n * C, e * n * 2 * F, e * n * C, 4 * n, e * n * C};
        long[] recomputed = {4 * n, e * n * C, 4 * n, e * n * C, e * n * F};
        long[] backward = {e * n * C, e * n * F, e * n * C, e * n * C, e * n * C, e * n * A, e * n * Q, lse, e * n * C,
            e * n * C}; // dMlpOut, dHidden, dNormed2, dMid, dAttnOut, dAttention, dQkv, attention's delta, dNormed1,
        // dx (dGateUp is written over gateUp)
        return new ActivationSizes(e * n * C, kept, recomputed, new long[] {e * n * A, lse}, new long[0], backward,
                ActivationSizes.head(n, e, c));
    }

    /** Whether layer {@code layer} attends within the sliding window: Gemma's sliding layers, or every layer. */
    private boolean sliding(int layer) {
        return gemma == null || gemma.slidingLayers().get(layer);
    }

    /** Whether each query and key head is RMS-normalised before the rotation (Qwen3). */
    private boolean headNorms() {
        return config.architecture().normsQueriesAndKeys();
    }

    /** Per-row statistics (1/rms, log-sum-exp), fp32: written whole by the op that computes them, not zeroed first. */
    private Tensor rowStats(int... shape) {
        return backend.allocateForWrite(DType.F32, shape);
    }

    /**
     * Activations, in the type of the parameters they are computed with (fp32, or bf16 where the backend can): each
     * written whole by the op that produces it, so not zeroed first.
     */
    private Tensor act(Tensor params, int... shape) {
        return backend.allocateForWrite(params.dtype(), shape);
    }

    /** A base weight's gradient: its view of the block's gradients, or none when the base is frozen (base null). */
    private static Tensor baseGrad(Tensor base, UnaryOperator<Tensor> view) {
        return base == null ? null : view.apply(base);
    }

    /** Layer {@code layer}'s attention: its window, and Gemma's scale (query_pre_attn_scalar) and soft cap. */
    private AttentionShape attentionShape(int layer, TokenBatch batch) {
        return attentionShape(layer, batch.batch(), batch.seqLen());
    }

    /** Layer {@code layer}'s attention over {@code batch} sequences of {@code seqLen} tokens. */
    AttentionShape attentionShape(int layer, int batch, int seqLen) {
        var shape = new AttentionShape(batch, seqLen, config.heads(), config.kvHeads(),
                config.headDim(), sliding(layer) ? config.slidingWindow() : 0);
        return gemma == null ? shape : shape.withScores((float) (1.0 / Math.sqrt(gemma.queryPreAttnScalar())),
                (float) gemma.attnSoftcap());
    }

    /**
     * The MLP's activation: silu(gate) * up, or Gemma's gelu(gate) * up; {@code amaxes}: where fp8's store is, for the
     * backend to keep hidden's amax for the down projection's cast (null: none).
     */
    private void mlpActivation(Tensor hidden, Tensor gateUp, Fp8Casts amaxes) {
        if (gemma == null) {
            backend.swigluForward(hidden, gateUp, amaxes);
        } else {
            backend.gegluForward(hidden, gateUp);
        }
    }

    /** {@link #forward(int, Tensor, Tensor, TokenBatch, MemoryScope, KvCache, boolean, MemoryScope, Activations)}. */
    Activations forward(int layer, Tensor w, Tensor x, TokenBatch batch, MemoryScope recomputable, KvCache cache,
                        boolean withOutput) {
        return forward(layer, w, x, batch, recomputable, cache, withOutput, MemoryScope.NONE, null);
    }

    /**
     * A block's forward, the activations that selective checkpointing recomputes allocated in {@code recomputable};
     * with a cache (generation), attention over the cache instead of within the batch (no lse is saved). Without
     * {@code withOutput} (a forward recomputed for the backward), the MLP's down projection and the residual add are
     * left out where the backward reads neither (Llama's form; Gemma's post-MLP norm reads the projection), and the
     * linears' fp8 casts are kept for the backward ({@link Fp8Casts}: each weight and input cast once for both).
     * Attention's output and log-sum-exp, and the block's output, are allocated in {@code kept} (full checkpointing
     * that keeps attention: what outlives the caller's scope); with {@code attentionGiven} (that checkpointing's
     * recompute) attention's output and log-sum-exp are taken from it instead of computed again.
     */
    Activations forward(int layer, Tensor w, Tensor x, TokenBatch batch, MemoryScope recomputable, KvCache cache,
                        boolean withOutput, MemoryScope kept, Activations attentionGiven) {
        int N = batch.rows(), C = config.hidden(), F = config.intermediate();
        // under LoRA the base's weights get no gradient: no product reads an input's transposed cast. A whole forward
        // (withOutput) keeps its inputs' amaxes for a backward that reads its activations (a block not checkpointed)
        Fp8Casts casts = !withOutput ? linears.castsFor(!adapters.on())
                : cache == null ? linears.amaxesFor(!adapters.on()) : null;
        Tensor rstd1, normed1, rstd2, normed2, hidden;
        try (var entered = recomputable.enter()) {
            rstd1 = rowStats(N);
            normed1 = act(w, N, C);
            rstd2 = rowStats(N);
            normed2 = act(w, N, C);
            hidden = act(w, N, F);
        }
        // attention: h1 = rmsnorm(x); qkv = h1 Wqkv^T + b; (Qwen3, Gemma 3: rmsnorm each q and k head); rotate q, k;
        // att = attention(qkv); mid = x + att Wo^T (Gemma: x + postnorm(att Wo^T))
        norm.forward(normed1, rstd1, x, params.norm1(w));
        Tensor qkvRaw = act(w, N, config.qkvWidth());
        linears.forward(backend, qkvRaw, normed1, params.qkvWeight(w), params.qkvBias(w), casts);
        adapters.forward(backend, layer, batch, w, qkvRaw, normed1, "q_proj", "k_proj", "v_proj", "qkv_proj");
        Tensor rstdQ = null, rstdK = null, qkv = qkvRaw;
        if (headNorms()) {
            rstdQ = rowStats(N, config.heads());
            rstdK = rowStats(N, config.kvHeads());
            qkv = normHeads(w, qkvRaw, rstdQ, rstdK);
        } else {
            qkvRaw = null;
        }
        var tables = rope.of(layer, cache == null ? batch.seqLen() : cache.capacity()); // generation: one table
        backend.ropeForward(qkv, config.heads() + config.kvHeads(), batch.positions(), tables.cos(), tables.sin());
        Tensor attention, lse = null;
        if (attentionGiven != null) { // what this forward computed the first time, kept
            attention = attentionGiven.attention();
            lse = attentionGiven.lse();
        } else {
            try (var entered = kept.enter()) {
                attention = act(w, N, config.heads() * config.headDim());
                lse = cache == null ? rowStats(batch.batch(), config.heads(), batch.seqLen()) : null;
            }
            if (cache == null) {
                backend.attentionForward(attention, lse, qkv, batch.documentStarts(), attentionShape(layer, batch));
            } else {
                cache.attend(backend, layer, attention, qkv, batch, attentionShape(layer, batch));
            }
        }
        Tensor attnOut = act(w, N, C), rstdAttnOut = null, mid = attnOut;
        linears.forward(backend, attnOut, attention, params.outWeight(w), null, casts);
        adapters.forward(backend, layer, batch, w, attnOut, attention, "o_proj");
        if (gemma != null) {
            rstdAttnOut = rowStats(N);
            mid = act(w, N, C);
            norm.forward(mid, rstdAttnOut, attnOut, params.postAttnNorm(w));
        } else {
            attnOut = null;
        }
        backend.add(mid, x);
        // mlp: h2 = rmsnorm(mid); out = mid + (silu(h2 Wg^T) * h2 Wu^T) Wd^T (Gemma: gelu, and postnorm of the product)
        norm.forward(normed2, rstd2, mid, params.norm2(w));
        Tensor gateUp = act(w, N, 2 * F);
        linears.forward(backend, gateUp, normed2, params.gateUpWeight(w), null, casts);
        adapters.forward(backend, layer, batch, w, gateUp, normed2, "gate_proj", "up_proj", "gate_up_proj");
        mlpActivation(hidden, gateUp, casts);
        // recomputed for the backward (withOutput false), what follows is read only by Gemma's post-MLP norm (its
        // input and statistics); the residual sum, the block's output, by nothing
        Tensor mlpOut = null, rstdMlpOut = null, out = null;
        if (withOutput || gemma != null) {
            try (var entered = (gemma == null ? kept : MemoryScope.NONE).enter()) { // Llama's output is mlpOut
                mlpOut = act(w, N, C);
            }
            linears.forward(backend, mlpOut, hidden, params.downWeight(w), null, casts);
            adapters.forward(backend, layer, batch, w, mlpOut, hidden, "down_proj");
            out = mlpOut;
            if (gemma != null) {
                rstdMlpOut = rowStats(N);
                try (var entered = kept.enter()) {
                    out = act(w, N, C);
                }
                norm.forward(out, rstdMlpOut, mlpOut, params.postMlpNorm(w));
            } else {
                mlpOut = null;
            }
        }
        if (withOutput) {
            backend.add(out, mid);
        } else {
            out = null;
        }
        return new Activations(x, rstd1, normed1, qkvRaw, rstdQ, rstdK, qkv, attention, lse, attnOut, rstdAttnOut, mid,
                rstd2, normed2, gateUp, hidden, mlpOut, rstdMlpOut, out, casts);
    }

    /** qkv (N, qkvWidth): a copy of qkvRaw with each query and key head RMS-normalised (its v heads as they were). */
    private Tensor normHeads(Tensor w, Tensor qkvRaw, Tensor rstdQ, Tensor rstdK) {
        float eps = norm.eps();
        Tensor qkv = act(w, qkvRaw.shape());
        backend.copy(qkvRaw, qkv);
        backend.headRmsNormForward(qkv, rstdQ, qkvRaw, norm.weight(params.qNorm(w)), 0, eps);
        backend.headRmsNormForward(qkv, rstdK, qkvRaw, norm.weight(params.kNorm(w)), config.heads(), eps);
        return qkv;
    }

    /** The whole of the activations from those a selective forward kept: its norms and MLP activation again. */
    Activations recomputeCheap(Tensor w, BlockActivations kept, TokenBatch batch) {
        Activations a = activations(kept);
        int N = batch.rows(), C = config.hidden(), F = config.intermediate();
        Tensor rstd1 = rowStats(N), normed1 = act(w, N, C);
        norm.forward(normed1, rstd1, a.input(), params.norm1(w));
        Tensor rstd2 = rowStats(N), normed2 = act(w, N, C);
        norm.forward(normed2, rstd2, a.mid(), params.norm2(w));
        Tensor hidden = act(w, N, F);
        mlpActivation(hidden, a.gateUp(), null);
        return new Activations(a.input(), rstd1, normed1, a.qkvRaw(), a.rstdQ(), a.rstdK(), a.qkv(), a.attention(),
                a.lse(), a.attnOut(), a.rstdAttnOut(), a.mid(), rstd2, normed2, a.gateUp(), hidden, a.mlpOut(),
                a.rstdMlpOut(), a.output(), null);
    }

    static Activations activations(BlockActivations saved) {
        if (!(saved instanceof Activations a)) {
            throw new IllegalArgumentException("not a Llama block's activations: " + saved);
        }
        return a;
    }

    /** dx of the block's input; the block's gradients into g (see {@link CausalLM#blockBackward}). */
    Tensor backward(int layer, Tensor w, Tensor g, BlockActivations saved, Tensor dOut, TokenBatch batch,
                    boolean accumulateGrads) {
        Activations a = activations(saved);
        boolean acc = accumulateGrads; // false: each gradient of the block written once, whole
        // under LoRA g holds the adapters' gradients only: the frozen base's linears get no weight gradient (no
        // product) and its norms' go to scratch
        Tensor base = adapters.on() ? null : g;
        int N = batch.rows(), C = config.hidden(), F = config.intermediate();
        LlamaBlockParams p = params;
        // mlp, in reverse
        Tensor dMlpOut = dOut;
        if (gemma != null) {
            dMlpOut = act(w, N, C);
            norm.backward(dMlpOut, norm.grad(base, p::postMlpNorm, C), dOut, a.mlpOut(), p.postMlpNorm(w),
                    a.rstdMlpOut(), acc);
        }
        Tensor dHidden = act(w, N, F);
        linears.backward(backend, dHidden, baseGrad(base, p::downWeight), null, dMlpOut, a.hidden(), p.downWeight(w),
                acc, a.casts());
        adapters.backward(backend, layer, batch, w, g, dHidden, dMlpOut, a.hidden(), acc, "down_proj");
        // in place: gate|up's gradient over gate|up itself, which nothing reads after (each element read, then its
        // gradient written, by the same thread): a (N,2F) buffer less at the backward's peak (Qwen2.5-7B at 16384
        // tokens: 1.2 GB)
        Tensor dGateUp = a.gateUp();
        if (gemma == null) { // fp8: dGateUp's amax kept for the gate|up projection's cast
            backend.swigluBackward(dGateUp, dHidden, a.gateUp(), a.casts());
        } else {
            backend.gegluBackward(dGateUp, dHidden, a.gateUp());
        }
        Tensor dNormed2 = act(w, N, C);
        linears.backward(backend, dNormed2, baseGrad(base, p::gateUpWeight), null, dGateUp, a.normed2(),
                p.gateUpWeight(w), acc, a.casts());
        adapters.backward(backend, layer, batch, w, g, dNormed2, dGateUp, a.normed2(), acc, "gate_proj", "up_proj",
                "gate_up_proj");
        Tensor dMid = act(w, N, C);
        norm.backward(dMid, norm.grad(base, p::norm2, C), dNormed2, a.mid(), p.norm2(w), a.rstd2(), acc);
        backend.add(dMid, dOut); // residual
        // attention, in reverse
        Tensor dAttnOut = dMid;
        if (gemma != null) {
            dAttnOut = act(w, N, C);
            norm.backward(dAttnOut, norm.grad(base, p::postAttnNorm, C), dMid, a.attnOut(), p.postAttnNorm(w),
                    a.rstdAttnOut(), acc);
        }
        Tensor dAttention = act(w, N, config.heads() * config.headDim());
        linears.backward(backend, dAttention, baseGrad(base, p::outWeight), null, dAttnOut, a.attention(),
                p.outWeight(w), acc, a.casts());
        adapters.backward(backend, layer, batch, w, g, dAttention, dAttnOut, a.attention(), acc, "o_proj");
        Tensor dQkv = act(w, N, config.qkvWidth()); // attentionBackward writes every column
        backend.attentionBackward(dQkv, dAttention, a.qkv(), a.attention(), a.lse(), batch.documentStarts(),
                attentionShape(layer, batch));
        var tables = rope.of(layer, batch.seqLen());
        backend.ropeBackward(dQkv, config.heads() + config.kvHeads(), batch.positions(), tables.cos(), tables.sin());
        if (headNorms()) { // in place: the q and k columns of dQkv become the gradient before the head norms
            backend.headRmsNormBackward(dQkv, norm.grad(base, p::qNorm, config.headDim()), dQkv, a.qkvRaw(),
                    norm.weight(p.qNorm(w)), a.rstdQ(), 0, acc);
            backend.headRmsNormBackward(dQkv, norm.grad(base, p::kNorm, config.headDim()), dQkv, a.qkvRaw(),
                    norm.weight(p.kNorm(w)), a.rstdK(), config.heads(), acc);
        }
        Tensor dNormed1 = act(w, N, C);
        linears.backward(backend, dNormed1, baseGrad(base, p::qkvWeight), baseGrad(base, p::qkvBias), dQkv,
                a.normed1(), p.qkvWeight(w), acc, a.casts());
        adapters.backward(backend, layer, batch, w, g, dNormed1, dQkv, a.normed1(), acc, "q_proj", "k_proj", "v_proj",
                "qkv_proj");
        Tensor dx = act(w, N, C);
        norm.backward(dx, norm.grad(base, p::norm1, C), dNormed1, a.input(), p.norm1(w), a.rstd1(), acc);
        backend.add(dx, dMid); // residual
        return dx;
    }
}
