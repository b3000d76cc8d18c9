package io.fsdp4j.model;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.Fp8Casts;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.stream.Stream;

/**
 * BLOOM (transformers' BloomForCausalLM). The embeddings are followed by a LayerNorm; a block is
 * x -> x + dense(attention(layernorm(x))) -> + dense_4h_to_h(gelu(dense_h_to_4h(layernorm(.)))), every norm a
 * LayerNorm with bias and every linear layer biased; attention is multi-head with ALiBi position biases (no rotary
 * embedding) and GELU is the tanh approximation; a final LayerNorm (ln_f) and the LM head, tied to the embeddings.
 * Residuals are taken before the norms (apply_residual_connection_post_layernorm = false, the only form supported).
 *
 * <p>Layout. Parameters keep Hugging Face's names and shapes. {@code self_attention.query_key_value.weight}
 * (3C, C) keeps the checkpoint's row order, which interleaves the heads: output row (h*3 + i)*HS + d is component
 * i (0 q, 1 k, 2 v) of head h. So the fused projection's output holds, per row, [NH, 3, HS]: the attention op reads
 * it in that order ({@link AttentionShape.QkvLayout#PER_HEAD}) instead of the model rearranging weights or
 * activations. The embedding LayerNorm ({@code transformer.word_embeddings_layernorm}) lives at the start of block
 * 0's unit, not in the embedding unit: its backward needs its parameters, which the embedding stage's backward does
 * not get (the embedding unit may be resharded by then), while block 0's backward has its gathered unit.
 *
 * <p>Under LoRA each block's adapters follow its base parameters ({@link LoraSpec#appendTo}), on the linears by PEFT's
 * names ({@code query_key_value}, {@code dense}, {@code dense_h_to_4h}, {@code dense_4h_to_h}); the adapters have no
 * bias, the frozen linears keep theirs.
 *
 * <p>Shapes: N rows, C width, 4C MLP width, NH heads of HS = C / NH.
 */
public final class BloomModel implements CausalLM {
    private final ModelConfig config;
    private final Backend backend;
    private final HeadLoss headLoss;
    private final List<UnitLayout> units;
    private final List<BlockOffsets> offsets;
    /** The blocks' adapters ({@code query_key_value}, ...): none without LoRA. */
    private final BlockAdapters adapters;
    /** How the blocks' linears compute: in the parameters' type, or fp8. */
    private final BlockLinears linears;
    /** Per unit, the elements of its flat buffer before its adapters: the frozen base under LoRA. */
    private final long[] baseNumel;

    /**
     * What a block's forward saves for its backward. Under selective checkpointing the ones marked (recomputed) are
     * left null from forward to backward and recomputed there from the input, mid and up: two LayerNorms and a GELU,
     * element-wise work, while every matrix product and the attention are kept (the reasons and the bytes:
     * {@link io.fsdp4j.config.ActivationCheckpointing#SELECTIVE}).
     *
     * @param embedInput (N,C) raw embeddings, the input of the embedding LayerNorm (block 0 only, else null)
     * @param embedMean (N) embedding LayerNorm's mean (block 0 only)
     * @param embedRstd (N) embedding LayerNorm's 1/std (block 0 only)
     * @param input (N,C) block input after the embedding LayerNorm, the residual stream
     * @param mean1 (N) input_layernorm's mean (recomputed)
     * @param rstd1 (N) input_layernorm's 1/std (recomputed)
     * @param normed1 (N,C) input_layernorm output (recomputed)
     * @param qkv (N,3C) fused projection, [NH, 3, HS] per row
     * @param attention (N,C) attention output, heads merged
     * @param lse (B,NH,T) attention log-sum-exp
     * @param mid (N,C) residual stream after attention
     * @param mean2 (N) post_attention_layernorm's mean (recomputed)
     * @param rstd2 (N) post_attention_layernorm's 1/std (recomputed)
     * @param normed2 (N,C) post_attention_layernorm output (recomputed)
     * @param up (N,4C) dense_h_to_4h output, before GELU
     * @param hidden (N,4C) gelu(up) (recomputed)
     * @param output (N,C) block output
     * @param casts the linears' fp8 casts a forward recomputed for the backward kept for it (null: none kept)
     */
    public record Activations(Tensor embedInput, Tensor embedMean, Tensor embedRstd, Tensor input, Tensor mean1,
                              Tensor rstd1, Tensor normed1, Tensor qkv, Tensor attention, Tensor lse, Tensor mid,
                              Tensor mean2, Tensor rstd2, Tensor normed2, Tensor up, Tensor hidden, Tensor output,
                              Fp8Casts casts)
            implements BlockActivations {

        /** Attention's output and log-sum-exp, and the block's output: what full checkpointing keeping attention keeps. */
        Activations attentionAndOutput() {
            return new Activations(null, null, null, null, null, null, null, null, attention, lse, null, null, null, null,
                    null, null, output, null);
        }

        /** These activations less the recomputed ones. */
        Activations withoutRecomputed() {
            return new Activations(embedInput, embedMean, embedRstd, input, null, null, null, qkv, attention, lse, mid,
                    null, null, null, up, null, output, null);
        }

        @Override
        public List<Tensor> tensors() {
            return Stream.of(embedInput, embedMean, embedRstd, input, mean1, rstd1, normed1, qkv, attention, lse, mid,
                    mean2, rstd2, normed2, up, hidden, output).filter(Objects::nonNull).toList();
        }
    }

