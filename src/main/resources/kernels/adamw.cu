// adamw.cu: fused AdamW step on fp32 tensors of n elements (PyTorch semantics).
//
// Host precomputes, for step t counted from 1: stepSize = lr / (1 - beta1^t), bc2sqrt = sqrt(1 - beta2^t).
// Per element:  m = b1 m + (1 - b1) g ; v = b2 v + (1 - b2) g^2 ;
//               p = p * (1 - lr * wd) - stepSize * m / (sqrt(v) / bc2sqrt + eps)
//
// adamw_f32 (float* param, const float* grad, float* m, float* v, long long n, float lr, float beta1,
//            float beta2, float eps, float weightDecay, float stepSize, double bc2sqrt, float gradScale)
//     g = grad[i] * gradScale, rounded (no fused multiply-add): the clipping factor applied on the fly, the same
//     numbers as scaling grad in place first. Every operation is rounded as the CPU backend's Java expression
//     rounds it (bc2sqrt in double there too): the GPU's AdamW gives the CPU's bits.
// adamw_f32_x4 (same arguments as adamw_f32): the same numbers, four elements a thread through 16-byte loads and
//     stores (more bytes in flight: the step is bound by memory bandwidth); param, grad, m and v must be 16-byte
//     aligned. Any n (the last n % 4 elements one at a time).
// adamw_f32_segments (float* param, const float* grad, float* m, float* v, const int* segments, int count,
//                     float lr, float beta1, float beta2, float eps, float weightDecay, float stepSize,
//                     double bc2sqrt, float gradScale)
//     adamw_f32's update, with its bits, on the parts of one flat shard that the table names: count
//     (start, length, decays, first block) int quadruples, sorted by start, not overlapping, inside the shard,
//     1 <= count <= 64; where decays is 0 the weight decay is 0. Segment s is worked on by the blocks from its first
//     block to the next segment's (the last segment's to the grid's end): the first blocks ascending from 0, each
//     segment at least one; any split gives the same bits. Elements outside every segment are left untouched. One
//     launch for every parameter of a unit (multi-tensor): four elements a thread through 16-byte accesses for the
//     vectors wholly inside a segment, its ends one at a time. param, grad, m and v must be 16-byte aligned; block =
//     256 suggested, the blocks of a segment in proportion to its length.
// adamw_f32_segments_bf16 / adamw_f32_segments_f16 (float* param, const float* grad, float* m, float* v,
//                     bf16|f16 rounded, then adamw_f32_segments' arguments from segments on)
//     adamw_f32_segments, and each updated parameter also written rounded (rne) into rounded[i]: the compute copy
//     of the master shard that gathers send (fsdp.param_copy: kept), the same bits as a cast of the updated master
//     (cast_f32_to_bf16 / cast_f32_to_f16), in the same pass over the state. rounded must be 8-byte aligned;
//     elements outside every segment are left untouched there too.
// adamw_f32_segments_bf16_amax (float* param, const float* grad, float* m, float* v, bf16 rounded,
//                     unsigned int* amax, then adamw_f32_segments' arguments from segments on)
//     adamw_f32_segments_bf16, and amax[s] = max(amax[s], the largest magnitude of segment s's rounded values) as
//     the bits of a non-negative float, fp8_amax_bf16's form and value over that segment of rounded (fp8's weight
//     casts take it instead of reading the weights again). amax holds count slots, zeroed before the launch.
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

/**
 * One element's update, every operation rounded as Java rounds it (no fused multiply-add; the bias correction of
 * the second moment in double, as the CPU backend's expression): the same bits as the CPU backend's AdamW.
 */
__device__ __forceinline__ float adamw_value(float p, float g, float& m, float& v, float decay, float beta1,
                                             float beta2, float eps, float stepSize, double bc2sqrt, float gradScale) {
    g = __fmul_rn(g, gradScale);
    m = __fadd_rn(__fmul_rn(beta1, m), __fmul_rn(1.0f - beta1, g));
    v = __fadd_rn(__fmul_rn(beta2, v), __fmul_rn(__fmul_rn(1.0f - beta2, g), g));
    const float denom = __fadd_rn(__double2float_rn(__ddiv_rn(__dsqrt_rn((double) v), bc2sqrt)), eps);
    return __fsub_rn(__fmul_rn(p, decay), __fdiv_rn(__fmul_rn(stepSize, m), denom));
}

