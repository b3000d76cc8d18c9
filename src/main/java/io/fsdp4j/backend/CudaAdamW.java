package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaBackend.ptr;
import static io.fsdp4j.backend.CudaLaunches.aligned16;
import static io.fsdp4j.backend.CudaLaunches.gridFor;

import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.List;

/**
 * {@link CudaBackend}'s optimizer step (adamw.cu): AdamW over fp32 shards, with the bias corrections computed on the
 * host as the CPU backend computes them (the step size in fp32, sqrt(1 - beta2^t) in double); four elements a
 * thread where the tensors are 16-byte aligned, and every segment of a unit's shard in one launch, each block on one
 * segment ({@link #launchOf}). (Two vectors of four a thread an iteration, every load before the stores, made the
 * step slower: 63.96 against 56.47 ms for Qwen2.5-7B's optimizer step on an H200, docs/benchmarks.md 2026-11-26.)
 */
final class CudaAdamW {
    /** The most segments {@code adamw_f32_segments} takes in one launch (their amax slots live in shared memory). */
    private static final int MAX_SEGMENTS = 64;
    private final CudaLaunches launches;
    private final CudaMemory memory;

    CudaAdamW(CudaLaunches launches, CudaMemory memory) {
        this.launches = launches;
        this.memory = memory;
    }

    void step(Tensor param, Tensor grad, Tensor m, Tensor v, float lr, float beta1, float beta2, float eps,
              float weightDecay, long step, float gradScale) {
        long n = param.numel();
        float stepSize = (float) (lr / (1 - Math.pow(beta1, step)));
        double bc2Sqrt = Math.sqrt(1 - Math.pow(beta2, step)); // in double, as the CPU backend's expression
        boolean aligned = aligned16(param, grad, m, v);
        launches.launch("adamw", aligned ? "adamw_f32_x4" : "adamw_f32", gridFor(aligned ? (n + 3) / 4 : n), 256,
                ptr(param), ptr(grad), ptr(m), ptr(v), n, lr, beta1, beta2, eps, weightDecay, stepSize, bc2Sqrt,
                gradScale);
    }

    /**
     * Whether {@link #step(Tensor, Tensor, Tensor, Tensor, List, float, float, float, float, float, long, float)}
     * takes these segments in one launch: some, not more than its table holds, over 16-byte aligned tensors.
     */
    static boolean oneLaunch(List<AdamWSegment> segments, Tensor param, Tensor grad, Tensor m, Tensor v) {
        return !segments.isEmpty() && segments.size() <= MAX_SEGMENTS && aligned16(param, grad, m, v);
    }

    /**
     * Whether the segments' launch can also write this rounded copy of param: bf16 or fp16, param's size, 8-byte
     * aligned (four values a store).
     */
    static boolean roundsInLaunch(Tensor rounded, Tensor param) {
        return (rounded.dtype() == DType.BF16 || rounded.dtype() == DType.F16) && rounded.numel() == param.numel()
                && ptr(rounded) % 8 == 0;
    }

    /** One launch for every segment (multi-tensor AdamW): the same bits as a launch a segment. */
    void step(Tensor param, Tensor grad, Tensor m, Tensor v, List<AdamWSegment> segments, float lr, float beta1,
              float beta2, float eps, float weightDecay, long step, float gradScale) {
        step(param, grad, m, v, segments, lr, beta1, beta2, eps, weightDecay, step, gradScale,
                gridOf(param));
    }

    /**
     * One launch for every segment that also writes each updated parameter rounded into {@code rounded}
     * ({@link #roundsInLaunch}): the same bits as the step followed by a cast.
     */
    void step(Tensor param, Tensor grad, Tensor m, Tensor v, List<AdamWSegment> segments, float lr, float beta1,
              float beta2, float eps, float weightDecay, long step, float gradScale, Tensor rounded) {
        step(param, grad, m, v, segments, lr, beta1, beta2, eps, weightDecay, step, gradScale,
                gridOf(param), rounded);
    }

    /** As above on a grid of about {@code blocks} blocks (any grid gives the same bits; tests take small ones). */
    void step(Tensor param, Tensor grad, Tensor m, Tensor v, List<AdamWSegment> segments, float lr, float beta1,
              float beta2, float eps, float weightDecay, long step, float gradScale, int blocks) {
        step(param, grad, m, v, segments, lr, beta1, beta2, eps, weightDecay, step, gradScale, blocks, null);
    }

