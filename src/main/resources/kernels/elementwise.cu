// elementwise.cu: casts, fill, add, scale and the deterministic sum of squares.
//
// Conventions of every kernel file here: outputs come first in the argument list; `bf16` arguments are
// `unsigned short*` holding bf16 bit patterns, `f16` arguments `f16_t*` (common.cuh) holding IEEE fp16 bit patterns;
// every kernel named _bf16 that has no bf16 arithmetic of its own (no _x4 / _x8, nor attention_tc.cu's) has an _f16
// twin with the same arguments, computing in fp32 as the _bf16 one does; every pointer already includes the tensor's
// offset; n counts elements (long long). Element-wise kernels use a grid-stride loop, so any grid of at least one
// block is correct; the suggested launch is block = 256, grid = min(ceil(n / 256), 65536).
//
// Kernel                                     arguments (in order)                          effect
// cast_f32_to_bf16                           bf16 dst, const float* src, long long n       dst = rne(src)
// cast_bf16_to_f32                           float* dst, const bf16 src, long long n       dst = src
// cast_f32_to_f16 / cast_f16_to_f32          as the bf16 casts, for f16 (rne; beyond 65504: inf)
// fill_f32 / fill_bf16 / fill_i32            T* dst, long long n, float|float|int value    dst = value (bf16 rne)
// add_f32_f32 / add_f32_bf16                 float* dst, const T* src, long long n         dst += src
// add_bf16_f32 / add_bf16_bf16               bf16 dst, const T* src, long long n           dst = rne(dst + src), fp32 add
// add_bf16_bf16_x8                           as add_bf16_bf16, eight elements a thread (16-byte loads and stores;
//                                            dst and src 16-byte aligned, the caller checks); the same numbers
// scale_f32 / scale_bf16                     T* x, long long n, float factor               x *= factor (bf16: rne)
// softcap_f32 / softcap_bf16                 T* x, long long n, float cap                  x = cap * tanh(x / cap)
// softcap_backward_f32 / _bf16               T* dx, const T* capped, long long n, float cap
//                                            dx *= 1 - (capped / cap)^2 (the gradient through softcap, from its output)
//
// Sum of squares, two stages, deterministic for a fixed (grid, block) (no atomics):
// sumsq_partial_f32 / sumsq_partial_bf16     double* partials, const T* x, long long n
//     grid = G blocks (any G >= 1, suggested min(ceil(n / 256), 1024)), block = 256 (any multiple of 32, <= 1024),
//     no dynamic shared memory; partials[blockIdx.x] = sum over this block's grid-stride elements of
//     (double) x^2. Several tensors may write to disjoint ranges of one partials buffer (pass partials + offset)
//     and be finished together.
// sumsq_final                                double* out, const double* partials, int count
//     grid = 1, block = 256 (any multiple of 32, <= 1024); out[0] = sum of partials[0..count).
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

extern "C" __global__ void cast_f32_to_bf16(bf16_t* dst, const float* src, long long n) {
    GRID_STRIDE(i, n) dst[i] = f32_to_bf16(src[i]);
}

/**
 * cast_f32_to_bf16 four elements a thread: 16-byte loads and 8-byte stores (src 16-byte and dst 8-byte aligned;
 * the caller checks). n4 = n / 4 groups; the n % 4 tail is done by the first threads. The same rounding as
 * cast_f32_to_bf16, element by element.
 */
extern "C" __global__ void cast_f32_to_bf16_x4(bf16_t* dst, const float* src, long long n) {
    long long n4 = n / 4;
    const float4* src4 = (const float4*) src;
    uint2* dst4 = (uint2*) dst;
    GRID_STRIDE(i, n4) {
        float4 f = src4[i];
        uint2 packed;
        packed.x = (unsigned int) f32_to_bf16(f.x) | ((unsigned int) f32_to_bf16(f.y) << 16);
        packed.y = (unsigned int) f32_to_bf16(f.z) | ((unsigned int) f32_to_bf16(f.w) << 16);
        dst4[i] = packed;
    }
    long long tail = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (tail < n - 4 * n4) dst[4 * n4 + tail] = f32_to_bf16(src[4 * n4 + tail]);
}

extern "C" __global__ void cast_bf16_to_f32(float* dst, const bf16_t* src, long long n) {
    GRID_STRIDE(i, n) dst[i] = bf16_to_f32(src[i]);
}

extern "C" __global__ void cast_f32_to_f16(f16_t* dst, const float* src, long long n) {
    GRID_STRIDE(i, n) dst[i] = f32_to_f16(src[i]);
}

extern "C" __global__ void cast_f16_to_f32(float* dst, const f16_t* src, long long n) {
    GRID_STRIDE(i, n) dst[i] = f16_to_f32(src[i]);
}

extern "C" __global__ void fill_f32(float* dst, long long n, float value) {
    GRID_STRIDE(i, n) dst[i] = value;
}

extern "C" __global__ void fill_bf16(bf16_t* dst, long long n, float value) {
    bf16_t v = f32_to_bf16(value);
    GRID_STRIDE(i, n) dst[i] = v;
}

