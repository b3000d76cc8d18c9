package io.fsdp4j.model;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;

/**
 * The Llama family: Llama, Mistral (sliding-window attention), Qwen2 (q/k/v biases), Qwen3 (an RMSNorm of each
 * query and key head, q_norm and k_norm, before the rotation), Phi-3 (q|k|v and gate|up fused in the checkpoint,
 * longrope for its long-context variants), and Gemma 2 and 3. A block is
 * x -> x + attention(rmsnorm(x)) -> + mlp(rmsnorm(.)), with rotary position embedding on q and k,
 * grouped-query attention and a SwiGLU MLP.
 *
 * <p>Gemma's block is the same skeleton with these differences, each in one place below: the embeddings are scaled by
 * sqrt(C) (rounded to the compute type, as transformers does) and the pad token's row gets no gradient; every RMSNorm
 * multiplies by (1 + w) ({@link #normWeight}: C values in the parameters' type made before each use; since
 * d(1 + w)/dw = 1 the gradient goes to w unchanged); norms after attention and after the MLP as well as before
 * (x -> mid = x + postnorm(attention(norm(x))) -> mid + postnorm(mlp(prenorm(mid)))); scores q.k /
 * sqrt(query_pre_attn_scalar), soft-capped where attn_logit_softcapping is set (Gemma 2); a GeGLU MLP (GELU's tanh
 * approximation); layers sliding (a window of {@link ModelConfig#slidingWindow} tokens, rope base
 * rope_local_base_freq, unscaled) or global (full causal attention, the config's rope base and scaling); and logits
 * soft-capped where final_logit_softcapping is set ({@link HeadLoss}). Gemma 3 has Qwen3's head norms, Gemma 2 not.
 *
 * <p>A block's flat buffer keeps q, k, v weights adjacent (and their biases), and gate and up adjacent, so
 * that each pair is one matrix product: (NH+2NKV)*HS rows of q|k|v, 2F rows of gate|up.
 */
public final class LlamaModel implements CausalLM {
    private final ModelConfig config;
    private final Backend backend;
    private final HeadLoss headLoss;
    private final List<UnitLayout> units;
    private final BlockOffsets offsets;
    private final Tensor ropeCos;
    private final Tensor ropeSin;
    /** longrope's tables for sequences of at most original_max_position_embeddings tokens (null for other ropes). */
    private final Tensor shortCos, shortSin;
    /** The adapters of the blocks' linears (every block's at the same offsets): none without LoRA. */
    private final BlockAdapters adapters;
    /** Elements of a block's flat buffer before its adapters: the frozen base under LoRA. */
    private final long baseBlockNumel;
    /** Gemma's settings (null for the other families). */
    private final ModelConfig.Gemma gemma;
    /** The rope tables of Gemma's sliding layers (rope_local_base_freq, unscaled); null for the other families. */
    private final Tensor localCos, localSin;

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
     */
    public record Activations(Tensor input, Tensor rstd1, Tensor normed1, Tensor qkvRaw, Tensor rstdQ, Tensor rstdK,
                              Tensor qkv, Tensor attention, Tensor lse, Tensor attnOut, Tensor rstdAttnOut, Tensor mid,
                              Tensor rstd2, Tensor normed2, Tensor gateUp, Tensor hidden, Tensor mlpOut,
                              Tensor rstdMlpOut, Tensor output)
            implements BlockActivations {

        /** These activations less the recomputed ones. */
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
        long[] backward = {e * n * F, e * n * 2 * F, e * n * C, e * n * C, e * n * A, e * n * Q, lse, e * n * C,
            e * n * C}; // dHidden, dGateUp, dNormed2, dMid, dAttention, dQkv, attention's delta, dNormed1, dx
        return new ActivationSizes(e * n * C, kept, recomputed, new long[0], backward, ActivationSizes.head(n, e, c));
    }