__device__ __forceinline__ float adamw_element(float* param, const float* grad, float* m, float* v, long long i,
                                               float decay, float beta1, float beta2, float eps, float stepSize,
                                               double bc2sqrt, float gradScale) {
    float mi = m[i], vi = v[i];
    const float p = adamw_value(param[i], grad[i], mi, vi, decay, beta1, beta2, eps, stepSize, bc2sqrt, gradScale);
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
    return p;
}

/** Four elements' update through 16-byte loads and stores: vector i of each array; returns the new parameters. */
__device__ __forceinline__ float4 adamw_vector(float4* p4, const float4* g4, float4* m4, float4* v4, long long i,
                                             float decay, float beta1, float beta2, float eps, float stepSize,
                                             double bc2sqrt, float gradScale) {
    float4 p = p4[i], g = g4[i], mi = m4[i], vi = v4[i];
    p.x = adamw_value(p.x, g.x, mi.x, vi.x, decay, beta1, beta2, eps, stepSize, bc2sqrt, gradScale);
    p.y = adamw_value(p.y, g.y, mi.y, vi.y, decay, beta1, beta2, eps, stepSize, bc2sqrt, gradScale);
    p.z = adamw_value(p.z, g.z, mi.z, vi.z, decay, beta1, beta2, eps, stepSize, bc2sqrt, gradScale);
    p.w = adamw_value(p.w, g.w, mi.w, vi.w, decay, beta1, beta2, eps, stepSize, bc2sqrt, gradScale);
    p4[i] = p;
    m4[i] = mi;
    v4[i] = vi;
    return p;
}

extern "C" __global__ void adamw_f32(float* param, const float* grad, float* m, float* v, long long n, float lr,
                                     float beta1, float beta2, float eps, float weightDecay, float stepSize,
                                     double bc2sqrt, float gradScale) {
    const float decay = 1.0f - __fmul_rn(lr, weightDecay); // rounded as the host's float expression
    GRID_STRIDE(i, n) adamw_element(param, grad, m, v, i, decay, beta1, beta2, eps, stepSize, bc2sqrt, gradScale);
}

extern "C" __global__ void adamw_f32_x4(float* param, const float* grad, float* m, float* v, long long n, float lr,
                                        float beta1, float beta2, float eps, float weightDecay, float stepSize,
                                        double bc2sqrt, float gradScale) {
    const float decay = 1.0f - __fmul_rn(lr, weightDecay);
    const long long n4 = n / 4;
    float4* p4 = reinterpret_cast<float4*>(param);
    const float4* g4 = reinterpret_cast<const float4*>(grad);
    float4* m4 = reinterpret_cast<float4*>(m);
    float4* v4 = reinterpret_cast<float4*>(v);
    GRID_STRIDE(i, n4) {
        adamw_vector(p4, g4, m4, v4, i, decay, beta1, beta2, eps, stepSize, bc2sqrt, gradScale);
    }
    GRID_STRIDE(j, n - 4 * n4) adamw_element(param, grad, m, v, 4 * n4 + j, decay, beta1, beta2, eps, stepSize, bc2sqrt,
                                             gradScale);
}

#define ADAMW_MAX_SEGMENTS 64

/** The segment whose blocks include this one: the last whose first block (column 3 of the table) is at or before it. */
__device__ __forceinline__ int segment_of_block(const int* table, int count) {
    int s = 0;
    while (s + 1 < count && table[4 * (s + 1) + 3] <= (int) blockIdx.x) s++;
    return s;
}

/** No compute copy: adamw_f32_segments. */
struct NoCopy {};

__device__ __forceinline__ void store_rounded(NoCopy*, long long, float) {}
__device__ __forceinline__ void store_rounded4(NoCopy*, long long, float4) {}
__device__ __forceinline__ void store_rounded(bf16_t* r, long long i, float p) { r[i] = f32_to_bf16(p); }
__device__ __forceinline__ void store_rounded(f16_t* r, long long i, float p) { r[i] = f32_to_f16(p); }

