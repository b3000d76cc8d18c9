package io.fsdp4j.backend;

import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Fp8Scaling;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.MemorySegment;

/**
 * The operations a model and the FSDP engine need from a device. Every op comes as a forward/backward pair
 * with explicit inputs and outputs; there is no autograd.
 *
 * <p>Conventions, for every op: outputs come first in the argument list; a backward op <em>writes</em> the
 * gradient of its activation inputs and <em>accumulates</em> ({@code +=}) into the gradients of parameters,
 * so that gradient accumulation and tied weights need no extra code. Shape letters: N rows (B*T tokens),
 * C model width, I input width, O output width, F MLP width, V vocabulary, NH/NKV heads, HS head size.
 */
public sealed interface Backend permits CpuBackend, CudaBackend {

    String name();

    // ---- memory -------------------------------------------------------------------------------------

    /**
     * Whether the ops compute on tensors of this float type. Activations take the type of the parameters they
     * are computed with; a backend that cannot compute in a type (the CPU backend computes in fp32 only) gets
     * parameters widened to fp32 after they are gathered.
     */
    boolean computesIn(DType dtype);

    /** A new, empty memory scope (see {@link MemoryScope}). */
    MemoryScope newScope();

    /** A new zero-filled tensor, owned by the current thread's entered scope, if any. */
    Tensor allocate(DType dtype, int... shape);

    /**
     * As {@link #allocate}, but the contents are undefined: for a buffer that the next operation writes whole before
     * anything reads it (an op's output, a cast's or a collective's destination), so the device skips zeroing it.
     */
    default Tensor allocateForWrite(DType dtype, int... shape) {
        return allocate(dtype, shape);
    }

    /** A new F32 tensor holding a copy of {@code values}. */
    Tensor upload(float[] values, int... shape);

    /** A new I32 tensor holding a copy of {@code values}. */
    Tensor uploadInts(int[] values, int... shape);

    /** The elements of any float tensor, converted to fp32, on the host. */
    float[] toFloats(Tensor t);

    int[] toInts(Tensor t);

    void fill(Tensor t, float value);

    /** dst = src, element-wise over equal sizes, converting dtype (bf16 rounding is to nearest even). */
    void copy(Tensor src, Tensor dst);

    /** dst += src over equal sizes (fp32 accumulation; a bf16 dst is rounded after the add). */
    void add(Tensor dst, Tensor src);

    void scale(Tensor t, float factor);

    /** Sum of squares of the elements, accumulated in double. */
    double sumOfSquares(Tensor t);

    /**
     * {@link #sumOfSquares} of each tensor, the same numbers, with the host waiting for the device once for all of
     * them (the gradient norm of every unit of a step: no host synchronisation per unit).
     */
    default double[] sumsOfSquares(java.util.List<Tensor> tensors) {
        double[] sums = new double[tensors.size()];
        for (int i = 0; i < sums.length; i++) {
            sums[i] = sumOfSquares(tensors.get(i));
        }
        return sums;
    }

    // ---- host memory: state kept off the device (fsdp.cpu_offload) ------------------------------------

    /**
     * Zero-filled native host memory for {@code floats} fp32 values of state kept off the device: page-locked on
     * CUDA (so that copies are asynchronous and fast), plain native memory on the CPU. It lives as long as the
     * backend.
     */
    MemorySegment allocateHost(long floats);

    /**
     * dst (fp32, this backend's) = the first dst.numel() floats of {@code src}, copied on the backend's
     * host-to-device stream after the compute work queued so far, without making the host wait. Ops queued after
     * {@link HostCopy#await} see dst filled; {@code src} must not change before then.
     */
    HostCopy copyFromHost(MemorySegment src, Tensor dst);

    /**
     * The first src.numel() floats of {@code dst} = src (fp32), copied on the backend's device-to-host stream after
     * the compute work queued so far. Ops queued after {@link HostCopy#await} may overwrite or free src; the host
     * reads dst after {@link #waitForHostCopies}.
     */
    HostCopy copyToHost(Tensor src, MemorySegment dst);

    /** Blocks the host until every copy between host and device queued so far is complete. */
    void waitForHostCopies();

    /** A copy between host and device on its way (done already on the CPU backend). */
    interface HostCopy {
        /** Orders the compute stream after the copy (on the device: the host does not wait). Idempotent. */
        void await();
    }

