package io.fsdp4j.model;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.stream.Stream;

/**
 * Gemma 3 (text, Gemma3ForCausalLM). The embeddings are scaled by sqrt(C) (rounded to the compute type, as
 * transformers does); every RMSNorm multiplies by (1 + w); a block is
 * x -> mid = x + postnorm(attention(norm(x))) -> mid + postnorm(mlp(prenorm(mid))), with an RMSNorm of each query
 * and key head before the rotation, scores q.k / sqrt(query_pre_attn_scalar), a GeGLU MLP (GELU's tanh
 * approximation), and layers of two kinds: sliding (a window of {@link ModelConfig#slidingWindow} tokens, rope base
 * rope_local_base_freq, unscaled) and global (full causal attention, rope base and scaling of the config).
 *
 * <p>Parameter layout as {@link LlamaModel}'s (q|k|v adjacent, gate|up adjacent), plus q_norm, k_norm and the four
 * norms of the block. The (1 + w) of a norm is made before each use, C values in the parameters' type (on the CPU
 * backend fp32, as transformers computes it; a bf16 run rounds 1 + w to bf16); since d(1 + w)/dw = 1 the gradient
 * goes to w unchanged. The query scale sqrt(HS / query_pre_attn_scalar) is folded into q_norm's (1 + w), so that the
 * attention op's 1/sqrt(HS) gives Gemma's scores.
 */
public final class GemmaModel implements CausalLM {
    private final ModelConfig config;
    private final ModelConfig.Gemma gemma;
    private final Backend backend;
    private final List<UnitLayout> units;
    private final BlockOffsets offsets;
    /** cos, sin of the global layers (rope theta and scaling) and of the sliding ones (local theta). */
    private final Tensor globalCos, globalSin, localCos, localSin;
    /** sqrt(HS / query_pre_attn_scalar), folded into the queries' norm. */
    private final float queryScale;

    /**
     * What a block's forward saves for its backward (N rows, C width, F MLP width). Under selective checkpointing
     * the cheap ones, marked (recomputed), are left null and recomputed from input, mid and gateUp.
     *
     * @param input (N,C) block input
     * @param rstd1 (N) input norm's 1/rms (recomputed)
     * @param normed1 (N,C) input norm output (recomputed)
     * @param qkvRaw (N, (NH+2NKV)*HS) projected q|k|v before the head norms
     * @param rstdQ (N,NH) each query head's 1/rms
     * @param rstdK (N,NKV) each key head's 1/rms
     * @param qkv (N, (NH+2NKV)*HS) q|k|v after the head norms and the rotation
     * @param attention (N, NH*HS) attention output
     * @param lse (B,NH,T) attention log-sum-exp
     * @param attnOut (N,C) attention output projected, before post_attention_layernorm
     * @param rstdAttnOut (N) post_attention_layernorm's 1/rms
     * @param mid (N,C) residual stream after attention
     * @param rstd2 (N) pre_feedforward_layernorm's 1/rms (recomputed)
     * @param normed2 (N,C) its output (recomputed)
     * @param gateUp (N,2F) gate and up projections
     * @param hidden (N,F) gelu(gate) * up (recomputed)
     * @param mlpOut (N,C) the MLP's output, before post_feedforward_layernorm
     * @param rstdMlpOut (N) post_feedforward_layernorm's 1/rms
     * @param output (N,C) block output
     */
    public record Activations(Tensor input, Tensor rstd1, Tensor normed1, Tensor qkvRaw, Tensor rstdQ, Tensor rstdK,
                              Tensor qkv, Tensor attention, Tensor lse, Tensor attnOut, Tensor rstdAttnOut, Tensor mid,
                              Tensor rstd2, Tensor normed2, Tensor gateUp, Tensor hidden, Tensor mlpOut,
                              Tensor rstdMlpOut, Tensor output) implements BlockActivations {

        Activations withoutRecomputed() {
            return new Activations(input, null, null, qkvRaw, rstdQ, rstdK, qkv, attention, lse, attnOut, rstdAttnOut,
                    mid, null, null, gateUp, null, mlpOut, rstdMlpOut, output);
        }

        @Override
        public List<Tensor> tensors() {
            return Stream.of(input, rstd1, normed1, qkvRaw, rstdQ, rstdK, qkv, attention, lse, attnOut, rstdAttnOut,
                    mid, rstd2, normed2, gateUp, hidden, mlpOut, rstdMlpOut, output).filter(Objects::nonNull).toList();
        }
    }

