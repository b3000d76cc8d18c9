package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaLaunches.ptr;
import static io.fsdp4j.backend.CudaLaunches.suffix;

import io.fsdp4j.cuda.CudaKernels;
import io.fsdp4j.cuda.Kernel;
import io.fsdp4j.cuda.TensorMap;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.Arena;

/**
 * {@link CudaBackend}'s attention on fsdp4j's own kernels, forward and backward, and which of the three kernel
 * families runs a call: the simple kernels of attention.cu (a warp a row, no shared memory: sm_70 and sm_75, or when
 * asked), the tiled ones (attention.cu's general kernels, attention_tc.cu's mma.sync tensor-core kernels, sm_80 on) and
 * Hopper's (attention_sm90.cu: wgmma and the bulk tensor copy engine, sm_90: the bf16 forward and the backward's
 * dq and dk/dv at head sizes 64 and 128). cuDNN's engine, and the choice between the engines, is {@link CudaAttention}'s.
 */
final class CudaAttentionKernels {
    private final CudaKernels kernels;
    private final CudaLaunches launches;
    private final CudaMemory memory;
    private final long stream;
    private final boolean simpleAttention;
    private final boolean hopperAttention;
    private final int multiprocessors;
    private volatile boolean deterministic;

    CudaAttentionKernels(CudaKernels kernels, CudaLaunches launches, CudaMemory memory, boolean simpleAttention,
                         boolean hopperAttention, int multiprocessors) {
        this.kernels = kernels;
        this.launches = launches;
        this.memory = memory;
        this.stream = launches.stream();
        this.simpleAttention = simpleAttention;
        this.hopperAttention = hopperAttention;
        this.multiprocessors = multiprocessors;
    }

    /**
     * {@code attention.deterministic}: the backward's sums in a fixed order (no one-kernel backward on Hopper), so that
     * reruns give the same bits.
     */
    void deterministic(boolean deterministic) {
        this.deterministic = deterministic;
    }

    /** The tensor-core path needs bf16, a supported head size, and 16-byte aligned rows. */
    private static boolean tensorCores(AttentionShape s, Tensor... tensors) {
        int hs = s.headDim();
        return (hs == 32 || hs == 64 || hs == 80 || hs == 96 || hs == 128) && bf16Aligned(tensors);
    }

    /**
     * The tensor-core forward also takes Gemma's head size 256 (in 64-query tiles); at 256 the backward's dq runs on the
     * tensor cores too, its dk/dv on the wide kernels.
     */
    private static boolean tensorCoreForward(AttentionShape s, Tensor... tensors) {
        return tensorCores(s, tensors) || s.headDim() == 256 && bf16Aligned(tensors);
    }

    /** Hopper's forward: bf16, head size 64 or 128, the grouped layout, no ALiBi, no soft cap. */
    private static boolean hopperApplies(AttentionShape s, Tensor... tensors) {
        return (s.headDim() == 64 || s.headDim() == 128) && !bloomStyle(s) && s.softcap() == 0 && bf16Aligned(tensors);
    }

    /**
     * attention_sm90.cu's forward: 128-query tiles, 384 threads (two consumer warpgroups, a producer), qkv read by the
     * copy engine through a tensor map (sizes {W, T, B}, boxes of 64 columns x 128 rows), 3 stages of (K, V).
     */
    private void hopperForward(Tensor out, Tensor lse, Tensor qkv, Tensor documentStarts, AttentionShape s) {
        int hs = s.headDim(), t = s.seqLen(), b = s.batch();
        long w = s.qkvWidth();
        int shared = hopperForwardShared(hs);
        try (Arena arena = Arena.ofConfined()) {
            Kernel.ByValue map = swizzledRows(arena, qkv, w, t, b, 128);
            kernels.withShared("attention_sm90", "attention_sm90_forward_hs" + hs + "_bf16", shared).launch(
                    new Kernel.Dim3((t + 127) / 128, s.heads(), b), Kernel.Dim3.of(384), shared, stream, map,
                    ptr(out), ptr(lse), ptr(documentStarts), b, t, s.heads(), s.kvHeads(), hs, s.slidingWindow(),
                    s.scale());
        }
    }