    /**
     * The bytes of {@link Activations} and of a block's backward for {@code batch} sequences of {@code seq} tokens,
     * activations of {@code e} bytes an element: kept by selective checkpointing qkv, attention, lse, mid, up,
     * output; recomputed mean1, rstd1, normed1, mean2, rstd2, normed2, hidden; block 0 also keeps embedMean,
     * embedRstd and its normalised input.
     */
    static ActivationSizes activationSizes(ModelConfig c, int seq, int batch, int e) {
        long n = (long) seq * batch, C = c.hidden(), lse = 4L * batch * c.heads() * seq;
        long[] kept = {e * n * 3 * C, e * n * C, lse, e * n * C, e * n * 4 * C, e * n * C};
        long[] recomputed = {4 * n, 4 * n, e * n * C, 4 * n, 4 * n, e * n * C, e * n * 4 * C};
        long[] backward = {e * n * 4 * C, e * n * 4 * C, e * n * C, e * n * C, e * n * C, e * n * 3 * C, lse,
            e * n * C, e * n * C}; // dHidden, dUp, dNormed2, dMid, dAttention, dQkv, attention's delta, dNormed1, dx
        return new ActivationSizes(e * n * C, kept, recomputed, new long[] {e * n * C, lse},
                new long[] {4 * n, 4 * n, e * n * C}, backward,
                ActivationSizes.head(n, e, c));
    }

    /** Offsets of a block's parameters in its flat buffer (the embedding norm's are -1 except in block 0). */
    private record BlockOffsets(long embedNormWeight, long embedNormBias, long norm1Weight, long norm1Bias,
                                long qkvWeight, long qkvBias, long denseWeight, long denseBias, long norm2Weight,
                                long norm2Bias, long upWeight, long upBias, long downWeight, long downBias) {}

    public BloomModel(ModelConfig config, Backend backend) {
        this(config, backend, null);
    }

    /** With low-rank adapters on the linears {@code lora} names (null: none, every weight trains). */
    public BloomModel(ModelConfig config, Backend backend, LoraSpec lora) {
        this(config, backend, lora, BlockLinears.PARAM_DTYPE);
    }

    /** As above, the blocks' linears computing as {@code linears} says. */
    public BloomModel(ModelConfig config, Backend backend, LoraSpec lora, BlockLinears linears) {
        this.linears = linears;
        this.config = config;
        this.backend = backend;
        this.headLoss = new HeadLoss(backend, HeadLoss.maxLogits());
        this.units = layout(config, lora);
        this.baseNumel = layout(config).stream().mapToLong(UnitLayout::numel).toArray();
        List<BlockOffsets> perBlock = new ArrayList<>();
        List<Map<String, LoraLinear>> perBlockAdapters = new ArrayList<>();
        for (int i = 0; i < config.layers(); i++) {
            UnitLayout u = units.get(1 + i);
            perBlockAdapters.add(lora == null ? Map.of() : adapters(config, lora, u, i));
            String p = "transformer.h." + i + ".";
            boolean first = i == 0;
            perBlock.add(new BlockOffsets(
                    first ? u.param("transformer.word_embeddings_layernorm.weight").offset() : -1,
                    first ? u.param("transformer.word_embeddings_layernorm.bias").offset() : -1,
                    u.param(p + "input_layernorm.weight").offset(), u.param(p + "input_layernorm.bias").offset(),
                    u.param(p + "self_attention.query_key_value.weight").offset(),
                    u.param(p + "self_attention.query_key_value.bias").offset(),
                    u.param(p + "self_attention.dense.weight").offset(), u.param(p + "self_attention.dense.bias").offset(),
                    u.param(p + "post_attention_layernorm.weight").offset(),
                    u.param(p + "post_attention_layernorm.bias").offset(),
                    u.param(p + "mlp.dense_h_to_4h.weight").offset(), u.param(p + "mlp.dense_h_to_4h.bias").offset(),
                    u.param(p + "mlp.dense_4h_to_h.weight").offset(), u.param(p + "mlp.dense_4h_to_h.bias").offset()));
        }
        this.offsets = List.copyOf(perBlock);
        this.adapters = lora == null ? BlockAdapters.NONE : new BlockAdapters(perBlockAdapters, lora.dropout(),
                java.util.Arrays.copyOfRange(baseNumel, 1, 1 + config.layers()));
    }

