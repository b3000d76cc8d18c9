// layernorm.cu: LayerNorm (with bias) forward and backward; the weight and bias gradients are reduced
// deterministically in two stages (no atomics).
//
// Shapes: x, out, dOut, dx (N, C); weight, bias (C); mean, rstd (N) fp32; dWeight, dBias (C) fp32. Pointers include
// offsets. The bf16 variants keep x, out, dOut, dx, weight and bias in bf16 and compute in fp32; mean, rstd,
// dWeight, dBias and the partials stay fp32.
//
// layernorm_forward_f32  (float* out, float* mean, float* rstd, const float* x, const float* weight,
//                         const float* bias, int N, int C, float eps)
// layernorm_forward_bf16 (bf16*  out, float* mean, float* rstd, const bf16*  x, const bf16*  weight,
//                         const bf16*  bias, int N, int C, float eps)
//     grid = N, block = 256 (any multiple of 32, <= 1024), no dynamic shared memory.
//     mean[n] = mean(x[n,:]) ; rstd[n] = 1 / sqrt(mean((x[n,:] - mean[n])^2) + eps) (biased variance, two passes);
//     out[n,c] = (x[n,c] - mean[n]) * rstd[n] * weight[c] + bias[c].
//
// layernorm_backward_f32  (float* dx, const float* dOut, const float* x, const float* weight, const float* mean,
//                          const float* rstd, int N, int C)
// layernorm_backward_bf16 (bf16*  dx, const bf16*  dOut, const bf16*  x, const bf16*  weight, const float* mean,
//                          const float* rstd, int N, int C)
//     grid = N, block = 256 (any multiple of 32, <= 1024), no dynamic shared memory.
//     dx written: dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)), xhat = (x - mean) * rstd.
//
// dWeight += sum over rows of dOut * xhat and dBias += sum over rows of dOut, in two launches:
// layernorm_dparams_partial_f32  (float* partialsW, float* partialsB, const float* dOut, const float* x,
//                                 const float* mean, const float* rstd, int N, int C, int rowsPerChunk)
// layernorm_dparams_partial_bf16 (float* partialsW, float* partialsB, const bf16*  dOut, const bf16*  x,
//                                 const float* mean, const float* rstd, int N, int C, int rowsPerChunk)
//     grid = (ceil(C / 256), R) with R = ceil(N / rowsPerChunk) <= 65535, block = 256 (any blockDim.x works if
//     grid.x = ceil(C / blockDim.x)), no dynamic shared memory. partialsW, partialsB (R, C): the sums of rows
//     [r*rowsPerChunk, min(N, (r+1)*rowsPerChunk)) in row order. Suggested rowsPerChunk = 64.
// layernorm_dparams_finish (float* dWeight, float* dBias, const float* partialsW, const float* partialsB, int R,
//                           int C)
//     grid = ceil(C / 256), block = 256 (any, as above); dWeight[c] += sum over r in order of partialsW[r, c], and
//     likewise dBias from partialsB.
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

template <typename T>
__device__ __forceinline__ void layernorm_forward_impl(T* out, float* mean, float* rstd, const T* x, const T* weight,
                                                       const T* bias, int C, float eps) {
    const long long row = (long long) blockIdx.x * C;
    float s = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) s += ld(x + row + c);
    const float mu = block_sum(s) / (float) C;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float d = ld(x + row + c) - mu;
        ss += d * d;
    }
    const float inv = 1.0f / sqrtf(block_sum(ss) / (float) C + eps);
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = mu;
        rstd[blockIdx.x] = inv;
    }
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        st(out + row + c, (ld(x + row + c) - mu) * inv * ld(weight + c) + ld(bias + c));
    }
}

extern "C" __global__ void layernorm_forward_f32(float* out, float* mean, float* rstd, const float* x,
                                                 const float* weight, const float* bias, int N, int C, float eps) {
    layernorm_forward_impl(out, mean, rstd, x, weight, bias, C, eps);
}

extern "C" __global__ void layernorm_forward_bf16(bf16_t* out, float* mean, float* rstd, const bf16_t* x,
                                                  const bf16_t* weight, const bf16_t* bias, int N, int C, float eps) {
    layernorm_forward_impl(out, mean, rstd, x, weight, bias, C, eps);
}