    /**
     * attention_sm90.cu's dk and dv: 128 keys a block (384 threads), Q and dOut tiles of 64 rows brought by the copy
     * engine (three tensor maps) and their lse and delta by the producer warp, the splits' fp32 sums in
     * {@code partial} (null for one split). With {@code dqSums} (fp32, zero; null for none) the whole backward in one
     * kernel (head size 128, {@link #fusedBackward}): each block also adds its keys' share of dq into the sums, from
     * which attention_sm90_dq_from_sums_bf16 then writes dq.
     */
    private void hopperDkdv(Tensor dQkv, Tensor dOut, Tensor qkv, Tensor lse, Tensor delta, Tensor documentStarts,
                            Tensor partial, int splits, Tensor dqSums, AttentionShape s) {
        int hs = s.headDim(), t = s.seqLen(), b = s.batch();
        long w = s.qkvWidth(), o = (long) s.heads() * hs;
        boolean fused = dqSums != null;
        String name = fused ? "attention_sm90_backward_fused_hs128_bf16"
                : "attention_sm90_backward_dkdv_hs" + hs + "_bf16";
        int shared = fused ? hopperFusedShared() : hopperDkdvShared(hs);
        try (Arena arena = Arena.ofConfined()) {
            Kernel.ByValue kv = swizzledRows(arena, qkv, w, t, b, 128);
            Kernel.ByValue q = swizzledRows(arena, qkv, w, t, b, 64);
            Kernel.ByValue d = swizzledRows(arena, dOut, o, t, b, 64);
            Object[] args = {kv, q, d, ptr(dQkv), ptr(lse), ptr(delta), ptr(documentStarts), b, t, s.heads(),
                    s.kvHeads(), hs, s.slidingWindow(), s.scale(), ptr(partial), splits, ptr(dqSums)};
            kernels.withShared("attention_sm90", name, shared).launch(new Kernel.Dim3((t + 127) / 128,
                    s.kvHeads() * splits, b), Kernel.Dim3.of(384), shared, stream,
                    fused ? args : java.util.Arrays.copyOf(args, args.length - 1));
        }
    }

    /**
     * Whether Hopper's backward runs as one kernel ({@link #hopperDkdv} with dq's sums: five matrix products a step,
     * dq added into fp32 sums in no fixed order) rather than as the dq and dk/dv kernels (seven, deterministic): at head
     * size 128 when each query sees at least {@value #FUSED_FROM_TOKENS} keys' span (the sequence, or the window if
     * shorter), for one sequence a call or sequences of at least {@value #FUSED_BATCHED_FROM_TOKENS} tokens. Measured
     * on an H200 it was 1.02-1.10x the two kernels from 4096 tokens whatever the batch; on an H100 1.03-1.11x for one
     * sequence of 4096-16384 tokens and 1.08x for two of 16384, but 0.59-0.98x for 2 to 4 sequences of 4096 or 8192
     * (2026-11-27, docs/benchmarks.md). Not for packed documents, whose lengths the call does not know: documents of
     * 4096 tokens measured 1.03-1.07x, of 2048 0.92-1.04x, of 1024 0.91x. Nor under {@code attention.deterministic}
     * ({@link #deterministic(boolean)}).
     */
    static boolean fusedBackward(AttentionShape s, boolean packedDocuments) {
        int span = s.slidingWindow() > 0 ? Math.min(s.seqLen(), s.slidingWindow()) : s.seqLen();
        return s.headDim() == 128 && !packedDocuments && span >= FUSED_FROM_TOKENS
                && (s.batch() == 1 || s.seqLen() >= FUSED_BATCHED_FROM_TOKENS);
    }

    static final int FUSED_FROM_TOKENS = 4096, FUSED_BATCHED_FROM_TOKENS = 16384;