    /**
     * The bytes of {@link Activations} and of a block's backward for {@code batch} sequences of {@code seq} tokens,
     * activations of {@code e} bytes an element: kept by selective checkpointing qkvRaw, rstdQ, rstdK, qkv,
     * attention, lse, attnOut, rstdAttnOut, mid, gateUp, mlpOut, rstdMlpOut, output; recomputed rstd1, normed1,
     * rstd2, normed2, hidden.
     */
    static ActivationSizes activationSizes(ModelConfig c, int seq, int batch, int e) {
        long n = (long) seq * batch, C = c.hidden(), F = c.intermediate(), Q = c.qkvWidth();
        long A = (long) c.heads() * c.headDim(), lse = 4L * batch * c.heads() * seq;
        long[] kept = {e * n * Q, 4 * n * c.heads(), 4 * n * c.kvHeads(), e * n * Q, e * n * A, lse, e * n * C, 4 * n,
            e * n * C, e * n * 2 * F, e * n * C, 4 * n, e * n * C};
        long[] recomputed = {4 * n, e * n * C, 4 * n, e * n * C, e * n * F};
        long[] backward = {e * n * C, e * n * F, e * n * 2 * F, e * n * C, e * n * C, e * n * C, e * n * A, e * n * Q,
            lse, e * n * C, e * n * C}; // dMlpOut, dHidden, dGateUp, dNormed2, dMid, dAttnOut, dAttention, dQkv,
        // attention's delta, dNormed1, dx
        return new ActivationSizes(e * n * C, kept, recomputed, new long[0], backward, ActivationSizes.head(n, e, c));
    }

    private record BlockOffsets(long norm1, long qkvWeight, long out, long qNorm, long kNorm, long postAttnNorm,
                                long preFfNorm, long gateUp, long down, long postFfNorm) {}

    public GemmaModel(ModelConfig config, Backend backend) {
        if (config.gemma() == null) {
            throw new IllegalArgumentException(config.architecture().hfName() + " is not Gemma 3");
        }
        this.config = config;
        this.gemma = config.gemma();
        this.backend = backend;
        this.units = layout(config);
        UnitLayout block = units.get(1);
        String p = "model.layers.0.";
        this.offsets = new BlockOffsets(
                block.param(p + "input_layernorm.weight").offset(),
                block.param(p + "self_attn.q_proj.weight").offset(),
                block.param(p + "self_attn.o_proj.weight").offset(),
                block.param(p + "self_attn.q_norm.weight").offset(),
                block.param(p + "self_attn.k_norm.weight").offset(),
                block.param(p + "post_attention_layernorm.weight").offset(),
                block.param(p + "pre_feedforward_layernorm.weight").offset(),
                block.param(p + "mlp.gate_proj.weight").offset(),
                block.param(p + "mlp.down_proj.weight").offset(),
                block.param(p + "post_feedforward_layernorm.weight").offset());
        RopeTable global = RopeTable.of(config, config.maxPositions());
        RopeTable local = RopeTable.of(new ModelConfig(Architecture.LLAMA, config.vocabSize(), config.hidden(),
                config.intermediate(), config.layers(), config.heads(), config.kvHeads(), config.headDim(),
                gemma.localRopeTheta(), config.rmsNormEps(), config.tieEmbeddings(), false, 0, config.maxPositions()),
                config.maxPositions());
        this.globalCos = backend.upload(global.cos(), global.positions(), global.half());
        this.globalSin = backend.upload(global.sin(), global.positions(), global.half());
        this.localCos = backend.upload(local.cos(), local.positions(), local.half());
        this.localSin = backend.upload(local.sin(), local.positions(), local.half());
        this.queryScale = (float) Math.sqrt(config.headDim() / gemma.queryPreAttnScalar());
    }

