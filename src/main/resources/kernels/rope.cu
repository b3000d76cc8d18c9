// rope.cu: rotary position embedding (rotate_half convention), in place, forward and backward.
//
// Shapes: x (N, width) with width >= rotatedHeads * HS (for packed qkv: width = (NH + 2*NKV) * HS and
// rotatedHeads = NH + NKV, so q and k rotate and v does not); positions (N) int32 in [0, P);
// cos, sin (P, HS/2) fp32 (row p holds the angles of position p). HS is even. Pointers include offsets.
// With halves x1 = x[h*HS + j], x2 = x[h*HS + HS/2 + j] of each rotated head h, j < HS/2:
//   forward:  x1' = x1 cos - x2 sin ; x2' = x2 cos + x1 sin
//   backward: the same with sin negated (the inverse rotation; applied to a gradient).
//
// rope_forward_f32  / rope_backward_f32  (float* x, const int* positions, const float* cos, const float* sin,
//                                         int N, int width, int rotatedHeads, int HS)
// rope_forward_bf16 / rope_backward_bf16 (bf16*  x, const int* positions, const float* cos, const float* sin,
//                                         int N, int width, int rotatedHeads, int HS)
//     grid = N, block = 128 (any), no dynamic shared memory. bf16: fp32 compute, each element rounded once.
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

template <typename T>
__device__ __forceinline__ void rope_impl(T* x, const int* positions, const float* cos, const float* sin, int width,
                                          int rotatedHeads, int HS, float sign) {
    const int half = HS >> 1;
    T* row = x + (long long) blockIdx.x * width;
    const long long p = (long long) positions[blockIdx.x] * half;
    for (int idx = threadIdx.x; idx < rotatedHeads * half; idx += blockDim.x) {
        int h = idx / half, j = idx - h * half;
        float c = cos[p + j], s = sign * sin[p + j];
        T* a = row + h * HS + j;
        T* b = a + half;
        float x1 = ld(a), x2 = ld(b);
        st(a, x1 * c - x2 * s);
        st(b, x2 * c + x1 * s);
    }
}

extern "C" __global__ void rope_forward_f32(float* x, const int* positions, const float* cos, const float* sin, int N,
                                            int width, int rotatedHeads, int HS) {
    rope_impl(x, positions, cos, sin, width, rotatedHeads, HS, 1.0f);
}

extern "C" __global__ void rope_backward_f32(float* x, const int* positions, const float* cos, const float* sin,
                                             int N, int width, int rotatedHeads, int HS) {
    rope_impl(x, positions, cos, sin, width, rotatedHeads, HS, -1.0f);
}

extern "C" __global__ void rope_forward_bf16(bf16_t* x, const int* positions, const float* cos, const float* sin,
                                             int N, int width, int rotatedHeads, int HS) {
    rope_impl(x, positions, cos, sin, width, rotatedHeads, HS, 1.0f);
}

extern "C" __global__ void rope_forward_f16(f16_t* x, const int* positions, const float* cos, const float* sin,
                                             int N, int width, int rotatedHeads, int HS) {
    rope_impl(x, positions, cos, sin, width, rotatedHeads, HS, 1.0f);
}

extern "C" __global__ void rope_backward_bf16(bf16_t* x, const int* positions, const float* cos, const float* sin,
                                              int N, int width, int rotatedHeads, int HS) {
    rope_impl(x, positions, cos, sin, width, rotatedHeads, HS, -1.0f);
}

extern "C" __global__ void rope_backward_f16(f16_t* x, const int* positions, const float* cos, const float* sin,
                                              int N, int width, int rotatedHeads, int HS) {
    rope_impl(x, positions, cos, sin, width, rotatedHeads, HS, -1.0f);
}