    /**
     * attention_sm90.cu's dq: 128 queries a block (384 threads), their Q and dOut tiles and the (K, V) tiles they see
     * brought by the copy engine (two tensor maps of 128-row boxes), two stages of (K, V).
     */
    private void hopperDq(Tensor dQkv, Tensor dOut, Tensor qkv, Tensor lse, Tensor delta, Tensor documentStarts,
                          AttentionShape s) {
        int hs = s.headDim(), t = s.seqLen(), b = s.batch();
        long w = s.qkvWidth(), o = (long) s.heads() * hs;
        int shared = hopperDqShared(hs);
        try (Arena arena = Arena.ofConfined()) {
            Kernel.ByValue q = swizzledRows(arena, qkv, w, t, b, 128);
            Kernel.ByValue d = swizzledRows(arena, dOut, o, t, b, 128);
            kernels.withShared("attention_sm90", "attention_sm90_backward_dq_hs" + hs + "_bf16", shared).launch(
                    new Kernel.Dim3((t + 127) / 128, s.heads(), b), Kernel.Dim3.of(384), shared, stream, q, d,
                    ptr(dQkv), ptr(lse), ptr(delta), ptr(documentStarts), b, t, s.heads(), s.kvHeads(), hs,
                    s.slidingWindow(), s.scale());
        }
    }

    /**
     * A tensor map of {@code t}, {@code batch} x {@code seq} rows of {@code width} bf16 elements, for the copy engine
     * to bring boxes of 64 columns x {@code boxRows} rows in the 128-byte swizzle attention_sm90.cu's tiles use.
     */
    private static Kernel.ByValue swizzledRows(Arena arena, Tensor t, long width, int seq, int batch, int boxRows) {
        return TensorMap.bf16Swizzled(arena, ptr(t), new long[] {width, seq, batch},
                new long[] {2 * width, 2 * width * seq}, new int[] {64, boxRows, 1});
    }

    /**
     * Dynamic shared memory of attention_sm90.cu's kernels at head size {@code hs}: its SM90_SHARED(hs, 3),
     * SM90_DKDV_SHARED(hs, 3) and SM90_DQ_SHARED(hs, 2), the stages its kernels are instantiated with
     * ({@code HopperSharedMemoryTest} evaluates the file's macros and holds these to them).
     */
    static int hopperForwardShared(int hs) {
        return 1024 + 256 * hs + 3 * 512 * hs + 64;
    }

    /** See {@link #hopperForwardShared}. */
    static int hopperDkdvShared(int hs) {
        return 1024 + 512 * hs + 3 * (256 * hs + 512) + 64;
    }

    /** See {@link #hopperForwardShared}: SM90_FUSED_SHARED(128, 2). */
    static int hopperFusedShared() {
        return 1024 + 512 * 128 + 2 * (256 * 128 + 512) + 64 + 2 * 128 * 64 * 2 + 4 * 64 * 64 * 4 + 96;
    }

    /** See {@link #hopperForwardShared}. */
    static int hopperDqShared(int hs) {
        return 1024 + 512 * hs + 2 * 512 * hs + 64;
    }

