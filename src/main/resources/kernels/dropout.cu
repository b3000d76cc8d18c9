// dropout.cu: dropout with a counter-based mask, the same bits as io.fsdp4j.backend.DropoutMask (and CpuBackend).
//
// Kernel                       arguments (in order)                                                  effect
// dropout_f32 / dropout_bf16   T* out, const T* x, long long n, unsigned long long seed,            out = kept ? x * scale : 0
//                              long long first, unsigned int threshold, float scale
//     element e is kept when the top 24 bits of splitmix64's mix(seed + (first + e) * golden) are >= threshold
//     (threshold = round(p * 2^24), scale = 1 / (1 - p) in fp32, both from the host); fp32 product, bf16 rne.
//     out may be x. Grid-stride: any grid of at least one block; suggested block 256, grid min(ceil(n / 256), 65536).
#include "common.cuh" // bf16 as bits, ld/st, GRID_STRIDE

__device__ __forceinline__ unsigned long long splitmix64_mix(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

template <typename T>
__device__ __forceinline__ void dropout_impl(T* out, const T* x, long long n, unsigned long long seed, long long first,
                                             unsigned int threshold, float scale) {
    GRID_STRIDE(i, n) {
        unsigned long long index = (unsigned long long) (first + i);
        bool kept = (unsigned int) (splitmix64_mix(seed + index * 0x9E3779B97F4A7C15ull) >> 40) >= threshold;
        st(out + i, kept ? ld(x + i) * scale : 0.0f);
    }
}

extern "C" __global__ void dropout_f32(float* out, const float* x, long long n, unsigned long long seed,
                                       long long first, unsigned int threshold, float scale) {
    dropout_impl(out, x, n, seed, first, threshold, scale);
}

extern "C" __global__ void dropout_bf16(bf16_t* out, const bf16_t* x, long long n, unsigned long long seed,
                                        long long first, unsigned int threshold, float scale) {
    dropout_impl(out, x, n, seed, first, threshold, scale);
}