    /** The units with LoRA's adapters appended to each block ({@link LoraSpec#appendTo}); null: {@link #layout}. */
    public static List<UnitLayout> layout(ModelConfig c, LoraSpec lora) {
        List<UnitLayout> base = layout(c);
        return lora == null ? base : lora.appendTo(base, c.layers(), (i, m) -> "transformer.h." + i + "." + linearOf(m));
    }

    /** The module's path in a block: {@code self_attention.query_key_value}, ..., {@code mlp.dense_4h_to_h}. */
    private static String linearOf(String module) {
        return switch (module) {
            case "query_key_value", "dense" -> "self_attention." + module;
            default -> "mlp." + module;
        };
    }

    /** Where each adapter of block {@code layer} sits in its buffer ({@code block}) and its product. */
    private static Map<String, LoraLinear> adapters(ModelConfig c, LoraSpec lora, UnitLayout block, int layer) {
        int C = c.hidden();
        Map<String, LoraLinear> result = new LinkedHashMap<>();
        for (String module : lora.modules()) {
            String linear = "transformer.h." + layer + "." + linearOf(module);
            long a = block.param(LoraSpec.adapterName(linear, 'A')).offset();
            long b = block.param(LoraSpec.adapterName(linear, 'B')).offset();
            float s = (float) lora.scaling();
            int r = lora.rank();
            result.put(module, switch (module) {
                case "query_key_value" -> new LoraLinear(a, b, C, 3 * C, 0, 3 * C, r, s);
                case "dense" -> new LoraLinear(a, b, C, C, 0, C, r, s);
                case "dense_h_to_4h" -> new LoraLinear(a, b, C, 4 * C, 0, 4 * C, r, s);
                case "dense_4h_to_h" -> new LoraLinear(a, b, 4 * C, C, 0, C, r, s);
                default -> throw new IllegalArgumentException("no linear " + module + " in a BLOOM block");
            });
        }
        return result;
    }

    /** A base parameter's gradient: its view of g, or none when the base is frozen (base null: no product for it). */
    private static Tensor baseGrad(Tensor base, long offset, int... shape) {
        return base == null ? null : base.view(offset, shape);
    }

    /**
     * A base norm parameter's gradient: its view of g, or when the base is frozen (base null) a scratch of {@code n}
     * values, dropped (the LayerNorm's backward computes it beside dx).
     */
    private Tensor normGrad(Tensor base, long offset, int n) {
        return base != null ? base.view(offset, n) : backend.allocateForWrite(DType.F32, n);
    }

    @Override
    public long frozenNumel(int unit) {
        return adapters.on() ? baseNumel[unit] : 0;
    }