    /** As above on a grid of about {@code blocks} blocks, writing the rounded copy too unless it is null. */
    void step(Tensor param, Tensor grad, Tensor m, Tensor v, List<AdamWSegment> segments, float lr, float beta1,
              float beta2, float eps, float weightDecay, long step, float gradScale, int blocks, Tensor rounded) {
        step(param, grad, m, v, segments, lr, beta1, beta2, eps, weightDecay, step, gradScale, blocks, rounded, null);
    }

    /** The grid of the segments' launch over {@code param}: a vector of four a thread, up to 65536 blocks. */
    static int gridOf(Tensor param) {
        return CudaLaunches.gridFor((param.numel() + 3) / 4);
    }

    /**
     * As above, and, unless {@code amax} is null (then {@code rounded} is bf16), each segment's amax of its rounded
     * values into {@code amax}'s slot of that segment (zeroed: adamw_f32_segments_bf16_amax maxes into it).
     */
    void step(Tensor param, Tensor grad, Tensor m, Tensor v, List<AdamWSegment> segments, float lr, float beta1,
              float beta2, float eps, float weightDecay, long step, float gradScale, int blocks, Tensor rounded,
              Tensor amax) {
        if (!oneLaunch(segments, param, grad, m, v)) {
            throw new IllegalArgumentException("not one launch of adamw_f32_segments: " + segments.size()
                    + " segments of " + param);
        }
        if (rounded != null && !roundsInLaunch(rounded, param)) {
            throw new IllegalArgumentException("not a rounded copy the launch writes: " + rounded + " of " + param);
        }
        Launch launch = launchOf(segments, blocks);
        int[] table = launch.table();
        int grid = launch.grid();
        float stepSize = (float) (lr / (1 - Math.pow(beta1, step)));
        double bc2Sqrt = Math.sqrt(1 - Math.pow(beta2, step));
        try (MemoryScope scratch = memory.newScope(); var entered = scratch.enter()) {
            Tensor segmentTable = memory.uploadInts(table, table.length);
            if (rounded == null) {
                launches.launch("adamw", "adamw_f32_segments", grid, 256, ptr(param), ptr(grad), ptr(m),
                        ptr(v), ptr(segmentTable), segments.size(), lr, beta1, beta2, eps, weightDecay, stepSize,
                        bc2Sqrt, gradScale);
            } else if (amax != null) {
                if (rounded.dtype() != DType.BF16 || amax.numel() < segments.size()) { // (no copy: no amax either)
                    throw new IllegalArgumentException("amax slots for " + segments.size() + " segments of a bf16 "
                            + "copy, not " + amax + " for " + rounded);
                }
                launches.launch("adamw", "adamw_f32_segments_bf16_amax", grid, 256, ptr(param), ptr(grad), ptr(m),
                        ptr(v), ptr(rounded), ptr(amax), ptr(segmentTable), segments.size(), lr, beta1, beta2, eps,
                        weightDecay, stepSize, bc2Sqrt, gradScale);
            } else {
                String kernel = rounded.dtype() == DType.BF16 ? "adamw_f32_segments_bf16" : "adamw_f32_segments_f16";
                launches.launch("adamw", kernel, grid, 256, ptr(param), ptr(grad), ptr(m), ptr(v), ptr(rounded),
                        ptr(segmentTable), segments.size(), lr, beta1, beta2, eps, weightDecay, stepSize, bc2Sqrt,
                        gradScale);
            }
        }
    }

    /**
     * The segments' launch: its table, (start, length, decays, first block) for each segment, and its grid. Each
     * segment gets a share of about {@code blocks} in proportion to its length, at least one block; its blocks follow
     * the segment's before it, from block 0.
     */
    record Launch(int[] table, int grid) {}

    static Launch launchOf(List<AdamWSegment> segments, int blocks) {
        long total = 0;
        for (AdamWSegment s : segments) {
            total += s.length();
        }
        int[] table = new int[4 * segments.size()];
        int first = 0;
        for (int i = 0; i < segments.size(); i++) {
            AdamWSegment s = segments.get(i);
            table[4 * i] = s.offset();
            table[4 * i + 1] = s.length();
            table[4 * i + 2] = s.decays() ? 1 : 0;
            table[4 * i + 3] = first;
            first += (int) Math.max(1, total == 0 ? 1 : (long) Math.ceil((double) blocks * s.length() / total));
        }
        return new Launch(table, first);
    }
}