extern "C" __global__ void fill_f16(f16_t* dst, long long n, float value) {
    f16_t v = f32_to_f16(value);
    GRID_STRIDE(i, n) dst[i] = v;
}

extern "C" __global__ void fill_i32(int* dst, long long n, int value) {
    GRID_STRIDE(i, n) dst[i] = value;
}

template <typename D, typename S>
__device__ __forceinline__ void add_impl(D* dst, const S* src, long long n) {
    GRID_STRIDE(i, n) st(dst + i, ld(dst + i) + ld(src + i));
}

extern "C" __global__ void add_f32_f32(float* dst, const float* src, long long n) { add_impl(dst, src, n); }
extern "C" __global__ void add_f32_bf16(float* dst, const bf16_t* src, long long n) { add_impl(dst, src, n); }

extern "C" __global__ void add_f32_f16(float* dst, const f16_t* src, long long n) { add_impl(dst, src, n); }
extern "C" __global__ void add_bf16_f32(bf16_t* dst, const float* src, long long n) { add_impl(dst, src, n); }

extern "C" __global__ void add_f16_f32(f16_t* dst, const float* src, long long n) { add_impl(dst, src, n); }
extern "C" __global__ void add_bf16_bf16(bf16_t* dst, const bf16_t* src, long long n) { add_impl(dst, src, n); }

extern "C" __global__ void add_f16_f16(f16_t* dst, const f16_t* src, long long n) { add_impl(dst, src, n); }

extern "C" __global__ void add_bf16_bf16_x8(bf16_t* dst, const bf16_t* src, long long n) {
    const long long n8 = n / 8;
    uint4* d8 = reinterpret_cast<uint4*>(dst);
    const uint4* s8 = reinterpret_cast<const uint4*>(src);
    GRID_STRIDE(i, n8) {
        const uint4 a = d8[i], b = s8[i];
        float r[8];
#pragma unroll
        for (int e = 0; e < 8; e++) r[e] = bf16_of(a, e) + bf16_of(b, e);
        d8[i] = bf16_pack8(r);
    }
    GRID_STRIDE(j, n - 8 * n8) st(dst + 8 * n8 + j, ld(dst + 8 * n8 + j) + ld(src + 8 * n8 + j));
}

extern "C" __global__ void scale_f32(float* x, long long n, float factor) {
    GRID_STRIDE(i, n) x[i] *= factor;
}

extern "C" __global__ void scale_bf16(bf16_t* x, long long n, float factor) {
    GRID_STRIDE(i, n) x[i] = f32_to_bf16(bf16_to_f32(x[i]) * factor);
}

extern "C" __global__ void scale_f16(f16_t* x, long long n, float factor) {
    GRID_STRIDE(i, n) x[i] = f32_to_f16(f16_to_f32(x[i]) * factor);
}

template <typename T>
__device__ __forceinline__ void softcap_impl(T* x, long long n, float cap) {
    GRID_STRIDE(i, n) st(x + i, cap * tanhf(ld(x + i) / cap));
}

extern "C" __global__ void softcap_f32(float* x, long long n, float cap) { softcap_impl(x, n, cap); }

extern "C" __global__ void softcap_bf16(bf16_t* x, long long n, float cap) { softcap_impl(x, n, cap); }

extern "C" __global__ void softcap_f16(f16_t* x, long long n, float cap) { softcap_impl(x, n, cap); }

template <typename T>
__device__ __forceinline__ void softcap_backward_impl(T* dx, const T* capped, long long n, float cap) {
    GRID_STRIDE(i, n) {
        const float t = ld(capped + i) / cap;
        st(dx + i, ld(dx + i) * (1.0f - t * t));
    }
}

extern "C" __global__ void softcap_backward_f32(float* dx, const float* capped, long long n, float cap) {
    softcap_backward_impl(dx, capped, n, cap);
}

extern "C" __global__ void softcap_backward_bf16(bf16_t* dx, const bf16_t* capped, long long n, float cap) {
    softcap_backward_impl(dx, capped, n, cap);
}

extern "C" __global__ void softcap_backward_f16(f16_t* dx, const f16_t* capped, long long n, float cap) {
    softcap_backward_impl(dx, capped, n, cap);
}

template <typename T>
__device__ __forceinline__ void sumsq_partial_impl(double* partials, const T* x, long long n) {
    double acc = 0.0;
    GRID_STRIDE(i, n) {
        double v = (double) ld(x + i);
        acc += v * v;
    }
    acc = block_sum_d(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

extern "C" __global__ void sumsq_partial_f32(double* partials, const float* x, long long n) {
    sumsq_partial_impl(partials, x, n);
}

extern "C" __global__ void sumsq_partial_bf16(double* partials, const bf16_t* x, long long n) {
    sumsq_partial_impl(partials, x, n);
}

extern "C" __global__ void sumsq_partial_f16(double* partials, const f16_t* x, long long n) {
    sumsq_partial_impl(partials, x, n);
}

extern "C" __global__ void sumsq_final(double* out, const double* partials, int count) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
    acc = block_sum_d(acc);
    if (threadIdx.x == 0) out[0] = acc;
}