    // ---- ops ----------------------------------------------------------------------------------------

    /** out (N,C) = table[ids] ; ids (N) I32, table (V,C). */
    void embeddingForward(Tensor out, Tensor ids, Tensor table);

    /** dTable (V,C) += scatter of dOut (N,C) at ids. */
    void embeddingBackward(Tensor dTable, Tensor ids, Tensor dOut);

    /** out (N,C) = x / rms(x) * weight ; rstd (N) saved: 1/sqrt(mean(x^2) + eps). */
    void rmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, float eps);

    /** dx (N,C) written; dWeight (C) accumulated. */
    void rmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd);

    /**
     * As {@link #rmsNormBackward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)}, with dWeight written instead
     * (its contents ignored) when {@code accumulate} is false.
     */
    default void rmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd,
                                 boolean accumulate) {
        if (!accumulate) {
            fill(dWeight, 0f);
        }
        rmsNormBackward(dx, dWeight, dOut, x, weight, rstd);
    }

    /**
     * LayerNorm: out (N,C) = (x - mean) * rstd * weight + bias ; mean and rstd (N) saved, fp32:
     * rstd = 1/sqrt(var(x) + eps) with the biased variance (as torch.nn.LayerNorm).
     */
    void layerNormForward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias, float eps);

    /** dx (N,C) written; dWeight and dBias (C) accumulated. */
    void layerNormBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight, Tensor mean,
                           Tensor rstd);

    /** As the accumulating layerNormBackward, with dWeight and dBias written instead when {@code accumulate} is false. */
    default void layerNormBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                                   Tensor mean, Tensor rstd, boolean accumulate) {
        if (!accumulate) {
            fill(dWeight, 0f);
            fill(dBias, 0f);
        }
        layerNormBackward(dx, dWeight, dBias, dOut, x, weight, mean, rstd);
    }

    /** out (N,O) = x (N,I) @ weight (O,I)^T + bias (O), bias may be null. */
    void linearForward(Tensor out, Tensor x, Tensor weight, Tensor bias);

    /**
     * dx (N,I) written (skipped if null); dWeight (O,I) and dBias (O, may be null) accumulated. dWeight null: the
     * weight is frozen, no parameter gradient is wanted and its product is not computed (dBias must be null too).
     */
    void linearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight);

    /**
     * As the accumulating linearBackward, with dWeight and dBias written instead (their contents ignored) when
     * {@code accumulate} is false: the first gradient of a step into a buffer nobody zeroed. The same numbers as
     * accumulating into zeros (a backend may compute them without reading the old contents). dWeight null, as above:
     * no parameter gradient.
     */
    default void linearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                                boolean accumulate) {
        if (!accumulate && dWeight != null) {
            fill(dWeight, 0f);
            if (dBias != null) {
                fill(dBias, 0f);
            }
        }
        linearBackward(dx, dWeight, dBias, dOut, x, weight);
    }

    /**
     * As {@link #linearForward}, the product in fp8 (fsdp.param_dtype fp8: the blocks' linears), torchao's
     * "tensorwise" recipe: x and weight are each cast to {@link io.fsdp4j.tensor.Fp8#E4M3} with a scale of their own,
     * 448 / the tensor's largest magnitude ({@link io.fsdp4j.tensor.Fp8#scale}), their product accumulated in fp32 and
     * multiplied by both scales' inverses, the bias added after (in fp32), out rounded to its type. Where N, I or O is
     * not a multiple of 16 (what the fp8 tensor cores take) the product is {@link #linearForward}'s, in the
     * parameters' type, on every backend ({@link Fp8Products#applies}).
     */
    default void fp8LinearForward(Tensor out, Tensor x, Tensor weight, Tensor bias) {
        fp8LinearForward(out, x, weight, bias, null);
    }

    /**
     * {@link #fp8LinearForward(Tensor, Tensor, Tensor, Tensor)} whose backward follows with the same {@code casts}
     * (a forward recomputed for its backward; null: none): the weight's and x's casts are kept there, in the layouts
     * the backward's products take too, for {@link #fp8LinearBackward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
     * boolean, Fp8Casts)} to reuse; a cast already there is reused. The same numbers as without.
     */
    default void fp8LinearForward(Tensor out, Tensor x, Tensor weight, Tensor bias, Fp8Casts casts) {
        fp8LinearForward(out, x, weight, bias, casts, Fp8Scaling.TENSOR);
    }

    /**
     * {@link #fp8LinearForward(Tensor, Tensor, Tensor, Tensor, Fp8Casts)} with the operands scaled as {@code scaling}
     * says: {@link Fp8Scaling#TENSOR} as above; {@link Fp8Scaling#ROW}, torchao's "rowwise" recipe, a scale for each
     * token of x and each output feature of the weight, out[r, c] = (x8 @ w8^T)[r, c] times 1/sx[r] times 1/sw[c].
     */
    void fp8LinearForward(Tensor out, Tensor x, Tensor weight, Tensor bias, Fp8Casts casts, Fp8Scaling scaling);

    /**
     * The backward of {@link #fp8LinearForward}, arguments as {@link #linearBackward(Tensor, Tensor, Tensor, Tensor,
     * Tensor, Tensor, boolean)}'s: dOut cast to {@link io.fsdp4j.tensor.Fp8#E5M2} (scale 57344 / its amax), x and
     * weight to e4m3 as in the forward; dx = dOut8 @ W8 and dWeight (+)= dOut8^T @ x8, each in fp32 times the two
     * scales' inverses; dBias (+)= the column sums of dOut itself (not cast). Shapes that are not multiples of 16:
     * {@link #linearBackward}'s product, as in the forward.
     */
    default void fp8LinearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                                   boolean accumulate) {
        fp8LinearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate, null);
    }

    /**
     * {@link #fp8LinearBackward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, boolean)} taking the weight's and x's
     * casts from {@code casts} where its forward kept them (null: none); the same numbers as without.
     */
    default void fp8LinearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                                   boolean accumulate, Fp8Casts casts) {
        fp8LinearBackward(dx, dWeight, dBias, dOut, x, weight, accumulate, casts, Fp8Scaling.TENSOR);
    }

    /**
     * {@link #fp8LinearBackward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, boolean, Fp8Casts)} with the operands
     * scaled as {@code scaling} says; {@link Fp8Scaling#ROW}: dx = dOut8 @ W8 with a scale for each token of dOut and
     * each input feature (column) of the weight, dWeight (+)= dOut8^T @ x8 with a scale for each output feature of dOut
     * and each input feature of x (columns, over the tokens).
     */
    void fp8LinearBackward(Tensor dx, Tensor dWeight, Tensor dBias, Tensor dOut, Tensor x, Tensor weight,
                           boolean accumulate, Fp8Casts casts, Fp8Scaling scaling);

    /**
     * Rotates in place the first {@code rotatedHeads} heads of each row of x (N, H*HS) by position:
     * with halves x1, x2 of a head, x1' = x1 cos - x2 sin, x2' = x2 cos + x1 sin ; cos, sin (P, HS/2).
     */
    void ropeForward(Tensor x, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin);

    /** The inverse rotation of a gradient, in place; arguments as in forward. */
    void ropeBackward(Tensor dx, int rotatedHeads, Tensor positions, Tensor cos, Tensor sin);

    /**
     * out (N, NH*HS) = softmax(cap(q k^T * scale) (+ ALiBi bias), causal) v ; lse (B,NH,T) saved (log-sum-exp of
     * the scores). The shape says where each head lies in a row of qkv, the scale, the soft cap (Gemma 2's; none by
     * default) and whether ALiBi applies.
     * documentStarts (N) I32, for packed sequences (may be null: one document per sequence): the position in its
     * sequence where each row's document begins; a query never attends to a key before it.
     */
    void attentionForward(Tensor out, Tensor lse, Tensor qkv, Tensor documentStarts, AttentionShape shape);

    /** dQkv (N, qkvWidth) written; arguments as in forward. */
    void attentionBackward(Tensor dQkv, Tensor dOut, Tensor qkv, Tensor out, Tensor lse, Tensor documentStarts,
                           AttentionShape shape);

    /**
     * Appends the keys and values of the batch's rows to their sequences' caches, for generation: the batch is
     * {@code shape.batch()} sequences of {@code shape.seqLen()} rows each (N rows), row n of sequence n / seqLen
     * at position positions[n] (N) I32; its k and v heads (from qkv (N, qkvWidth)) become row positions[n] of that
     * sequence's keys and values (B, capacity, NKV*HS).
     */
    void kvCacheAppend(Tensor keys, Tensor values, Tensor qkv, Tensor positions, AttentionShape shape);

    /**
     * Attention of the batch's queries over their sequences' caches ({@link #kvCacheAppend}, arguments as there): the
     * query of row n (the q heads of qkv (N, qkvWidth)), at t = positions[n], attends to the cached keys and values
     * 0..t of its sequence (sliding window and ALiBi honoured): out (N, NH*HS). The cache's rows before t must hold
     * that sequence's keys and values (rows after t are never read).
     */
    void attentionCached(Tensor out, Tensor qkv, Tensor keys, Tensor values, Tensor positions, AttentionShape shape);

    /** out (N,F) = silu(gate) * up, where gateUp (N,2F) holds gate in its first F columns, up in the rest. */
    void swigluForward(Tensor out, Tensor gateUp);

    /**
     * {@link #swigluForward(Tensor, Tensor)}; where {@code amaxes} (an fp8 store, {@link Fp8Casts}) is given, a backend
     * may also keep out's amax there for the fp8 cast of out that follows (the MLP's down projection). The same out.
     */
    default void swigluForward(Tensor out, Tensor gateUp, Fp8Casts amaxes) {
        swigluForward(out, gateUp);
    }

    /** dGateUp (N,2F) written; it may be gateUp itself (in place: each element read before its gradient is written). */
    void swigluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp);

    /**
     * {@link #swigluBackward(Tensor, Tensor, Tensor)}; where {@code amaxes} is given, a backend may also keep
     * dGateUp's amax there for the fp8 cast of dGateUp that follows (the gate|up projection's backward). The same
     * dGateUp.
     */
    default void swigluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp, Fp8Casts amaxes) {
        swigluBackward(dGateUp, dOut, gateUp);
    }

    /**
     * GELU, tanh approximation (BLOOM's, GPT-2's gelu_new), element-wise over equal sizes:
     * out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
     */
    void geluForward(Tensor out, Tensor x);

    /** dx written: dOut * gelu'(x). */
    void geluBackward(Tensor dx, Tensor dOut, Tensor x);

    /**
     * Cross-entropy of logits (N,V) against targets (N) I32, positions with target -100 ignored. Returns the
     * sum of the losses over the counted positions (double). Overwrites logits with d(loss sum * gradScale)
     * / d(logits) when {@code gradScale != 0}, else leaves them. lossPerRow (N), if not null, receives each
     * row's loss (0 for ignored rows).
     */
    double crossEntropy(Tensor logits, Tensor targets, float gradScale, Tensor lossPerRow);

    /**
     * The index of each row's largest value of {@code logits} (N, V): N ints on the host, the lowest index on ties;
     * NaN is never the largest (a row of NaN only gives 0). Greedy decoding's choice, computed where the logits are.
     */
    int[] argmaxRows(Tensor logits);

    /**
     * One AdamW step with PyTorch's semantics on fp32 tensors of equal size; {@code step} counts from 1.
     * param *= 1 - lr*wd ; m = b1 m + (1-b1) g ; v = b2 v + (1-b2) g^2 ;
     * param -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps).
     */
    default void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, float lr, float beta1, float beta2, float eps,
                       float weightDecay, long step) {
        adamw(param, grad, m, v, lr, beta1, beta2, eps, weightDecay, step, 1f);
    }

    /**
     * As the step above with g = grad * gradScale, rounded to fp32 before use: the same numbers as scaling the
     * gradient in place first (gradient clipping) without a pass over it. grad is left as it was.
     */
    void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, float lr, float beta1, float beta2, float eps,
               float weightDecay, long step, float gradScale);

    /**
     * The step above on each segment of flat fp32 tensors of equal size (a unit's shard and its moments), with
     * {@code weightDecay} where the segment decays and none elsewhere; elements outside every segment are left as
     * they are. Segments are sorted by offset and do not overlap. The same numbers as one call a segment.
     */
    default void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, java.util.List<AdamWSegment> segments, float lr,
                       float beta1, float beta2, float eps, float weightDecay, long step, float gradScale) {
        for (AdamWSegment s : segments) {
            adamw(param.view(s.offset(), s.length()), grad.view(s.offset(), s.length()), m.view(s.offset(), s.length()),
                    v.view(s.offset(), s.length()), lr, beta1, beta2, eps, s.decays() ? weightDecay : 0f, step, gradScale);
        }
    }

    /**
     * The segmented step above that also writes each updated parameter rounded into {@code rounded} (bf16 or fp16,
     * of param's size; elements outside every segment left as they are there too): the same numbers as the step
     * followed by a copy (cast) of each segment into it, in one pass over the state where the backend can (the
     * compute copy of a master shard, {@code fsdp.param_copy: kept}).
     */
    default void adamw(Tensor param, Tensor grad, Tensor m, Tensor v, java.util.List<AdamWSegment> segments, float lr,
                       float beta1, float beta2, float eps, float weightDecay, long step, float gradScale,
                       Tensor rounded) {
        adamw(param, grad, m, v, segments, lr, beta1, beta2, eps, weightDecay, step, gradScale);
        for (AdamWSegment s : segments) {
            copy(param.view(s.offset(), s.length()), rounded.view(s.offset(), s.length()));
        }
    }

    // ---- ops added for the model families of 2026 (Qwen3, Gemma 3) --------------------------------------

    /**
     * RMSNorm of single heads of a packed activation (Qwen3's and Gemma 3's q_norm and k_norm): for each row n of
     * x (N, W) and each head h of {@code firstHead .. firstHead+H-1}, where rstd is (N, H), the HS columns at h*HS,
     * HS = weight.dim(0), become out = x / rms(x) * weight, rms over those HS values; rstd (N,H) saved,
     * 1/sqrt(mean(x^2) + eps). Columns of out outside those heads are left as they are; out may be x (in place).
     */
    void headRmsNormForward(Tensor out, Tensor rstd, Tensor x, Tensor weight, int firstHead, float eps);

    /**
     * The backward of {@link #headRmsNormForward}, arguments as there: dx's columns of the heads written (the
     * others left as they are; dx may be dOut, in place), dWeight (HS) accumulated over every row and head, or
     * written (its contents ignored) when {@code accumulate} is false.
     */
    void headRmsNormBackward(Tensor dx, Tensor dWeight, Tensor dOut, Tensor x, Tensor weight, Tensor rstd,
                             int firstHead, boolean accumulate);

    /**
     * GeGLU (Gemma's gated MLP): out (N,F) = gelu(gate) * up with GELU's tanh approximation (as {@link #geluForward}),
     * where gateUp (N,2F) holds gate in its first F columns, up in the rest.
     */
    void gegluForward(Tensor out, Tensor gateUp);

    /**
     * dGateUp (N,2F) written: dGate = dOut * up * gelu'(gate), dUp = dOut * gelu(gate); dGateUp may be gateUp itself
     * (in place).
     */
    void gegluBackward(Tensor dGateUp, Tensor dOut, Tensor gateUp);

    /**
     * Dropout with a counter-based mask ({@link DropoutMask}): element e of x (row-major) becomes
     * x * {@link DropoutMask#scale}(p) where {@link DropoutMask#keeps}(seed, firstIndex + e, threshold(p)), else 0;
     * out and x of equal size (out may be x). The same bits on every backend. Being linear in x with the mask fixed,
     * it is its own backward: applied to the output's gradient with the same arguments, it gives the input's.
     */
    void dropout(Tensor out, Tensor x, double p, long seed, long firstIndex);

    /**
     * NF4 dequantization, as bitsandbytes' dequantize_4bit ({@link io.fsdp4j.tensor.Nf4}): out[i] = the code book's
     * value of element i's code * absmax[i / 64], an fp32 product rounded to out's type. codes: I32, out.numel() / 8
     * words of packed codes (two a byte, the even element in the high nibble, bytes little-endian in a word); absmax:
     * F32, out.numel() / 64 values; out.numel() a multiple of 64.
     */
    void dequantizeNf4(Tensor out, Tensor codes, Tensor absmax);

    /** In place: x = cap * tanh(x / cap), the soft cap of logits (Gemma 2's final_logit_softcapping); cap > 0. */
    void softcapForward(Tensor x, float cap);

    /**
     * In place: dx *= 1 - (capped / cap)^2, the gradient through {@link #softcapForward} from its output
     * {@code capped} (same shape and type as dx).
     */
    void softcapBackward(Tensor dx, Tensor capped, float cap);
}
