// common.cuh: what every kernel file here shares, included by each as `#include "common.cuh"`.
//
// NVRTC receives this file as a named header with each program (io.fsdp4j.cuda.CudaKernels); nvcc finds it beside
// the including file (tools/kernels/check.sh). It includes nothing itself: bf16 values travel as their bit patterns
// in unsigned short, fp16 values in f16_t, converted here, so no CUDA header is needed.
#ifndef FSDP4J_KERNEL_COMMON
#define FSDP4J_KERNEL_COMMON
typedef unsigned short bf16_t;

__device__ __forceinline__ float bf16_to_f32(bf16_t h) {
    return __uint_as_float(((unsigned int) h) << 16);
}

/** Round to nearest, ties to even; a NaN stays a (quiet) NaN with its sign: as io.fsdp4j.tensor.Half.toBf16. */
__device__ __forceinline__ bf16_t f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (bf16_t) ((u >> 16) | 0x0040u);
    }
    return (bf16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/**
 * IEEE fp16 values as their bit patterns, in a type of their own (bf16_t is a plain unsigned short): ld and st tell
 * the two apart, and a kernel cannot mix them up. Converted with PTX's cvt (any architecture from sm_53 on).
 */
struct f16_t {
    unsigned short bits;
};

__device__ __forceinline__ float f16_to_f32(f16_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}

/** Round to nearest, ties to even (inf beyond fp16's range, NaN kept NaN): as io.fsdp4j.tensor.Half.toF16. */
__device__ __forceinline__ f16_t f32_to_f16(float f) {
    f16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}

__device__ __forceinline__ float ld(const float* p) { return *p; }
__device__ __forceinline__ float ld(const bf16_t* p) { return bf16_to_f32(*p); }
__device__ __forceinline__ float ld(const f16_t* p) { return f16_to_f32(*p); }
__device__ __forceinline__ void st(float* p, float v) { *p = v; }
__device__ __forceinline__ void st(bf16_t* p, float v) { *p = f32_to_bf16(v); }
__device__ __forceinline__ void st(f16_t* p, float v) { *p = f32_to_f16(v); }

#define NEG_INF __int_as_float(0xff800000)
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

/**
 * Sum over the block, returned to every thread, in a fixed order (deterministic for a given blockDim).
 * blockDim.x must be a multiple of 32 (at most 1024); every thread of the block must call it.
 */
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float scratch[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); // scratch may still be read by an earlier call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_sum(lane < warps ? scratch[lane] : 0.0f);
}

__device__ __forceinline__ double block_sum_d(double v) {
    __shared__ double scratch_d[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) scratch_d[warp] = v;
    __syncthreads();
    return warp_sum_d(lane < warps ? scratch_d[lane] : 0.0);
}

/** Eight bf16 in a 16-byte word: element e of w is (e even) the low or (odd) the high half of w[e / 2]. */
__device__ __forceinline__ float bf16_of(const uint4& w, int e) {
    const unsigned int word = e < 2 ? w.x : e < 4 ? w.y : e < 6 ? w.z : w.w;
    return (e & 1) ? __uint_as_float(word & 0xffff0000u) : __uint_as_float(word << 16);
}

__device__ __forceinline__ unsigned int bf16_pair(float lo, float hi) {
    return (unsigned int) f32_to_bf16(lo) | ((unsigned int) f32_to_bf16(hi) << 16);
}

/** Eight floats rounded to bf16 into a 16-byte word, in bf16_of's order. */
__device__ __forceinline__ uint4 bf16_pack8(const float* r) {
    uint4 w;
    w.x = bf16_pair(r[0], r[1]);
    w.y = bf16_pair(r[2], r[3]);
    w.z = bf16_pair(r[4], r[5]);
    w.w = bf16_pair(r[6], r[7]);
    return w;
}

/** The larger magnitude of each bf16 half of m and of word, by halves (a bf16's magnitude bits order as its value). */
__device__ __forceinline__ unsigned int max_halves(unsigned int m, unsigned int word) {
    return __vmaxu2(m, word & 0x7fff7fffu);
}

/** Eight bf16 magnitudes maxed into m's two halves. */
__device__ __forceinline__ unsigned int max_halves8(unsigned int m, const uint4& w) {
    return max_halves(max_halves(max_halves(max_halves(m, w.x), w.y), w.z), w.w);
}

/**
 * The block's largest bf16 magnitude (each thread's in the two halves of {@code halves}, max_halves8's form) maxed
 * into *amax as a float's bits, as fp8_amax_bf16x8 leaves it (a NaN above infinity); every thread of the block calls
 * it, after its last write of the values. block_max: a __shared__ word of the caller's.
 */
__device__ __forceinline__ void amax_commit(unsigned int* amax, unsigned int halves, unsigned int& block_max) {
    if (threadIdx.x == 0) block_max = 0u;
    __syncthreads();
    unsigned int m = max(halves >> 16, halves & 0xffffu) << 16; // the bf16's bits as a float's
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) atomicMax(&block_max, m);
    __syncthreads();
    if (threadIdx.x == 0 && block_max != 0u) atomicMax(amax, block_max);
}

/** Grid-stride loop over [0, n) with a 64-bit index. */
#define GRID_STRIDE(i, n) \
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long) blockDim.x * gridDim.x)
#endif