/** Four values rounded to bf16, two to a word, the first in the low half. */
__device__ __forceinline__ uint2 bf16_pack4(float4 p) {
    uint2 packed;
    packed.x = (unsigned int) f32_to_bf16(p.x) | ((unsigned int) f32_to_bf16(p.y) << 16);
    packed.y = (unsigned int) f32_to_bf16(p.z) | ((unsigned int) f32_to_bf16(p.w) << 16);
    return packed;
}

/** Vector j's four rounded values as one 8-byte store (rounded 8-byte aligned). */
__device__ __forceinline__ void store_rounded4(bf16_t* r, long long j, float4 p) {
    reinterpret_cast<uint2*>(r)[j] = bf16_pack4(p);
}

__device__ __forceinline__ void store_rounded4(f16_t* r, long long j, float4 p) {
    uint2 packed;
    packed.x = (unsigned int) f32_to_f16(p.x).bits | ((unsigned int) f32_to_f16(p.y).bits << 16);
    packed.y = (unsigned int) f32_to_f16(p.z).bits | ((unsigned int) f32_to_f16(p.w).bits << 16);
    reinterpret_cast<uint2*>(r)[j] = packed;
}

/** No amax kept: every call does nothing. */
struct NoAmax {
    __device__ __forceinline__ explicit NoAmax(unsigned int*) {}
    __device__ __forceinline__ void add(int, unsigned short) {}
    __device__ __forceinline__ void add4(int, uint2) {}
    __device__ __forceinline__ void finish(unsigned int*, int) {}
};

/**
 * Each segment's largest bf16 magnitude among the rounded values a block writes (a bf16's magnitude bits order as its
 * value): a thread's run for its current segment in a register, put into the block's slot in shared memory when the
 * segment changes, the block's slots into the global amax at the end (as float bits, fp8_amax's form).
 */
struct SegmentAmax {
    unsigned int* slots; // shared, ADAMW_MAX_SEGMENTS, zeroed before the loop
    int segment;
    unsigned int run;

    __device__ __forceinline__ explicit SegmentAmax(unsigned int* shared) : slots(shared), segment(-1), run(0u) {}

    __device__ __forceinline__ void add(int s, unsigned short bits) {
        if (s != segment) {
            if (segment >= 0 && run != 0u) atomicMax(slots + segment, run);
            segment = s;
            run = 0u;
        }
        run = max(run, (unsigned int) (bits & 0x7fffu));
    }

    /** Four rounded values of segment s, packed two to a word (store_rounded4's form): their largest, once. */
    __device__ __forceinline__ void add4(int s, uint2 packed) {
        const unsigned int halves = __vmaxu2(packed.x & 0x7fff7fffu, packed.y & 0x7fff7fffu);
        add(s, (unsigned short) max(halves & 0xffffu, halves >> 16));
    }

    __device__ __forceinline__ void finish(unsigned int* amax, int count) {
        if (segment >= 0 && run != 0u) atomicMax(slots + segment, run);
        __syncthreads();
        for (int i = threadIdx.x; i < count; i += blockDim.x) {
            if (slots[i] != 0u) atomicMax(amax + i, slots[i] << 16);
        }
    }
};

/**
 * adamw_f32_segments' body, writing each updated parameter rounded into rounded too unless R is NoCopy, and each
 * segment's amax of those rounded values into amax unless A is NoAmax. Each block works on one segment (the table's
 * fourth column: the segment's first block; its blocks run to the next segment's first, the last segment's to the
 * grid's end): the vectors of four wholly inside it, strided over its blocks, then the elements at its two ends that
 * share a vector with another segment or a gap, one at a time by its first block. No table lookup per vector: where
 * each vector looked its segment up, the step ran at 3.86 TB/s on an H200 against 4.18 for the same bytes without
 * segments (tools/kernels/adamw_bench.cu, docs/benchmarks.md 2026-11-26).
 */
