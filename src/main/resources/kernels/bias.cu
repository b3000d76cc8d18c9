// bias.cu: the bias of a linear layer: add in forward, deterministic column sums in backward.
//
// Shapes: out, dY (N, O) row-major; bias (O); dBias (O) fp32; partials (R, O) fp32. Pointers include offsets.
//
// bias_add_f32  (float* out, const float* bias, int N, int O)
// bias_add_bf16 (bf16*  out, const bf16*  bias, int N, int O)      fp32 add, rounded once
//     grid = N, block = 256 (any), no dynamic shared memory. out[n, o] += bias[o].
//
// dBias += column sums of dY, in two launches (no atomics; fixed order):
// bias_grad_partial_f32  (float* partials, const float* dY, int N, int O, int rowsPerChunk)
// bias_grad_partial_bf16 (float* partials, const bf16*  dY, int N, int O, int rowsPerChunk)
//     grid = (ceil(O / 256), R) with R = ceil(N / rowsPerChunk) <= 65535, block = 256 (any blockDim.x works if
//     grid.x = ceil(O / blockDim.x)), no dynamic shared memory.
//     partials[r, o] = sum of dY rows [r*rowsPerChunk, min(N, (r+1)*rowsPerChunk)) in row order.
//     Suggested rowsPerChunk = 64.
// bias_grad_finish (float* dBias, const float* partials, int R, int O, int accumulate)
//     grid = ceil(O / 256), block = 256 (any, as above); s = sum over r in order of partials[r, o]; dBias[o] += s
//     (accumulate != 0) or dBias[o] = s (its contents ignored: no zeroing first).
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

template <typename T>
__device__ __forceinline__ void bias_add_impl(T* out, const T* bias, int O) {
    T* row = out + (long long) blockIdx.x * O;
    for (int o = threadIdx.x; o < O; o += blockDim.x) st(row + o, ld(row + o) + ld(bias + o));
}

extern "C" __global__ void bias_add_f32(float* out, const float* bias, int N, int O) { bias_add_impl(out, bias, O); }

extern "C" __global__ void bias_add_bf16(bf16_t* out, const bf16_t* bias, int N, int O) {
    bias_add_impl(out, bias, O);
}

extern "C" __global__ void bias_add_f16(f16_t* out, const f16_t* bias, int N, int O) {
    bias_add_impl(out, bias, O);
}

template <typename T>
__device__ __forceinline__ void bias_grad_partial_impl(float* partials, const T* dY, int N, int O, int rowsPerChunk) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= O) return;
    const int r0 = blockIdx.y * rowsPerChunk;
    const int r1 = min(N, r0 + rowsPerChunk);
    float acc = 0.0f;
    for (int r = r0; r < r1; r++) acc += ld(dY + (long long) r * O + o);
    partials[(long long) blockIdx.y * O + o] = acc;
}

extern "C" __global__ void bias_grad_partial_f32(float* partials, const float* dY, int N, int O, int rowsPerChunk) {
    bias_grad_partial_impl(partials, dY, N, O, rowsPerChunk);
}

extern "C" __global__ void bias_grad_partial_bf16(float* partials, const bf16_t* dY, int N, int O, int rowsPerChunk) {
    bias_grad_partial_impl(partials, dY, N, O, rowsPerChunk);
}

extern "C" __global__ void bias_grad_partial_f16(float* partials, const f16_t* dY, int N, int O, int rowsPerChunk) {
    bias_grad_partial_impl(partials, dY, N, O, rowsPerChunk);
}

extern "C" __global__ void bias_grad_finish(float* dBias, const float* partials, int R, int O, int accumulate) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= O) return;
    float acc = 0.0f;
    for (int r = 0; r < R; r++) acc += partials[(long long) r * O + o];
    dBias[o] = accumulate ? dBias[o] + acc : acc;
}