    /** The units of a BLOOM model, with Hugging Face parameter names and shapes. */
    public static List<UnitLayout> layout(ModelConfig c) {
        if (c.architecture() != Architecture.BLOOM) {
            throw new IllegalArgumentException("not a BLOOM config: " + c.architecture().hfName());
        }
        int C = c.hidden();
        List<UnitLayout> result = new ArrayList<>();
        result.add(new UnitLayout.Builder("embeddings")
                .add("transformer.word_embeddings.weight", ParamSpec.Kind.EMBEDDING, c.vocabSize(), C).build());
        for (int i = 0; i < c.layers(); i++) {
            String p = "transformer.h." + i + ".";
            var b = new UnitLayout.Builder("block." + i);
            if (i == 0) {
                b.add("transformer.word_embeddings_layernorm.weight", ParamSpec.Kind.NORM, C)
                        .add("transformer.word_embeddings_layernorm.bias", ParamSpec.Kind.BIAS, C);
            }
            b.add(p + "input_layernorm.weight", ParamSpec.Kind.NORM, C)
                    .add(p + "input_layernorm.bias", ParamSpec.Kind.BIAS, C)
                    .add(p + "self_attention.query_key_value.weight", ParamSpec.Kind.MATRIX, 3 * C, C)
                    .add(p + "self_attention.query_key_value.bias", ParamSpec.Kind.BIAS, 3 * C)
                    .add(p + "self_attention.dense.weight", ParamSpec.Kind.MATRIX, C, C)
                    .add(p + "self_attention.dense.bias", ParamSpec.Kind.BIAS, C)
                    .add(p + "post_attention_layernorm.weight", ParamSpec.Kind.NORM, C)
                    .add(p + "post_attention_layernorm.bias", ParamSpec.Kind.BIAS, C)
                    .add(p + "mlp.dense_h_to_4h.weight", ParamSpec.Kind.MATRIX, 4 * C, C)
                    .add(p + "mlp.dense_h_to_4h.bias", ParamSpec.Kind.BIAS, 4 * C)
                    .add(p + "mlp.dense_4h_to_h.weight", ParamSpec.Kind.MATRIX, C, 4 * C)
                    .add(p + "mlp.dense_4h_to_h.bias", ParamSpec.Kind.BIAS, C);
            result.add(b.build());
        }
        var head = new UnitLayout.Builder("head")
                .add("transformer.ln_f.weight", ParamSpec.Kind.NORM, C)
                .add("transformer.ln_f.bias", ParamSpec.Kind.BIAS, C);
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

    /** fp32 buffers: per-row statistics (mean, 1/std, log-sum-exp) and KV caches. */
    private Tensor alloc(int... shape) {
        return backend.allocate(DType.F32, shape);
    }

    /** Activations, in the type of the parameters they are computed with; each is written whole by its op. */
    private Tensor act(Tensor params, int... shape) {
        return backend.allocateForWrite(params.dtype(), shape);
    }

    private float eps() {
        return (float) config.rmsNormEps();
    }

    private AttentionShape attentionShape(TokenBatch batch) {
        return new AttentionShape(batch.batch(), batch.seqLen(), config.heads(), config.heads(), config.headDim(), 0,
                AttentionShape.QkvLayout.PER_HEAD, true);
    }

    @Override
    public Tensor embedForward(Tensor embeddingParams, TokenBatch batch) {
        Tensor x = act(embeddingParams, batch.rows(), config.hidden());
        backend.embeddingForward(x, batch.ids(), embeddingTable(embeddingParams));
        return x;
    }

    @Override
    public void embedBackward(Tensor embeddingGrads, TokenBatch batch, Tensor dx) {
        backend.embeddingBackward(embeddingTable(embeddingGrads), batch.ids(), dx);
    }

    private Tensor embeddingTable(Tensor unit) {
        return unit.view(0, config.vocabSize(), config.hidden());
    }

    // ---- views of a block's flat buffer (parameters and gradients alike) -------------------------------

    private Tensor vec(Tensor u, long offset, int n) {
        return u.view(offset, n);
    }

    private Tensor mat(Tensor u, long offset, int rows, int cols) {
        return u.view(offset, rows, cols);
    }

    @Override
    public BlockActivations blockForward(int layer, Tensor w, Tensor x, TokenBatch batch) {
        return forward(layer, w, x, batch, MemoryScope.NONE, null, null, MemoryScope.NONE, null);
    }

    @Override
    public BlockActivations blockForwardKeepingAttention(int layer, Tensor w, Tensor x, TokenBatch batch,
                                                         MemoryScope kept) {
        return forward(layer, w, x, batch, MemoryScope.NONE, null, null, kept, null).attentionAndOutput();
    }

    @Override
    public BlockActivations blockRecompute(int layer, Tensor w, Tensor x, TokenBatch batch,
                                           BlockActivations keptAttention) {
        return forward(layer, w, x, batch, MemoryScope.NONE, null, linears.castsFor(!adapters.on()), MemoryScope.NONE,
                bloomActivations(keptAttention));
    }

    /** The whole forward, the linears' fp8 casts kept for the backward (under LoRA no input's transposed cast). */
    @Override
    public BlockActivations blockRecompute(int layer, Tensor w, Tensor x, TokenBatch batch) {
        return forward(layer, w, x, batch, MemoryScope.NONE, null, linears.castsFor(!adapters.on()), MemoryScope.NONE,
                null);
    }

    @Override
    public Tensor blockForward(int layer, Tensor w, Tensor x, TokenBatch batch, KvCache cache) {
        return forward(layer, w, x, batch, MemoryScope.NONE, cache, null, MemoryScope.NONE, null).output();
    }

    @Override
    public BlockActivations blockForwardSelective(int layer, Tensor w, Tensor x, TokenBatch batch,
                                                  MemoryScope recomputable) {
        return forward(layer, w, x, batch, recomputable, null, null, MemoryScope.NONE, null).withoutRecomputed();
    }

    /**
     * A block's forward, the activations that selective checkpointing recomputes allocated in {@code recomputable};
     * with a cache (generation), attention over the cache instead of within the batch (no lse is saved); the
     * linears' fp8 casts kept in {@code casts} (null: none). Attention's output and log-sum-exp, and the block's
     * output, are allocated in {@code kept}; with {@code attentionGiven} the first two are taken from it instead of
     * computed again (full checkpointing that keeps attention, {@link #blockForwardKeepingAttention}).
     */
    private Activations forward(int layer, Tensor w, Tensor x, TokenBatch batch, MemoryScope recomputable,
                                KvCache cache, Fp8Casts casts, MemoryScope kept, Activations attentionGiven) {
        BlockOffsets o = offsets.get(layer);
        int N = batch.rows(), C = config.hidden();
        // block 0 first normalises the embeddings: input = layernorm(x)
        Tensor embedMean = null, embedRstd = null, embedInput = null, input = x;
        if (layer == 0) {
            embedInput = x;
            embedMean = alloc(N);
            embedRstd = alloc(N);
            input = act(w, N, C);
            backend.layerNormForward(input, embedMean, embedRstd, x, vec(w, o.embedNormWeight(), C),
                    vec(w, o.embedNormBias(), C), eps());
        }
        Tensor mean1, rstd1, normed1, mean2, rstd2, normed2, hidden;
        try (var entered = recomputable.enter()) {
            mean1 = alloc(N);
            rstd1 = alloc(N);
            normed1 = act(w, N, C);
            mean2 = alloc(N);
            rstd2 = alloc(N);
            normed2 = act(w, N, C);
            hidden = act(w, N, 4 * C);
        }
        // attention: h1 = ln(input); qkv = h1 Wqkv^T + b ([NH,3,HS] per row); mid = input + att Wd^T + bd
        backend.layerNormForward(normed1, mean1, rstd1, input, vec(w, o.norm1Weight(), C), vec(w, o.norm1Bias(), C), eps());
        Tensor qkv = act(w, N, 3 * C);
        linears.forward(backend, qkv, normed1, mat(w, o.qkvWeight(), 3 * C, C), vec(w, o.qkvBias(), 3 * C), casts);
        adapters.forward(backend, layer, batch, w, qkv, normed1, "query_key_value");
        Tensor attention, lse = null;
        if (attentionGiven != null) { // what this forward computed the first time, kept
            attention = attentionGiven.attention();
            lse = attentionGiven.lse();
        } else {
            try (var entered = kept.enter()) {
                attention = act(w, N, C);
                lse = cache == null ? alloc(batch.batch(), config.heads(), batch.seqLen()) : null;
            }
            if (cache == null) {
                backend.attentionForward(attention, lse, qkv, batch.documentStarts(), attentionShape(batch));
            } else {
                cache.attend(backend, layer, attention, qkv, batch, attentionShape(batch));
            }
        }
        Tensor mid = act(w, N, C);
        linears.forward(backend, mid, attention, mat(w, o.denseWeight(), C, C), vec(w, o.denseBias(), C), casts);
        adapters.forward(backend, layer, batch, w, mid, attention, "dense");
        backend.add(mid, input);
        // mlp: h2 = ln(mid); out = mid + gelu(h2 W1^T + b1) W2^T + b2
        backend.layerNormForward(normed2, mean2, rstd2, mid, vec(w, o.norm2Weight(), C), vec(w, o.norm2Bias(), C), eps());
        Tensor up = act(w, N, 4 * C);
        linears.forward(backend, up, normed2, mat(w, o.upWeight(), 4 * C, C), vec(w, o.upBias(), 4 * C), casts);
        adapters.forward(backend, layer, batch, w, up, normed2, "dense_h_to_4h");
        backend.geluForward(hidden, up);
        Tensor out;
        try (var entered = kept.enter()) {
            out = act(w, N, C);
        }
        linears.forward(backend, out, hidden, mat(w, o.downWeight(), C, 4 * C), vec(w, o.downBias(), C), casts);
        adapters.forward(backend, layer, batch, w, out, hidden, "dense_4h_to_h");
        backend.add(out, mid);
        return new Activations(embedInput, embedMean, embedRstd, input, mean1, rstd1, normed1, qkv, attention, lse, mid,
                mean2, rstd2, normed2, up, hidden, out, casts);
    }

    @Override
    public BlockActivations recomputeCheap(int layer, Tensor w, BlockActivations kept, TokenBatch batch) {
        Activations a = bloomActivations(kept);
        BlockOffsets o = offsets.get(layer);
        int N = batch.rows(), C = config.hidden();
        Tensor mean1 = alloc(N), rstd1 = alloc(N), normed1 = act(w, N, C);
        backend.layerNormForward(normed1, mean1, rstd1, a.input(), vec(w, o.norm1Weight(), C), vec(w, o.norm1Bias(), C),
                eps());
        Tensor mean2 = alloc(N), rstd2 = alloc(N), normed2 = act(w, N, C);
        backend.layerNormForward(normed2, mean2, rstd2, a.mid(), vec(w, o.norm2Weight(), C), vec(w, o.norm2Bias(), C),
                eps());
        Tensor hidden = act(w, N, 4 * C);
        backend.geluForward(hidden, a.up());
        return new Activations(a.embedInput(), a.embedMean(), a.embedRstd(), a.input(), mean1, rstd1, normed1, a.qkv(),
                a.attention(), a.lse(), a.mid(), mean2, rstd2, normed2, a.up(), hidden, a.output(), null);
    }

    private static Activations bloomActivations(BlockActivations saved) {
        if (!(saved instanceof Activations a)) {
            throw new IllegalArgumentException("not a BLOOM block's activations: " + saved);
        }
        return a;
    }

    @Override
    public Tensor blockBackward(int layer, Tensor w, Tensor g, BlockActivations saved, Tensor dOut, TokenBatch batch,
                                boolean accumulateGrads) {
        Activations a = bloomActivations(saved);
        boolean acc = accumulateGrads; // false: each gradient of the block written once, whole
        BlockOffsets o = offsets.get(layer);
        // under LoRA g holds the adapters' gradients only: the frozen base's linears get no weight or bias gradient
        // (no product) and its LayerNorms' go to scratch
        Tensor base = adapters.on() ? null : g;
        int N = batch.rows(), C = config.hidden();
        // mlp, in reverse
        Tensor dHidden = act(w, N, 4 * C);
        linears.backward(backend, dHidden, baseGrad(base, o.downWeight(), C, 4 * C), baseGrad(base, o.downBias(), C),
                dOut, a.hidden(), mat(w, o.downWeight(), C, 4 * C), acc, a.casts());
        adapters.backward(backend, layer, batch, w, g, dHidden, dOut, a.hidden(), acc, "dense_4h_to_h");
        Tensor dUp = act(w, N, 4 * C);
        backend.geluBackward(dUp, dHidden, a.up());
        Tensor dNormed2 = act(w, N, C);
        linears.backward(backend, dNormed2, baseGrad(base, o.upWeight(), 4 * C, C), baseGrad(base, o.upBias(), 4 * C),
                dUp, a.normed2(), mat(w, o.upWeight(), 4 * C, C), acc, a.casts());
        adapters.backward(backend, layer, batch, w, g, dNormed2, dUp, a.normed2(), acc, "dense_h_to_4h");
        Tensor dMid = act(w, N, C);
        backend.layerNormBackward(dMid, normGrad(base, o.norm2Weight(), C), normGrad(base, o.norm2Bias(), C), dNormed2,
                a.mid(), vec(w, o.norm2Weight(), C), a.mean2(), a.rstd2(), acc);
        backend.add(dMid, dOut); // residual
        // attention, in reverse
        Tensor dAttention = act(w, N, C);
        linears.backward(backend, dAttention, baseGrad(base, o.denseWeight(), C, C), baseGrad(base, o.denseBias(), C),
                dMid, a.attention(), mat(w, o.denseWeight(), C, C), acc, a.casts());
        adapters.backward(backend, layer, batch, w, g, dAttention, dMid, a.attention(), acc, "dense");
        Tensor dQkv = act(w, N, 3 * C);
        backend.attentionBackward(dQkv, dAttention, a.qkv(), a.attention(), a.lse(), batch.documentStarts(),
                attentionShape(batch));
        Tensor dNormed1 = act(w, N, C);
        linears.backward(backend, dNormed1, baseGrad(base, o.qkvWeight(), 3 * C, C), baseGrad(base, o.qkvBias(), 3 * C),
                dQkv, a.normed1(), mat(w, o.qkvWeight(), 3 * C, C), acc, a.casts());
        adapters.backward(backend, layer, batch, w, g, dNormed1, dQkv, a.normed1(), acc, "query_key_value");
        Tensor dInput = act(w, N, C);
        backend.layerNormBackward(dInput, normGrad(base, o.norm1Weight(), C), normGrad(base, o.norm1Bias(), C),
                dNormed1, a.input(), vec(w, o.norm1Weight(), C), a.mean1(), a.rstd1(), acc);
        backend.add(dInput, dMid); // residual
        if (layer != 0) {
            return dInput;
        }
        // the embedding LayerNorm, in reverse
        Tensor dx = act(w, N, C);
        backend.layerNormBackward(dx, normGrad(base, o.embedNormWeight(), C), normGrad(base, o.embedNormBias(), C),
                dInput, a.embedInput(), vec(w, o.embedNormWeight(), C), a.embedMean(), a.embedRstd(), acc);
        return dx;
    }

    @Override
    public double headLoss(Tensor headParams, Tensor embeddingParams, Tensor x, TokenBatch batch, float gradScale,
                           Tensor headGrads, Tensor embeddingGrads, Tensor dx, Tensor lossPerRow) {
        int N = batch.rows(), C = config.hidden(), V = config.vocabSize();
        Tensor lmHead = config.tieEmbeddings() ? embeddingTable(embeddingParams) : headParams.view(2L * C, V, C);
        Tensor mean = alloc(N), rstd = alloc(N), normed = act(headParams, N, C);
        backend.layerNormForward(normed, mean, rstd, x, headParams.view(0, C), headParams.view(C, C), eps());
        boolean backward = gradScale != 0f;
        Tensor lmHeadGrads = config.tieEmbeddings() ? embeddingGrads : headGrads; // null: frozen, no product for it
        Tensor dLmHead = !backward || lmHeadGrads == null ? null
                : config.tieEmbeddings() ? embeddingTable(lmHeadGrads) : lmHeadGrads.view(2L * C, V, C);
        Tensor dNormed = backward ? act(headParams, N, C) : null;
        double lossSum = headLoss.run(normed, lmHead, batch.targets(), batch.labelledRuns(), gradScale, dLmHead, dNormed,
                lossPerRow);
        if (backward) {
            backend.layerNormBackward(dx, normGrad(headGrads, 0, C), normGrad(headGrads, C, C), dNormed, x,
                    headParams.view(0, C), mean, rstd);
        }
        return lossSum;
    }

    /** Logits (N,V) of the final hidden states x (N,C): ln_f, then the LM head. */
    @Override
    public Tensor logits(Tensor headParams, Tensor embeddingParams, Tensor x) {
        int N = Math.toIntExact(x.numel() / config.hidden()), C = config.hidden(), V = config.vocabSize();
        Tensor lmHead = config.tieEmbeddings() ? embeddingTable(embeddingParams) : headParams.view(2L * C, V, C);
        Tensor normed = act(headParams, N, C);
        backend.layerNormForward(normed, alloc(N), alloc(N), x, headParams.view(0, C), headParams.view(C, C), eps());
        Tensor logits = act(headParams, N, V);
        backend.linearForward(logits, normed, lmHead, null);
        return logits;
    }

    @Override
    public KvCache newKvCache(int batch, int capacity, DType dtype) {
        return KvCache.allocate(backend, config.layers(), batch, capacity, config.hidden(), dtype);
    }
}