    /**
     * Gemma's form of the block (config.gemma() set): the bytes of {@link Activations} and of a block's backward for {@code batch} sequences of {@code seq} tokens,
     * activations of {@code e} bytes an element: kept by selective checkpointing qkvRaw, rstdQ, rstdK, qkv,
     * attention, lse, attnOut, rstdAttnOut, mid, gateUp, mlpOut, rstdMlpOut, output; recomputed rstd1, normed1,
     * rstd2, normed2, hidden.
     */
    private static ActivationSizes gemmaActivationSizes(ModelConfig c, int seq, int batch, int e) {
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

    /**
     * Offsets of a block's parameters in its flat buffer; the same for every block; -1 for what the family lacks.
     * norm2 is the MLP's input norm: post_attention_layernorm in Llama's naming, pre_feedforward_layernorm in Gemma's,
     * where post_attention_layernorm (postAttnNorm) and post_feedforward_layernorm (postMlpNorm) follow attention
     * and the MLP.
     */
    private record BlockOffsets(long norm1, long qkvWeight, long qkvBias, long out, long qNorm, long kNorm,
                                long postAttnNorm, long norm2, long gateUp, long down, long postMlpNorm) {}

    public LlamaModel(ModelConfig config, Backend backend) {
        this(config, backend, null);
    }

    /** With low-rank adapters on the linears {@code lora} names (null: none, every weight trains). */
    public LlamaModel(ModelConfig config, Backend backend, LoraSpec lora) {
        this.config = config;
        this.backend = backend;
        this.gemma = config.gemma();
        this.headLoss = new HeadLoss(backend, HeadLoss.maxLogits(), gemma == null ? 0f : (float) gemma.finalSoftcap());
        this.units = layout(config, lora);
        this.baseBlockNumel = layout(config).get(1).numel();
        if (lora == null) {
            this.adapters = BlockAdapters.NONE;
        } else {
            long[] frozen = new long[config.layers()];
            java.util.Arrays.fill(frozen, baseBlockNumel);
            this.adapters = new BlockAdapters(java.util.Collections.nCopies(config.layers(),
                    adapters(config, lora, units.get(1))), lora.dropout(), frozen);
        }
        UnitLayout block = units.get(1);
        String p = "model.layers.0.";
        boolean sandwich = gemma != null;
        this.offsets = new BlockOffsets(
                block.param(p + "input_layernorm.weight").offset(),
                block.param(p + (fused() ? "self_attn.qkv_proj.weight" : "self_attn.q_proj.weight")).offset(),
                config.qkvBias() ? block.param(p + "self_attn.q_proj.bias").offset() : -1,
                block.param(p + "self_attn.o_proj.weight").offset(),
                headNorms() ? block.param(p + "self_attn.q_norm.weight").offset() : -1,
                headNorms() ? block.param(p + "self_attn.k_norm.weight").offset() : -1,
                sandwich ? block.param(p + "post_attention_layernorm.weight").offset() : -1,
                block.param(p + (sandwich ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"))
                        .offset(),
                block.param(p + (fused() ? "mlp.gate_up_proj.weight" : "mlp.gate_proj.weight")).offset(),
                block.param(p + "mlp.down_proj.weight").offset(),
                sandwich ? block.param(p + "post_feedforward_layernorm.weight").offset() : -1);
        RopeTable rope = RopeTable.of(config, config.maxPositions());
        this.ropeCos = backend.upload(rope.cos(), rope.positions(), rope.half());
        this.ropeSin = backend.upload(rope.sin(), rope.positions(), rope.half());
        RopeScaling scaling = config.ropeScaling();
        if (scaling.type() == RopeScaling.Type.LONGROPE && scaling.originalMaxPositions() < config.maxPositions()) {
            RopeTable shortRope = RopeTable.of(config, config.maxPositions(), scaling.originalMaxPositions());
            this.shortCos = backend.upload(shortRope.cos(), shortRope.positions(), shortRope.half());
            this.shortSin = backend.upload(shortRope.sin(), shortRope.positions(), shortRope.half());
        } else {
            this.shortCos = null;
            this.shortSin = null;
        }
        boolean sameRope = gemma != null && gemma.localRopeTheta() == config.ropeTheta()
                && config.ropeScaling().type() == RopeScaling.Type.DEFAULT; // Gemma 2: one rope for every layer
        if (sameRope) {
            this.localCos = ropeCos;
            this.localSin = ropeSin;
        } else if (gemma != null && gemma.slidingLayers().contains(true)) {
            RopeTable local = RopeTable.of(new ModelConfig(Architecture.LLAMA, config.vocabSize(), config.hidden(),
                    config.intermediate(), config.layers(), config.heads(), config.kvHeads(), config.headDim(),
                    gemma.localRopeTheta(), config.rmsNormEps(), config.tieEmbeddings(), false, 0,
                    config.maxPositions()), config.maxPositions());
            this.localCos = backend.upload(local.cos(), local.positions(), local.half());
            this.localSin = backend.upload(local.sin(), local.positions(), local.half());
        } else {
            this.localCos = null;
            this.localSin = null;
        }
    }

    /** Whether layer {@code layer} attends within the sliding window: Gemma's sliding layers, or every layer. */
    private boolean sliding(int layer) {
        return gemma == null || gemma.slidingLayers().get(layer);
    }

    /** Whether q|k|v and gate|up are single tensors in the checkpoint (Phi-3's qkv_proj, gate_up_proj). */
    private boolean fused() {
        return config.architecture() == Architecture.PHI3;
    }

    /**
     * The rope table (cos, sin) of layer {@code layer} for sequences of {@code length} tokens: Gemma's sliding layers'
     * own; longrope's short factors up to original_max_position_embeddings and the long ones beyond, as transformers
     * chooses by the batch's length.
     */
    private Tensor[] rope(int layer, int length) {
        if (gemma != null && sliding(layer)) {
            return new Tensor[] {localCos, localSin};
        }
        boolean shortSeq = shortCos != null && length <= config.ropeScaling().originalMaxPositions();
        return shortSeq ? new Tensor[] {shortCos, shortSin} : new Tensor[] {ropeCos, ropeSin};
    }

    /** The units of a model of this family, with Hugging Face parameter names. */
    public static List<UnitLayout> layout(ModelConfig c) {
        if (!c.architecture().usesRope()) {
            throw new IllegalArgumentException(c.architecture().hfName() + " is not of the Llama family: "
                    + "build it with CausalLMs.create and lay it out with CausalLMs.layout");
        }
        boolean sandwich = c.architecture().gemma();
        int C = c.hidden(), F = c.intermediate(), HS = c.headDim();
        List<UnitLayout> result = new ArrayList<>();
        result.add(new UnitLayout.Builder("embeddings")
                .add("model.embed_tokens.weight", ParamSpec.Kind.EMBEDDING, c.vocabSize(), C).build());
        for (int i = 0; i < c.layers(); i++) {
            String p = "model.layers." + i + ".";
            boolean fused = c.architecture() == Architecture.PHI3;
            var b = new UnitLayout.Builder("block." + i).add(p + "input_layernorm.weight", ParamSpec.Kind.NORM, C);
            if (fused) {
                b.add(p + "self_attn.qkv_proj.weight", ParamSpec.Kind.MATRIX, c.qkvWidth(), C);
            } else {
                b.add(p + "self_attn.q_proj.weight", ParamSpec.Kind.MATRIX, c.heads() * HS, C)
                        .add(p + "self_attn.k_proj.weight", ParamSpec.Kind.MATRIX, c.kvHeads() * HS, C)
                        .add(p + "self_attn.v_proj.weight", ParamSpec.Kind.MATRIX, c.kvHeads() * HS, C);
            }
            if (c.qkvBias()) {
                b.add(p + "self_attn.q_proj.bias", ParamSpec.Kind.BIAS, c.heads() * HS)
                        .add(p + "self_attn.k_proj.bias", ParamSpec.Kind.BIAS, c.kvHeads() * HS)
                        .add(p + "self_attn.v_proj.bias", ParamSpec.Kind.BIAS, c.kvHeads() * HS);
            }
            b.add(p + "self_attn.o_proj.weight", ParamSpec.Kind.MATRIX, C, c.heads() * HS);
            if (c.architecture().normsQueriesAndKeys()) {
                b.add(p + "self_attn.q_norm.weight", ParamSpec.Kind.NORM, HS)
                        .add(p + "self_attn.k_norm.weight", ParamSpec.Kind.NORM, HS);
            }
            b.add(p + "post_attention_layernorm.weight", ParamSpec.Kind.NORM, C);
            if (sandwich) {
                b.add(p + "pre_feedforward_layernorm.weight", ParamSpec.Kind.NORM, C);
            }
            if (fused) {
                b.add(p + "mlp.gate_up_proj.weight", ParamSpec.Kind.MATRIX, 2 * F, C);
            } else {
                b.add(p + "mlp.gate_proj.weight", ParamSpec.Kind.MATRIX, F, C)
                        .add(p + "mlp.up_proj.weight", ParamSpec.Kind.MATRIX, F, C);
            }
            b.add(p + "mlp.down_proj.weight", ParamSpec.Kind.MATRIX, C, F);
            if (sandwich) {
                b.add(p + "post_feedforward_layernorm.weight", ParamSpec.Kind.NORM, C);
            }
            result.add(b.build());
        }
        var head = new UnitLayout.Builder("head").add("model.norm.weight", ParamSpec.Kind.NORM, C);
        if (!c.tieEmbeddings()) {
            head.add("lm_head.weight", ParamSpec.Kind.MATRIX, c.vocabSize(), C);
        }
        result.add(head.build());
        return List.copyOf(result);
    }

    /**
     * The units with LoRA's adapters appended to each block, after its base parameters, with PEFT's names (less its
     * {@code base_model.model.} prefix): {@code model.layers.N.self_attn.q_proj.lora_A.weight} (r, in) and
     * {@code ...lora_B.weight} (out, r), in the order of {@code lora.modules()}. Without LoRA (null), {@link #layout}.
     */
    public static List<UnitLayout> layout(ModelConfig c, LoraSpec lora) {
        List<UnitLayout> base = layout(c);
        return lora == null ? base : lora.appendTo(base, c.layers(), (i, m) -> "model.layers." + i + "." + linearOf(m));
    }

    /** The module's path in a block: {@code self_attn.q_proj}, ..., {@code mlp.down_proj}. */
    private static String linearOf(String module) {
        return switch (module) {
            case "q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj" -> "self_attn." + module;
            default -> "mlp." + module;
        };
    }

    /** Where each adapter sits in a block's buffer and in the product its linear is part of. */
    private static Map<String, LoraLinear> adapters(ModelConfig c, LoraSpec lora, UnitLayout block) {
        int C = c.hidden(), F = c.intermediate(), HS = c.headDim(), q = c.heads() * HS, kv = c.kvHeads() * HS;
        Map<String, LoraLinear> result = new LinkedHashMap<>();
        for (String module : lora.modules()) {
            String linear = "model.layers.0." + linearOf(module);
            long a = block.param(LoraSpec.adapterName(linear, 'A')).offset();
            long b = block.param(LoraSpec.adapterName(linear, 'B')).offset();
            float s = (float) lora.scaling();
            int r = lora.rank();
            result.put(module, switch (module) {
                case "q_proj" -> new LoraLinear(a, b, C, q, 0, c.qkvWidth(), r, s);
                case "k_proj" -> new LoraLinear(a, b, C, kv, q, c.qkvWidth(), r, s);
                case "v_proj" -> new LoraLinear(a, b, C, kv, q + kv, c.qkvWidth(), r, s);
                case "o_proj" -> new LoraLinear(a, b, q, C, 0, C, r, s);
                case "gate_proj" -> new LoraLinear(a, b, C, F, 0, 2 * F, r, s);
                case "up_proj" -> new LoraLinear(a, b, C, F, F, 2 * F, r, s);
                case "down_proj" -> new LoraLinear(a, b, F, C, 0, C, r, s);
                case "qkv_proj" -> new LoraLinear(a, b, C, c.qkvWidth(), 0, c.qkvWidth(), r, s); // Phi-3's fused
                case "gate_up_proj" -> new LoraLinear(a, b, C, 2 * F, 0, 2 * F, r, s);
                default -> throw new IllegalArgumentException("no linear " + module + " in a Llama block");
            });
        }
        return result;
    }

    /** A base weight's gradient: its view of the block's gradients, or none when the base is frozen (base null). */
    private static Tensor baseGrad(Tensor base, UnaryOperator<Tensor> view) {
        return base == null ? null : view.apply(base);
    }

    /**
     * A base norm weight's gradient: its view of the block's gradients, or when the base is frozen (base null) a
     * scratch of its {@code size} values, dropped (the norm's backward computes it beside dx, an N*C pass).
     */
    private Tensor normGrad(Tensor base, UnaryOperator<Tensor> view, int size) {
        return base != null ? view.apply(base) : backend.allocateForWrite(DType.F32, size);
    }

    @Override
    public long frozenNumel(int unit) {
        if (!adapters.on()) {
            return 0;
        }
        return unit == CausalLM.embeddingUnit() || unit == headUnit() ? units.get(unit).numel() : baseBlockNumel;
    }

    /** Whether each query and key head is RMS-normalised before the rotation (Qwen3). */
    private boolean headNorms() {
        return config.architecture().normsQueriesAndKeys();
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

    @Override
    public List<AttentionShape> attentionShapes(int batch, int seqLen) {
        var shapes = new java.util.LinkedHashSet<AttentionShape>();
        for (int layer = 0; layer < config.layers(); layer++) {
            shapes.add(attentionShape(layer, batch, seqLen));
        }
        return List.copyOf(shapes);
    }

    /** Layer {@code layer}'s attention: its window, and Gemma's scale (query_pre_attn_scalar) and soft cap. */
    private AttentionShape attentionShape(int layer, TokenBatch batch) {
        return attentionShape(layer, batch.batch(), batch.seqLen());
    }

    private AttentionShape attentionShape(int layer, int batch, int seqLen) {
        var shape = new AttentionShape(batch, seqLen, config.heads(), config.kvHeads(),
                config.headDim(), sliding(layer) ? config.slidingWindow() : 0);
        return gemma == null ? shape : shape.withScores((float) (1.0 / Math.sqrt(gemma.queryPreAttnScalar())),
                (float) gemma.attnSoftcap());
    }

    /** The weight an RMSNorm multiplies by: w, or Gemma's 1 + w (in w's type). */
    private Tensor normWeight(Tensor w) {
        if (gemma == null) {
            return w;
        }
        Tensor t = backend.allocateForWrite(w.dtype(), w.shape());
        backend.fill(t, 1f);
        backend.add(t, w);
        return t;
    }

    /** out = rmsnorm(x) * weight (w or 1 + w); rstd saved. */
    private void norm(Tensor out, Tensor rstd, Tensor x, Tensor w) {
        backend.rmsNormForward(out, rstd, x, normWeight(w), (float) config.rmsNormEps());
    }

    /** dx written, dw accumulated (or written): the gradient of 1 + w is w's. */
    private void normBackward(Tensor dx, Tensor dw, Tensor dOut, Tensor x, Tensor w, Tensor rstd, boolean acc) {
        backend.rmsNormBackward(dx, dw, dOut, x, normWeight(w), rstd, acc);
    }

    /** The MLP's activation: silu(gate) * up, or Gemma's gelu(gate) * up. */
    private void mlpActivation(Tensor hidden, Tensor gateUp) {
        if (gemma == null) {
            backend.swigluForward(hidden, gateUp);
        } else {
            backend.gegluForward(hidden, gateUp);
        }
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

    // ---- views of a block's flat buffer (parameters and gradients alike) -------------------------------

    private Tensor norm1(Tensor u) { return u.view(offsets.norm1(), config.hidden()); }

    private Tensor qkvWeight(Tensor u) { return u.view(offsets.qkvWeight(), config.qkvWidth(), config.hidden()); }

    private Tensor qkvBias(Tensor u) { return config.qkvBias() ? u.view(offsets.qkvBias(), config.qkvWidth()) : null; }

    private Tensor outWeight(Tensor u) { return u.view(offsets.out(), config.hidden(), config.heads() * config.headDim()); }

    private Tensor qNorm(Tensor u) { return u.view(offsets.qNorm(), config.headDim()); }

    private Tensor kNorm(Tensor u) { return u.view(offsets.kNorm(), config.headDim()); }

    private Tensor postAttnNorm(Tensor u) { return u.view(offsets.postAttnNorm(), config.hidden()); }

    private Tensor norm2(Tensor u) { return u.view(offsets.norm2(), config.hidden()); }

    private Tensor postMlpNorm(Tensor u) { return u.view(offsets.postMlpNorm(), config.hidden()); }

    private Tensor gateUpWeight(Tensor u) { return u.view(offsets.gateUp(), 2 * config.intermediate(), config.hidden()); }

    private Tensor downWeight(Tensor u) { return u.view(offsets.down(), config.hidden(), config.intermediate()); }

    @Override
    public BlockActivations blockForward(int layer, Tensor w, Tensor x, TokenBatch batch) {
        return forward(layer, w, x, batch, MemoryScope.NONE, null, true);
    }

    /**
     * Without the MLP's down projection and the residual add (Llama's form: the backward reads neither their output
     * nor anything only they compute): a ninth of a block's matrix work less in every recomputed forward. Gemma's
     * post-MLP norm reads the projection, so its form computes everything but the last add.
     */
    @Override
    public BlockActivations blockRecompute(int layer, Tensor w, Tensor x, TokenBatch batch) {
        return forward(layer, w, x, batch, MemoryScope.NONE, null, false);
    }

    @Override
    public Tensor blockForward(int layer, Tensor w, Tensor x, TokenBatch batch, KvCache cache) {
        return forward(layer, w, x, batch, MemoryScope.NONE, cache, true).output();
    }

    @Override
    public BlockActivations blockForwardSelective(int layer, Tensor w, Tensor x, TokenBatch batch,
                                                  MemoryScope recomputable) {
        return forward(layer, w, x, batch, recomputable, null, true).withoutRecomputed();
    }

    /**
     * A block's forward, the activations that selective checkpointing recomputes allocated in {@code recomputable};
     * with a cache (generation), attention over the cache instead of within the batch (no lse is saved).
     */
    private Activations forward(int layer, Tensor w, Tensor x, TokenBatch batch, MemoryScope recomputable,
                                KvCache cache, boolean withOutput) {
        int N = batch.rows(), C = config.hidden(), F = config.intermediate();
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
        norm(normed1, rstd1, x, norm1(w));
        Tensor qkvRaw = act(w, N, config.qkvWidth());
        backend.linearForward(qkvRaw, normed1, qkvWeight(w), qkvBias(w));
        adapters.forward(backend, layer, batch, w, qkvRaw, normed1, "q_proj", "k_proj", "v_proj", "qkv_proj");
        Tensor rstdQ = null, rstdK = null, qkv = qkvRaw;
        if (headNorms()) {
            rstdQ = rowStats(N, config.heads());
            rstdK = rowStats(N, config.kvHeads());
            qkv = normHeads(w, qkvRaw, rstdQ, rstdK);
        } else {
            qkvRaw = null;
        }
        Tensor[] rope = rope(layer, cache == null ? batch.seqLen() : cache.capacity()); // generation: one table
        backend.ropeForward(qkv, config.heads() + config.kvHeads(), batch.positions(), rope[0], rope[1]);
        Tensor attention = act(w, N, config.heads() * config.headDim());
        Tensor lse = null;
        if (cache == null) {
            lse = rowStats(batch.batch(), config.heads(), batch.seqLen());
            backend.attentionForward(attention, lse, qkv, batch.documentStarts(), attentionShape(layer, batch));
        } else {
            cache.attend(backend, layer, attention, qkv, batch, attentionShape(layer, batch));
        }
        Tensor attnOut = act(w, N, C), rstdAttnOut = null, mid = attnOut;
        backend.linearForward(attnOut, attention, outWeight(w), null);
        adapters.forward(backend, layer, batch, w, attnOut, attention, "o_proj");
        if (gemma != null) {
            rstdAttnOut = rowStats(N);
            mid = act(w, N, C);
            norm(mid, rstdAttnOut, attnOut, postAttnNorm(w));
        } else {
            attnOut = null;
        }
        backend.add(mid, x);
        // mlp: h2 = rmsnorm(mid); out = mid + (silu(h2 Wg^T) * h2 Wu^T) Wd^T (Gemma: gelu, and postnorm of the product)
        norm(normed2, rstd2, mid, norm2(w));
        Tensor gateUp = act(w, N, 2 * F);
        backend.linearForward(gateUp, normed2, gateUpWeight(w), null);
        adapters.forward(backend, layer, batch, w, gateUp, normed2, "gate_proj", "up_proj", "gate_up_proj");
        mlpActivation(hidden, gateUp);
        // recomputed for the backward (withOutput false), what follows is read only by Gemma's post-MLP norm (its
        // input and statistics); the residual sum, the block's output, by nothing
        Tensor mlpOut = null, rstdMlpOut = null, out = null;
        if (withOutput || gemma != null) {
            mlpOut = act(w, N, C);
            backend.linearForward(mlpOut, hidden, downWeight(w), null);
            adapters.forward(backend, layer, batch, w, mlpOut, hidden, "down_proj");
            out = mlpOut;
            if (gemma != null) {
                rstdMlpOut = rowStats(N);
                out = act(w, N, C);
                norm(out, rstdMlpOut, mlpOut, postMlpNorm(w));
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
                rstd2, normed2, gateUp, hidden, mlpOut, rstdMlpOut, out);
    }

    /** qkv (N, qkvWidth): a copy of qkvRaw with each query and key head RMS-normalised (its v heads as they were). */
    private Tensor normHeads(Tensor w, Tensor qkvRaw, Tensor rstdQ, Tensor rstdK) {
        float eps = (float) config.rmsNormEps();
        Tensor qkv = act(w, qkvRaw.shape());
        backend.copy(qkvRaw, qkv);
        backend.headRmsNormForward(qkv, rstdQ, qkvRaw, normWeight(qNorm(w)), 0, eps);
        backend.headRmsNormForward(qkv, rstdK, qkvRaw, normWeight(kNorm(w)), config.heads(), eps);
        return qkv;
    }

    @Override
    public BlockActivations recomputeCheap(int layer, Tensor w, BlockActivations kept, TokenBatch batch) {
        Activations a = llamaActivations(kept);
        int N = batch.rows(), C = config.hidden(), F = config.intermediate();
        Tensor rstd1 = rowStats(N), normed1 = act(w, N, C);
        norm(normed1, rstd1, a.input(), norm1(w));
        Tensor rstd2 = rowStats(N), normed2 = act(w, N, C);
        norm(normed2, rstd2, a.mid(), norm2(w));
        Tensor hidden = act(w, N, F);
        mlpActivation(hidden, a.gateUp());
        return new Activations(a.input(), rstd1, normed1, a.qkvRaw(), a.rstdQ(), a.rstdK(), a.qkv(), a.attention(),
                a.lse(), a.attnOut(), a.rstdAttnOut(), a.mid(), rstd2, normed2, a.gateUp(), hidden, a.mlpOut(),
                a.rstdMlpOut(), a.output());
    }

    private static Activations llamaActivations(BlockActivations saved) {
        if (!(saved instanceof Activations a)) {
            throw new IllegalArgumentException("not a Llama block's activations: " + saved);
        }
        return a;
    }

    @Override
    public Tensor blockBackward(int layer, Tensor w, Tensor g, BlockActivations saved, Tensor dOut, TokenBatch batch,
                                boolean accumulateGrads) {
        Activations a = llamaActivations(saved);
        boolean acc = accumulateGrads; // false: each gradient of the block written once, whole
        // under LoRA g holds the adapters' gradients only: the frozen base's linears get no weight gradient (no
        // product) and its norms' go to scratch
        Tensor base = adapters.on() ? null : g;
        int N = batch.rows(), C = config.hidden(), F = config.intermediate();
        // mlp, in reverse
        Tensor dMlpOut = dOut;
        if (gemma != null) {
            dMlpOut = act(w, N, C);
            normBackward(dMlpOut, normGrad(base, this::postMlpNorm, C), dOut, a.mlpOut(), postMlpNorm(w),
                    a.rstdMlpOut(), acc);
        }
        Tensor dHidden = act(w, N, F);
        backend.linearBackward(dHidden, baseGrad(base, this::downWeight), null, dMlpOut, a.hidden(), downWeight(w),
                acc);
        adapters.backward(backend, layer, batch, w, g, dHidden, dMlpOut, a.hidden(), acc, "down_proj");
        Tensor dGateUp = act(w, N, 2 * F);
        if (gemma == null) {
            backend.swigluBackward(dGateUp, dHidden, a.gateUp());
        } else {
            backend.gegluBackward(dGateUp, dHidden, a.gateUp());
        }
        Tensor dNormed2 = act(w, N, C);
        backend.linearBackward(dNormed2, baseGrad(base, this::gateUpWeight), null, dGateUp, a.normed2(),
                gateUpWeight(w), acc);
        adapters.backward(backend, layer, batch, w, g, dNormed2, dGateUp, a.normed2(), acc, "gate_proj", "up_proj",
                "gate_up_proj");
        Tensor dMid = act(w, N, C);
        normBackward(dMid, normGrad(base, this::norm2, C), dNormed2, a.mid(), norm2(w), a.rstd2(), acc);
        backend.add(dMid, dOut); // residual
        // attention, in reverse
        Tensor dAttnOut = dMid;
        if (gemma != null) {
            dAttnOut = act(w, N, C);
            normBackward(dAttnOut, normGrad(base, this::postAttnNorm, C), dMid, a.attnOut(), postAttnNorm(w),
                    a.rstdAttnOut(), acc);
        }
        Tensor dAttention = act(w, N, config.heads() * config.headDim());
        backend.linearBackward(dAttention, baseGrad(base, this::outWeight), null, dAttnOut, a.attention(),
                outWeight(w), acc);
        adapters.backward(backend, layer, batch, w, g, dAttention, dAttnOut, a.attention(), acc, "o_proj");
        Tensor dQkv = act(w, N, config.qkvWidth()); // attentionBackward writes every column
        backend.attentionBackward(dQkv, dAttention, a.qkv(), a.attention(), a.lse(), batch.documentStarts(),
                attentionShape(layer, batch));
        Tensor[] rope = rope(layer, batch.seqLen());
        backend.ropeBackward(dQkv, config.heads() + config.kvHeads(), batch.positions(), rope[0], rope[1]);
        if (headNorms()) { // in place: the q and k columns of dQkv become the gradient before the head norms
            backend.headRmsNormBackward(dQkv, normGrad(base, this::qNorm, config.headDim()), dQkv, a.qkvRaw(),
                    normWeight(qNorm(w)), a.rstdQ(), 0, acc);
            backend.headRmsNormBackward(dQkv, normGrad(base, this::kNorm, config.headDim()), dQkv, a.qkvRaw(),
                    normWeight(kNorm(w)), a.rstdK(),
                    config.heads(), acc);
        }
        Tensor dNormed1 = act(w, N, C);
        backend.linearBackward(dNormed1, baseGrad(base, this::qkvWeight), baseGrad(base, this::qkvBias), dQkv,
                a.normed1(), qkvWeight(w), acc);
        adapters.backward(backend, layer, batch, w, g, dNormed1, dQkv, a.normed1(), acc, "q_proj", "k_proj", "v_proj",
                "qkv_proj");
        Tensor dx = act(w, N, C);
        normBackward(dx, normGrad(base, this::norm1, C), dNormed1, a.input(), norm1(w), a.rstd1(), acc);
        backend.add(dx, dMid); // residual
        return dx;
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
        norm(normed, rowStats(N), x, headParams.view(0, C));
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
        norm(normed, rstd, x, normWeight);
        boolean backward = gradScale != 0f;
        Tensor lmHeadGrads = config.tieEmbeddings() ? embeddingGrads : headGrads; // null: frozen, no product for it
        Tensor dLmHead = !backward || lmHeadGrads == null ? null
                : config.tieEmbeddings() ? embeddingTable(lmHeadGrads) : lmHeadGrads.view(C, V, C);
        Tensor dNormed = backward ? act(headParams, N, C) : null;
        double lossSum = headLoss.run(normed, lmHead, batch.targets(), batch.labelledRuns(), gradScale, dLmHead, dNormed,
                lossPerRow);
        if (backward) {
            normBackward(dx, normGrad(headGrads, h -> h.view(0, C), C), dNormed, x, normWeight, rstd, true);
        }
        return lossSum;
    }
}