    /** The units of a Gemma 3 model, with Hugging Face parameter names. */
    public static List<UnitLayout> layout(ModelConfig c) {
        int C = c.hidden(), F = c.intermediate(), HS = c.headDim();
        List<UnitLayout> result = new ArrayList<>();
        result.add(new UnitLayout.Builder("embeddings")
                .add("model.embed_tokens.weight", ParamSpec.Kind.EMBEDDING, c.vocabSize(), C).build());
        for (int i = 0; i < c.layers(); i++) {
            String p = "model.layers." + i + ".";
            result.add(new UnitLayout.Builder("block." + i)
                    .add(p + "input_layernorm.weight", ParamSpec.Kind.NORM, C)
                    .add(p + "self_attn.q_proj.weight", ParamSpec.Kind.MATRIX, c.heads() * HS, C)
                    .add(p + "self_attn.k_proj.weight", ParamSpec.Kind.MATRIX, c.kvHeads() * HS, C)
                    .add(p + "self_attn.v_proj.weight", ParamSpec.Kind.MATRIX, c.kvHeads() * HS, C)
                    .add(p + "self_attn.o_proj.weight", ParamSpec.Kind.MATRIX, C, c.heads() * HS)
                    .add(p + "self_attn.q_norm.weight", ParamSpec.Kind.NORM, HS)
                    .add(p + "self_attn.k_norm.weight", ParamSpec.Kind.NORM, HS)
                    .add(p + "post_attention_layernorm.weight", ParamSpec.Kind.NORM, C)
                    .add(p + "pre_feedforward_layernorm.weight", ParamSpec.Kind.NORM, C)
                    .add(p + "mlp.gate_proj.weight", ParamSpec.Kind.MATRIX, F, C)
                    .add(p + "mlp.up_proj.weight", ParamSpec.Kind.MATRIX, F, C)
                    .add(p + "mlp.down_proj.weight", ParamSpec.Kind.MATRIX, C, F)
                    .add(p + "post_feedforward_layernorm.weight", ParamSpec.Kind.NORM, C)
                    .build());
        }
        var head = new UnitLayout.Builder("head").add("model.norm.weight", ParamSpec.Kind.NORM, C);
        if (!c.tieEmbeddings()) {
            head.add("lm_head.weight", ParamSpec.Kind.MATRIX, c.vocabSize(), C);
        }
        result.add(head.build());
        return List.copyOf(result);
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
    public boolean headUsesEmbedding() {
        return config.tieEmbeddings();
    }

    private Tensor rowStats(int... shape) {
        return backend.allocateForWrite(DType.F32, shape);
    }

    private Tensor act(Tensor params, int... shape) {
        return backend.allocateForWrite(params.dtype(), shape);
    }

    private AttentionShape attentionShape(int layer, TokenBatch batch) {
        int window = gemma.slidingLayers().get(layer) ? config.slidingWindow() : 0;
        return new AttentionShape(batch.batch(), batch.seqLen(), config.heads(), config.kvHeads(), config.headDim(),
                window);
    }

    private Tensor cos(int layer) {
        return gemma.slidingLayers().get(layer) ? localCos : globalCos;
    }

    private Tensor sin(int layer) {
        return gemma.slidingLayers().get(layer) ? localSin : globalSin;
    }

    /** 1 + w, in w's type: the weight an RMSNorm of Gemma multiplies by (times {@code scale}). */
    private Tensor onePlus(Tensor w, float scale) {
        Tensor t = backend.allocateForWrite(w.dtype(), w.shape());
        backend.fill(t, 1f);
        backend.add(t, w);
        if (scale != 1f) {
            backend.scale(t, scale);
        }
        return t;
    }

    /** out = rmsnorm(x) * (1 + w); rstd saved. */
    private void norm(Tensor out, Tensor rstd, Tensor x, Tensor w) {
        backend.rmsNormForward(out, rstd, x, onePlus(w, 1f), (float) config.rmsNormEps());
    }

    /** dx written, dw accumulated (or written): the gradient of (1 + w) is w's. */
    private void normBackward(Tensor dx, Tensor dw, Tensor dOut, Tensor x, Tensor w, Tensor rstd, boolean acc) {
        backend.rmsNormBackward(dx, dw, dOut, x, onePlus(w, 1f), rstd, acc);
    }

    private void checkLength(TokenBatch batch) {
        if (batch.seqLen() > config.maxPositions()) {
            throw new io.fsdp4j.UserError("sequence length " + batch.seqLen() + " exceeds the model's "
                    + "max_position_embeddings of " + config.maxPositions() + "; use a shorter data.seq_len");
        }
    }

    /** sqrt(C) in the type of the embeddings, as transformers multiplies them. */
    private float embedScale(Tensor embeddingParams) {
        float s = (float) Math.sqrt(config.hidden());
        return embeddingParams.dtype() == DType.BF16 ? Half.roundBf16(s) : s;
    }

    @Override
    public Tensor embedForward(Tensor embeddingParams, TokenBatch batch) {
        checkLength(batch);
        Tensor x = act(embeddingParams, batch.rows(), config.hidden());
        backend.embeddingForward(x, batch.ids(), embeddingTable(embeddingParams));
        backend.scale(x, embedScale(embeddingParams));
        return x;
    }

    /**
     * dTable += scatter of dx * sqrt(C); the row of pad_token_id keeps what it had (transformers' padding_idx: looking
     * the pad token up trains nothing; a tied head's gradient into that row, added elsewhere, stays).
     */
    @Override
    public void embedBackward(Tensor embeddingGrads, TokenBatch batch, Tensor dx) {
        int C = config.hidden();
        Tensor table = embeddingTable(embeddingGrads);
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

    // ---- views of a block's flat buffer (parameters and gradients alike) -------------------------------

    private Tensor norm1(Tensor u) { return u.view(offsets.norm1(), config.hidden()); }

    private Tensor qkvWeight(Tensor u) { return u.view(offsets.qkvWeight(), config.qkvWidth(), config.hidden()); }

    private Tensor outWeight(Tensor u) { return u.view(offsets.out(), config.hidden(), config.heads() * config.headDim()); }

    private Tensor qNorm(Tensor u) { return u.view(offsets.qNorm(), config.headDim()); }

    private Tensor kNorm(Tensor u) { return u.view(offsets.kNorm(), config.headDim()); }

    private Tensor postAttnNorm(Tensor u) { return u.view(offsets.postAttnNorm(), config.hidden()); }

    private Tensor preFfNorm(Tensor u) { return u.view(offsets.preFfNorm(), config.hidden()); }

    private Tensor gateUpWeight(Tensor u) { return u.view(offsets.gateUp(), 2 * config.intermediate(), config.hidden()); }

    private Tensor downWeight(Tensor u) { return u.view(offsets.down(), config.hidden(), config.intermediate()); }

    private Tensor postFfNorm(Tensor u) { return u.view(offsets.postFfNorm(), config.hidden()); }

    @Override
    public BlockActivations blockForward(int layer, Tensor w, Tensor x, TokenBatch batch) {
        return forward(layer, w, x, batch, MemoryScope.NONE, null);
    }

    @Override
    public Tensor blockForward(int layer, Tensor w, Tensor x, TokenBatch batch, KvCache cache) {
        return forward(layer, w, x, batch, MemoryScope.NONE, cache).output();
    }

    @Override
    public BlockActivations blockForwardSelective(int layer, Tensor w, Tensor x, TokenBatch batch,
                                                  MemoryScope recomputable) {
        return forward(layer, w, x, batch, recomputable, null).withoutRecomputed();
    }

    /** q|k|v with each query head normalised by (1 + w_q) * queryScale and each key head by (1 + w_k). */
    private Tensor normHeads(Tensor w, Tensor qkvRaw, Tensor rstdQ, Tensor rstdK) {
        float eps = (float) config.rmsNormEps();
        Tensor qkv = act(w, qkvRaw.shape());
        backend.copy(qkvRaw, qkv);
        backend.headRmsNormForward(qkv, rstdQ, qkvRaw, onePlus(qNorm(w), queryScale), 0, eps);
        backend.headRmsNormForward(qkv, rstdK, qkvRaw, onePlus(kNorm(w), 1f), config.heads(), eps);
        return qkv;
    }

    /** A block's forward; with a cache (generation), attention over the cache instead of within the batch. */
    private Activations forward(int layer, Tensor w, Tensor x, TokenBatch batch, MemoryScope recomputable,
                                KvCache cache) {
        int N = batch.rows(), C = config.hidden(), F = config.intermediate();
        Tensor rstd1, normed1, rstd2, normed2, hidden;
        try (var entered = recomputable.enter()) {
            rstd1 = rowStats(N);
            normed1 = act(w, N, C);
            rstd2 = rowStats(N);
            normed2 = act(w, N, C);
            hidden = act(w, N, F);
        }
        // attention: h1 = norm(x); q|k|v = h1 Wqkv^T; norm each q and k head; rotate; a = attention;
        // mid = x + postnorm(a Wo^T)
        norm(normed1, rstd1, x, norm1(w));
        Tensor qkvRaw = act(w, N, config.qkvWidth());
        backend.linearForward(qkvRaw, normed1, qkvWeight(w), null);
        Tensor rstdQ = rowStats(N, config.heads()), rstdK = rowStats(N, config.kvHeads());
        Tensor qkv = normHeads(w, qkvRaw, rstdQ, rstdK);
        backend.ropeForward(qkv, config.heads() + config.kvHeads(), batch.positions(), cos(layer), sin(layer));
        Tensor attention = act(w, N, config.heads() * config.headDim());
        Tensor lse = null;
        if (cache == null) {
            lse = rowStats(batch.batch(), config.heads(), batch.seqLen());
            backend.attentionForward(attention, lse, qkv, batch.documentStarts(), attentionShape(layer, batch));
        } else {
            cache.attend(backend, layer, attention, qkv, batch, attentionShape(layer, batch));
        }
        Tensor attnOut = act(w, N, C);
        backend.linearForward(attnOut, attention, outWeight(w), null);
        Tensor rstdAttnOut = rowStats(N), mid = act(w, N, C);
        norm(mid, rstdAttnOut, attnOut, postAttnNorm(w));
        backend.add(mid, x);
        // mlp: h2 = prenorm(mid); out = mid + postnorm((gelu(h2 Wg^T) * h2 Wu^T) Wd^T)
        norm(normed2, rstd2, mid, preFfNorm(w));
        Tensor gateUp = act(w, N, 2 * F);
        backend.linearForward(gateUp, normed2, gateUpWeight(w), null);
        backend.gegluForward(hidden, gateUp);
        Tensor mlpOut = act(w, N, C);
        backend.linearForward(mlpOut, hidden, downWeight(w), null);
        Tensor rstdMlpOut = rowStats(N), out = act(w, N, C);
        norm(out, rstdMlpOut, mlpOut, postFfNorm(w));
        backend.add(out, mid);
        return new Activations(x, rstd1, normed1, qkvRaw, rstdQ, rstdK, qkv, attention, lse, attnOut, rstdAttnOut, mid,
                rstd2, normed2, gateUp, hidden, mlpOut, rstdMlpOut, out);
    }

    private static Activations gemmaActivations(BlockActivations saved) {
        if (!(saved instanceof Activations a)) {
            throw new IllegalArgumentException("not a Gemma block's activations: " + saved);
        }
        return a;
    }

    @Override
    public BlockActivations recomputeCheap(int layer, Tensor w, BlockActivations kept, TokenBatch batch) {
        Activations a = gemmaActivations(kept);
        int N = batch.rows(), C = config.hidden(), F = config.intermediate();
        Tensor rstd1 = rowStats(N), normed1 = act(w, N, C);
        norm(normed1, rstd1, a.input(), norm1(w));
        Tensor rstd2 = rowStats(N), normed2 = act(w, N, C);
        norm(normed2, rstd2, a.mid(), preFfNorm(w));
        Tensor hidden = act(w, N, F);
        backend.gegluForward(hidden, a.gateUp());
        return new Activations(a.input(), rstd1, normed1, a.qkvRaw(), a.rstdQ(), a.rstdK(), a.qkv(), a.attention(),
                a.lse(), a.attnOut(), a.rstdAttnOut(), a.mid(), rstd2, normed2, a.gateUp(), hidden, a.mlpOut(),
                a.rstdMlpOut(), a.output());
    }

    @Override
    public Tensor blockBackward(int layer, Tensor w, Tensor g, BlockActivations saved, Tensor dOut, TokenBatch batch,
                                boolean accumulateGrads) {
        Activations a = gemmaActivations(saved);
        boolean acc = accumulateGrads;
        int N = batch.rows(), C = config.hidden(), F = config.intermediate();
        // mlp, in reverse
        Tensor dMlpOut = act(w, N, C);
        normBackward(dMlpOut, postFfNorm(g), dOut, a.mlpOut(), postFfNorm(w), a.rstdMlpOut(), acc);
        Tensor dHidden = act(w, N, F);
        backend.linearBackward(dHidden, downWeight(g), null, dMlpOut, a.hidden(), downWeight(w), acc);
        Tensor dGateUp = act(w, N, 2 * F);
        backend.gegluBackward(dGateUp, dHidden, a.gateUp());
        Tensor dNormed2 = act(w, N, C);
        backend.linearBackward(dNormed2, gateUpWeight(g), null, dGateUp, a.normed2(), gateUpWeight(w), acc);
        Tensor dMid = act(w, N, C);
        normBackward(dMid, preFfNorm(g), dNormed2, a.mid(), preFfNorm(w), a.rstd2(), acc);
        backend.add(dMid, dOut); // residual
        // attention, in reverse
        Tensor dAttnOut = act(w, N, C);
        normBackward(dAttnOut, postAttnNorm(g), dMid, a.attnOut(), postAttnNorm(w), a.rstdAttnOut(), acc);
        Tensor dAttention = act(w, N, config.heads() * config.headDim());
        backend.linearBackward(dAttention, outWeight(g), null, dAttnOut, a.attention(), outWeight(w), acc);
        Tensor dQkv = act(w, N, config.qkvWidth());
        backend.attentionBackward(dQkv, dAttention, a.qkv(), a.attention(), a.lse(), batch.documentStarts(),
                attentionShape(layer, batch));
        backend.ropeBackward(dQkv, config.heads() + config.kvHeads(), batch.positions(), cos(layer), sin(layer));
        headNormBackward(dQkv, qNorm(g), a.qkvRaw(), onePlus(qNorm(w), queryScale), a.rstdQ(), 0, queryScale, acc);
        headNormBackward(dQkv, kNorm(g), a.qkvRaw(), onePlus(kNorm(w), 1f), a.rstdK(), config.heads(), 1f, acc);
        Tensor dNormed1 = act(w, N, C);
        backend.linearBackward(dNormed1, qkvWeight(g), null, dQkv, a.normed1(), qkvWeight(w), acc);
        Tensor dx = act(w, N, C);
        normBackward(dx, norm1(g), dNormed1, a.input(), norm1(w), a.rstd1(), acc);
        backend.add(dx, dMid); // residual
        return dx;
    }

    /**
     * The head norm's backward in place on dQkv; its weight was (1 + w) * scale, so w's gradient is scale times the
     * effective weight's: computed apart and scaled when scale is not 1.
     */
    private void headNormBackward(Tensor dQkv, Tensor dw, Tensor qkvRaw, Tensor effective, Tensor rstd, int firstHead,
                                  float scale, boolean acc) {
        if (scale == 1f) {
            backend.headRmsNormBackward(dQkv, dw, dQkv, qkvRaw, effective, rstd, firstHead, acc);
            return;
        }
        Tensor dEffective = backend.allocateForWrite(dw.dtype(), dw.shape());
        backend.headRmsNormBackward(dQkv, dEffective, dQkv, qkvRaw, effective, rstd, firstHead, false);
        backend.scale(dEffective, scale);
        if (acc) {
            backend.add(dw, dEffective);
        } else {
            backend.copy(dEffective, dw);
        }
    }

    @Override
    public KvCache newKvCache(int batch, int capacity, DType dtype) {
        if (capacity > config.maxPositions()) {
            throw new io.fsdp4j.UserError("generation of " + capacity + " tokens exceeds the model's "
                    + "max_position_embeddings of " + config.maxPositions());
        }
        return KvCache.allocate(backend, config.layers(), batch, capacity, config.kvHeads() * config.headDim(), dtype);
    }

    /** Logits (N,V) of the final hidden states x (N,C): the final norm, then the LM head. */
    @Override
    public Tensor logits(Tensor headParams, Tensor embeddingParams, Tensor x) {
        int C = config.hidden(), N = Math.toIntExact(x.numel() / C);
        Tensor normed = act(headParams, N, C);
        norm(normed, rowStats(N), x, headParams.view(0, C));
        Tensor lmHead = config.tieEmbeddings() ? embeddingTable(embeddingParams)
                : headParams.view(C, config.vocabSize(), C);
        Tensor logits = act(headParams, N, config.vocabSize());
        backend.linearForward(logits, normed, lmHead, null);
        return logits;
    }

    @Override
    public double headLoss(Tensor headParams, Tensor embeddingParams, Tensor x, TokenBatch batch, float gradScale,
                           Tensor headGrads, Tensor embeddingGrads, Tensor dx, Tensor lossPerRow) {
        int N = batch.rows(), C = config.hidden(), V = config.vocabSize();
        Tensor normWeight = headParams.view(0, C);
        Tensor lmHead = config.tieEmbeddings() ? embeddingTable(embeddingParams) : headParams.view(C, V, C);
        Tensor rstd = rowStats(N), normed = act(headParams, N, C);
        norm(normed, rstd, x, normWeight);
        Tensor logits = act(headParams, N, V);
        backend.linearForward(logits, normed, lmHead, null);
        double lossSum = backend.crossEntropy(logits, batch.targets(), gradScale, lossPerRow);
        if (gradScale != 0f) {
            Tensor dLmHead = config.tieEmbeddings() ? embeddingTable(embeddingGrads) : headGrads.view(C, V, C);
            Tensor dNormed = act(headParams, N, C);
            backend.linearBackward(dNormed, dLmHead, null, logits, normed, lmHead); // logits now hold dlogits
            normBackward(dx, headGrads.view(0, C), dNormed, x, normWeight, rstd, true);
        }
        return lossSum;
    }
}