template <typename R, typename A>
__device__ __forceinline__ void adamw_segments(float* param, const float* grad, float* m, float* v, R* rounded,
                                               unsigned int* amax, const int* segments, int count,
                                               float lr, float beta1, float beta2, float eps, float weightDecay,
                                               float stepSize, double bc2sqrt, float gradScale) {
    __shared__ unsigned int slots[ADAMW_MAX_SEGMENTS];
    for (int i = threadIdx.x; i < ADAMW_MAX_SEGMENTS; i += blockDim.x) slots[i] = 0u;
    __syncthreads();
    A seen(slots);
    const int s = segment_of_block(segments, count);
    const long long start = segments[4 * s], end = start + segments[4 * s + 1];
    const int first = segments[4 * s + 3];
    const int blocks = (s + 1 < count ? segments[4 * (s + 1) + 3] : (int) gridDim.x) - first;
    const float decay = segments[4 * s + 2] ? 1.0f - __fmul_rn(lr, weightDecay) : 1.0f; // the host's float rounding
    float4* p4 = reinterpret_cast<float4*>(param);
    const float4* g4 = reinterpret_cast<const float4*>(grad);
    float4* m4 = reinterpret_cast<float4*>(m);
    float4* v4 = reinterpret_cast<float4*>(v);
    const long long v0 = (start + 3) / 4, v1 = end / 4; // the vectors [v0, v1) lie wholly inside the segment
    const long long stride = (long long) blocks * blockDim.x;
    for (long long j = v0 + (long long) (blockIdx.x - first) * blockDim.x + threadIdx.x; j < v1; j += stride) {
        const float4 p = adamw_vector(p4, g4, m4, v4, j, decay, beta1, beta2, eps, stepSize, bc2sqrt, gradScale);
        store_rounded4(rounded, j, p);
        seen.add4(s, bf16_pack4(p)); // nothing (and nothing computed) for NoAmax
    }
    if ((int) blockIdx.x == first) { // the ends: [start, 4 v0) and [4 v1, end), or the whole segment inside one vector
        const long long headEnd = min(4 * v0, end), tailStart = max(4 * v1, headEnd);
        const long long heads = headEnd - start;
        for (long long k = threadIdx.x; k < heads + (end - tailStart); k += blockDim.x) {
            const long long i = k < heads ? start + k : tailStart + (k - heads);
            const float p = adamw_element(param, grad, m, v, i, decay, beta1, beta2, eps, stepSize, bc2sqrt,
                                          gradScale);
            store_rounded(rounded, i, p);
            seen.add(s, f32_to_bf16(p));
        }
    }
    seen.finish(amax, count);
}

extern "C" __global__ void adamw_f32_segments(float* param, const float* grad, float* m, float* v,
                                              const int* segments, int count, float lr, float beta1,
                                              float beta2, float eps, float weightDecay, float stepSize,
                                              double bc2sqrt, float gradScale) {
    adamw_segments<NoCopy, NoAmax>(param, grad, m, v, nullptr, nullptr, segments, count, lr, beta1, beta2, eps,
                                   weightDecay, stepSize, bc2sqrt, gradScale);
}

extern "C" __global__ void adamw_f32_segments_bf16(float* param, const float* grad, float* m, float* v,
                                                   bf16_t* rounded, const int* segments, int count,
                                                   float lr, float beta1, float beta2, float eps, float weightDecay,
                                                   float stepSize, double bc2sqrt, float gradScale) {
    adamw_segments<bf16_t, NoAmax>(param, grad, m, v, rounded, nullptr, segments, count, lr, beta1, beta2, eps,
                                   weightDecay, stepSize, bc2sqrt, gradScale);
}

extern "C" __global__ void adamw_f32_segments_bf16_amax(float* param, const float* grad, float* m, float* v,
                                                        bf16_t* rounded, unsigned int* amax, const int* segments,
                                                        int count, float lr, float beta1, float beta2,
                                                        float eps, float weightDecay, float stepSize, double bc2sqrt,
                                                        float gradScale) {
    adamw_segments<bf16_t, SegmentAmax>(param, grad, m, v, rounded, amax, segments, count, lr, beta1, beta2, eps,
                                        weightDecay, stepSize, bc2sqrt, gradScale);
}

extern "C" __global__ void adamw_f32_segments_f16(float* param, const float* grad, float* m, float* v,
                                                  f16_t* rounded, const int* segments, int count,
                                                  float lr, float beta1, float beta2, float eps, float weightDecay,
                                                  float stepSize, double bc2sqrt, float gradScale) {
    adamw_segments<f16_t, NoAmax>(param, grad, m, v, rounded, nullptr, segments, count, lr, beta1, beta2, eps,
                                  weightDecay, stepSize, bc2sqrt, gradScale);
}