extern "C" __global__ void layernorm_forward_f16(f16_t* out, float* mean, float* rstd, const f16_t* x,
                                                  const f16_t* weight, const f16_t* bias, int N, int C, float eps) {
    layernorm_forward_impl(out, mean, rstd, x, weight, bias, C, eps);
}

template <typename T>
__device__ __forceinline__ void layernorm_backward_impl(T* dx, const T* dOut, const T* x, const T* weight,
                                                        const float* mean, const float* rstd, int C) {
    const long long row = (long long) blockIdx.x * C;
    const float mu = mean[blockIdx.x], inv = rstd[blockIdx.x];
    float sumGw = 0.0f, sumGwXhat = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float gw = ld(dOut + row + c) * ld(weight + c);
        sumGw += gw;
        sumGwXhat += gw * ((ld(x + row + c) - mu) * inv);
    }
    const float meanGw = block_sum(sumGw) / (float) C;
    const float meanGwXhat = block_sum(sumGwXhat) / (float) C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float xhat = (ld(x + row + c) - mu) * inv;
        st(dx + row + c, inv * (ld(dOut + row + c) * ld(weight + c) - meanGw - xhat * meanGwXhat));
    }
}

extern "C" __global__ void layernorm_backward_f32(float* dx, const float* dOut, const float* x, const float* weight,
                                                  const float* mean, const float* rstd, int N, int C) {
    layernorm_backward_impl(dx, dOut, x, weight, mean, rstd, C);
}

extern "C" __global__ void layernorm_backward_bf16(bf16_t* dx, const bf16_t* dOut, const bf16_t* x,
                                                   const bf16_t* weight, const float* mean, const float* rstd, int N,
                                                   int C) {
    layernorm_backward_impl(dx, dOut, x, weight, mean, rstd, C);
}

extern "C" __global__ void layernorm_backward_f16(f16_t* dx, const f16_t* dOut, const f16_t* x,
                                                   const f16_t* weight, const float* mean, const float* rstd, int N,
                                                   int C) {
    layernorm_backward_impl(dx, dOut, x, weight, mean, rstd, C);
}

template <typename T>
__device__ __forceinline__ void layernorm_dparams_partial_impl(float* partialsW, float* partialsB, const T* dOut,
                                                               const T* x, const float* mean, const float* rstd,
                                                               int N, int C, int rowsPerChunk) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int r0 = blockIdx.y * rowsPerChunk;
    const int r1 = min(N, r0 + rowsPerChunk);
    float accW = 0.0f, accB = 0.0f;
    for (int r = r0; r < r1; r++) {
        long long i = (long long) r * C + c;
        float g = ld(dOut + i);
        accW += g * ((ld(x + i) - mean[r]) * rstd[r]);
        accB += g;
    }
    partialsW[(long long) blockIdx.y * C + c] = accW;
    partialsB[(long long) blockIdx.y * C + c] = accB;
}

extern "C" __global__ void layernorm_dparams_partial_f32(float* partialsW, float* partialsB, const float* dOut,
                                                         const float* x, const float* mean, const float* rstd, int N,
                                                         int C, int rowsPerChunk) {
    layernorm_dparams_partial_impl(partialsW, partialsB, dOut, x, mean, rstd, N, C, rowsPerChunk);
}

extern "C" __global__ void layernorm_dparams_partial_bf16(float* partialsW, float* partialsB, const bf16_t* dOut,
                                                          const bf16_t* x, const float* mean, const float* rstd, int N,
                                                          int C, int rowsPerChunk) {
    layernorm_dparams_partial_impl(partialsW, partialsB, dOut, x, mean, rstd, N, C, rowsPerChunk);
}

extern "C" __global__ void layernorm_dparams_partial_f16(float* partialsW, float* partialsB, const f16_t* dOut,
                                                          const f16_t* x, const float* mean, const float* rstd, int N,
                                                          int C, int rowsPerChunk) {
    layernorm_dparams_partial_impl(partialsW, partialsB, dOut, x, mean, rstd, N, C, rowsPerChunk);
}

extern "C" __global__ void layernorm_dparams_finish(float* dWeight, float* dBias, const float* partialsW,
                                                    const float* partialsB, int R, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float accW = 0.0f, accB = 0.0f;
    for (int r = 0; r < R; r++) {
        accW += partialsW[(long long) r * C + c];
        accB += partialsB[(long long) r * C + c];
    }
    dWeight[c] += accW;
    dBias[c] += accB;
}