    private static boolean bf16Aligned(Tensor... tensors) {
        for (Tensor t : tensors) {
            if (t.dtype() != DType.BF16 || ptr(t) % 16 != 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * BLOOM's attention (per-head qkv layout, ALiBi) and Gemma 2's (soft-capped scores) run on the general kernels'
     * _ext variants, which take the layout, ALiBi and the cap as three more arguments.
     */
    private static boolean extended(AttentionShape s) {
        return bloomStyle(s) || s.softcap() > 0;
    }

    /** The tensor-core kernels know the grouped layout without ALiBi only (the cap: their _cap variants). */
    private static boolean bloomStyle(AttentionShape s) {
        return s.layout() != AttentionShape.QkvLayout.GROUPED || s.alibi();
    }

    /** The tensor-core kernel's name: with _cap_ after its stem for soft-capped scores. */
    private static String tcKernel(String stem, String rest, AttentionShape s) {
        return stem + (s.softcap() > 0 ? "_cap_" : "_") + rest;
    }

    /** The tensor-core kernel's arguments: with the soft cap last for a _cap kernel. */
    private static Object[] tcArgs(AttentionShape s, Object... args) {
        if (s.softcap() <= 0) {
            return args;
        }
        Object[] more = java.util.Arrays.copyOf(args, args.length + 1);
        more[args.length] = s.softcap();
        return more;
    }

    /** The largest head size of the general kernels (8 columns a thread); the _wide ones go to {@value #WIDE_HEAD}. */
    private static final int GENERAL_HEAD = 128, WIDE_HEAD = 256;

    /**
     * Whether the head is too wide for the general kernels, so that the _wide ones run it (128 < HS <= 256, Gemma's
     * 256; always with _ext's arguments); wider heads are refused.
     */
    private static boolean wide(AttentionShape s) {
        if (s.headDim() > WIDE_HEAD) {
            throw new UnsupportedOperationException("attention on the GPU supports head sizes up to " + WIDE_HEAD
                    + ", got " + s.headDim());
        }
        return s.headDim() > GENERAL_HEAD;
    }

    /** The general kernel's name: _wide for heads over 128, _ext for the extended arguments, else the plain one. */
    private static String generalKernel(String name, AttentionShape s, Tensor t) {
        return name + (wide(s) ? "_wide_" : extended(s) ? "_ext_" : "_") + suffix(t);
    }

    /** The arguments, with the layout and ALiBi flags and the soft cap added for an _ext or _wide kernel. */
    private static Object[] generalArgs(AttentionShape s, Object... args) {
        if (!extended(s) && !wide(s)) {
            return args;
        }
        Object[] more = java.util.Arrays.copyOf(args, args.length + 3);
        more[args.length] = s.layout() == AttentionShape.QkvLayout.PER_HEAD ? 1 : 0;
        more[args.length + 1] = s.alibi() ? 1 : 0;
        more[args.length + 2] = s.softcap();
        return more;
    }

    /** The arguments of the simple kernels: always with the layout and ALiBi flags and the soft cap. */
    private static Object[] simpleArgs(AttentionShape s, Object... args) {
        Object[] more = java.util.Arrays.copyOf(args, args.length + 3);
        more[args.length] = s.layout() == AttentionShape.QkvLayout.PER_HEAD ? 1 : 0;
        more[args.length + 1] = s.alibi() ? 1 : 0;
        more[args.length + 2] = s.softcap();
        return more;
    }

    /** Attention's forward on fsdp4j's kernels. */
    void forward(Tensor out, Tensor lse, Tensor qkv, Tensor documentStarts, AttentionShape s) {
        int hs = s.headDim();
        // documentStarts null: the kernels get a null pointer (one document per sequence)
        Object[] args = {ptr(out), ptr(lse), ptr(qkv), ptr(documentStarts), s.batch(), s.seqLen(), s.heads(), s.kvHeads(), hs,
                s.slidingWindow(), s.scale()};
        if (simpleAttention) { // a warp a query row, no shared memory (sm_70, sm_75)
            wide(s); // refuses heads over 256
            kernels.get("attention", "attention_simple_forward_" + suffix(qkv)).launch(
                    new Kernel.Dim3((s.seqLen() + 7) / 8, s.heads(), s.batch()), Kernel.Dim3.of(256), 0, stream,
                    simpleArgs(s, args));
        } else if (hopperAttention && hopperApplies(s, out, qkv)) {
            hopperForward(out, lse, qkv, documentStarts, s);
        } else if (!bloomStyle(s) && tensorCoreForward(s, out, qkv)) { // 128-query tiles (HS 256, and 128 capped: 64)
            int rows = hs == 256 || hs == 128 && s.softcap() > 0 ? 64 : 128;
            int shared = (rows == 64 ? 640 : 768) * (hs + 8);
            kernels.withShared("attention_tc", tcKernel("attention_tc_forward", "hs" + hs + "_bf16", s), shared).launch(
                    new Kernel.Dim3((s.seqLen() + rows - 1) / rows, s.heads(), s.batch()), Kernel.Dim3.of(128), shared,
                    stream, tcArgs(s, args));
        } else {
            int shared = 4 * (192 * (hs + 1) + 4160);
            kernels.withShared("attention", generalKernel("attention_forward", s, qkv), shared).launch(
                    new Kernel.Dim3((s.seqLen() + 63) / 64, s.heads(), s.batch()), Kernel.Dim3.of(256), shared, stream,
                    generalArgs(s, args));
        }
    }

    /** Attention's backward on fsdp4j's kernels. */
    void backward(Tensor dQkv, Tensor dOut, Tensor qkv, Tensor out, Tensor lse, Tensor documentStarts,
                  AttentionShape s) {
        int hs = s.headDim(), b = s.batch(), t = s.seqLen(), nh = s.heads();
        try (MemoryScope scratch = memory.newScope(); var entered = scratch.enter()) {
            Tensor delta = memory.allocateForWrite(DType.F32, b, nh, t); // every (batch, head, position) written
            launches.launch("attention", "attention_backward_delta_" + suffix(out), (b * t * nh + 7) / 8, 256,
                    ptr(delta), ptr(dOut), ptr(out), b, t, nh, hs);
            Object[] args = {ptr(dQkv), ptr(dOut), ptr(qkv), ptr(lse), ptr(delta), ptr(documentStarts), b, t, nh, s.kvHeads(), hs,
                    s.slidingWindow(), s.scale()};
            var qGrid = new Kernel.Dim3((t + 63) / 64, nh, b);
            var kvGrid = new Kernel.Dim3((t + 63) / 64, s.kvHeads(), b);
            boolean hs256 = hs == 256 && !bloomStyle(s) && bf16Aligned(dQkv, dOut, qkv, out);
            if (simpleAttention) { // a warp a query row (dq), a warp a key row (dk, dv); no shared memory
                wide(s);
                kernels.get("attention", "attention_simple_backward_dq_" + suffix(qkv)).launch(
                        new Kernel.Dim3((t + 7) / 8, nh, b), Kernel.Dim3.of(256), 0, stream, simpleArgs(s, args));
                kernels.get("attention", "attention_simple_backward_dkdv_" + suffix(qkv)).launch(
                        new Kernel.Dim3((t + 7) / 8, s.kvHeads(), b), Kernel.Dim3.of(256), 0, stream,
                        simpleArgs(s, args));
            } else if (!bloomStyle(s) && tensorCores(s, dQkv, dOut, qkv, out) || hs256) {
                // HS = 256: kernels of their own, dk/dv in two halves of the head's columns (a block each)
                String rest = hs256 ? "hs256_bf16" : "bf16";
                int parts = hs256 ? 2 : 1;
                int dqShared = 768 * (hs + 8), dkdvShared = 768 * (hs + 8) + 1024;
                boolean hopper = hopperAttention && !hs256 && hopperApplies(s, dQkv, dOut, qkv, out);
                boolean fused = hopper && !deterministic && fusedBackward(s, documentStarts != null);
                if (!hopper) {
                    kernels.withShared("attention_tc", tcKernel("attention_tc_backward_dq", rest, s), dqShared)
                            .launch(qGrid, Kernel.Dim3.of(128), dqShared, stream, tcArgs(s, args));
                } else if (!fused) { // fused: dq comes with dk and dv, below
                    hopperDq(dQkv, dOut, qkv, lse, delta, documentStarts, s);
                }
                int splits = hopper ? HopperDkdvSplits.choose(s, multiprocessors) : dkdvSplits(s, parts);
                Tensor partial = splits == 1 ? null : memory.allocateForWrite(DType.F32, splits, b, t, 2 * s.kvHeads() * hs);
                Tensor dqSums = fused ? memory.allocate(DType.F32, b, nh, (t + 63) / 64 * 64, hs) : null; // zero
                if (hopper) {
                    hopperDkdv(dQkv, dOut, qkv, lse, delta, documentStarts, partial, splits, dqSums, s);
                } else {
                    Object[] dkdvArgs = java.util.Arrays.copyOf(args, args.length + 2);
                    dkdvArgs[args.length] = ptr(partial);
                    dkdvArgs[args.length + 1] = splits;
                    kernels.withShared("attention_tc", tcKernel("attention_tc_backward_dkdv", rest, s), dkdvShared)
                            .launch(new Kernel.Dim3(kvGrid.x(), s.kvHeads() * splits * parts, b), Kernel.Dim3.of(128),
                                    dkdvShared, stream, tcArgs(s, dkdvArgs));
                }
                sumDkdvSplits(dQkv, partial, splits, s);
                if (fused) {
                    launches.launch("attention_sm90", "attention_sm90_dq_from_sums_bf16",
                            Math.toIntExact(((long) b * t * nh * (hs / 2) + 255) / 256), 256,
                            ptr(dQkv), ptr(dqSums), b, t, nh, s.kvHeads());
                }
            } else if (wide(s)) { // three HS-wide tiles; dk/dv in two halves of the columns, one block each
                int dqShared = 4 * (192 * (hs + 1) + 4160), dkdvShared = 4 * (192 * (hs + 1) + 8448);
                kernels.withShared("attention", generalKernel("attention_backward_dq", s, qkv), dqShared)
                        .launch(qGrid, Kernel.Dim3.of(256), dqShared, stream, generalArgs(s, args));
                kernels.withShared("attention", generalKernel("attention_backward_dkdv", s, qkv), dkdvShared)
                        .launch(new Kernel.Dim3(kvGrid.x(), 2 * s.kvHeads(), b), Kernel.Dim3.of(256), dkdvShared,
                                stream, generalArgs(s, args));
            } else {
                int dqShared = 4 * (256 * (hs + 1) + 4160), dkdvShared = 4 * (256 * (hs + 1) + 8448);
                kernels.withShared("attention", generalKernel("attention_backward_dq", s, qkv), dqShared)
                        .launch(qGrid, Kernel.Dim3.of(256), dqShared, stream, generalArgs(s, args));
                kernels.withShared("attention", generalKernel("attention_backward_dkdv", s, qkv), dkdvShared)
                        .launch(kvGrid, Kernel.Dim3.of(256), dkdvShared, stream, generalArgs(s, args));
            }
        }
    }

    /** Adds the dk/dv splits' fp32 partial sums into dQkv's key and value columns (nothing for one split). */
    private void sumDkdvSplits(Tensor dQkv, Tensor partial, int splits, AttentionShape s) {
        if (partial != null) {
            int b = s.batch(), t = s.seqLen(), hs = s.headDim();
            launches.launch("attention_tc", "attention_tc_dkdv_sum_bf16",
                    Math.toIntExact(((long) b * t * s.kvHeads() * hs + 255) / 256), 256,
                    ptr(dQkv), ptr(partial), b, t, s.heads(), s.kvHeads(), hs, splits);
        }
    }

    /**
     * Into how many parts the tensor-core dk/dv kernel splits each key head's group of query heads (a divisor of
     * the group): with grouped-query attention one block a (key tile, key head) is too few blocks to fill the GPU
     * (Qwen2.5-7B at seq 2048: 128 blocks, the longest of them doing 7 heads' work), so the group is split until
     * there are {@value #DKDV_BLOCKS} blocks or every split is one head; the splits' fp32 sums are added up after.
     */
    static int dkdvSplits(AttentionShape s) {
        return dkdvSplits(s, 1);
    }

    /** As {@link #dkdvSplits(AttentionShape)} where each (key tile, key head) already has {@code parts} blocks. */
    static int dkdvSplits(AttentionShape s, int parts) {
        int group = s.heads() / s.kvHeads();
        long blocks = (long) ((s.seqLen() + 63) / 64) * s.kvHeads() * s.batch() * parts;
        for (int splits = 1; splits < group; splits++) {
            if (group % splits == 0 && blocks * splits >= DKDV_BLOCKS) {
                return splits;
            }
        }
        return group;
    }

    private static final int DKDV_BLOCKS = 1024;
}
