// gelu.cu: GELU with the tanh approximation (BLOOM's, GPT-2's gelu_new), element-wise.
//
//   forward:  out = 0.5 x (1 + t), t = tanh(k (x + 0.044715 x^3)), k = sqrt(2/pi)
//   backward: dx = dOut * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2))   (dx written)
// Pointers include offsets. bf16 variants: bf16 storage, fp32 compute.
//
// gelu_forward_f32   (float* out, const float* x, long long n)
// gelu_forward_bf16  (bf16*  out, const bf16*  x, long long n)
// gelu_backward_f32  (float* dx,  const float* dOut, const float* x, long long n)
// gelu_backward_bf16 (bf16*  dx,  const bf16*  dOut, const bf16*  x, long long n)
//     grid-stride: any grid of >= 1 block, suggested block 256 and grid min(ceil(n / 256), 65536).
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

template <typename T>
__device__ __forceinline__ void gelu_forward_impl(T* out, const T* x, long long n) {
    GRID_STRIDE(i, n) {
        float v = ld(x + i);
        float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
        st(out + i, 0.5f * v * (1.0f + t));
    }
}

template <typename T>
__device__ __forceinline__ void gelu_backward_impl(T* dx, const T* dOut, const T* x, long long n) {
    GRID_STRIDE(i, n) {
        float v = ld(x + i);
        float t = tanhf(GELU_K * (v + GELU_C * v * v * v));
        float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_C * v * v);
        st(dx + i, ld(dOut + i) * d);
    }
}

extern "C" __global__ void gelu_forward_f32(float* out, const float* x, long long n) {
    gelu_forward_impl(out, x, n);
}

extern "C" __global__ void gelu_forward_bf16(bf16_t* out, const bf16_t* x, long long n) {
    gelu_forward_impl(out, x, n);
}

extern "C" __global__ void gelu_forward_f16(f16_t* out, const f16_t* x, long long n) {
    gelu_forward_impl(out, x, n);
}

extern "C" __global__ void gelu_backward_f32(float* dx, const float* dOut, const float* x, long long n) {
    gelu_backward_impl(dx, dOut, x, n);
}

extern "C" __global__ void gelu_backward_bf16(bf16_t* dx, const bf16_t* dOut, const bf16_t* x, long long n) {
    gelu_backward_impl(dx, dOut, x, n);
}

extern "C" __global__ void gelu_backward_f16(f16_t* dx, const f16_t* dOut, const f16_t* x, long long n) {
    gelu_backward_impl(dx, dOut, x, n);
}
