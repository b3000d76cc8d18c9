// rmsnorm.cu: RMSNorm forward and backward; the weight gradient is reduced deterministically in two stages.
//
// Shapes: x, out, dOut, dx (N, C); weight (C); rstd (N) fp32; dWeight (C) fp32. Pointers include offsets.
// The bf16 variants keep x, out, dOut, dx and weight in bf16 and compute in fp32; rstd, dWeight and the
// partials stay fp32.
//
// rmsnorm_forward_f32  (float* out, float* rstd, const float* x, const float* weight, int N, int C, float eps)
// rmsnorm_forward_bf16 (bf16*  out, float* rstd, const bf16*  x, const bf16*  weight, int N, int C, float eps)
//     grid = N, block = 256 (any multiple of 32, <= 1024), no dynamic shared memory.
//     rstd[n] = 1 / sqrt(mean(x[n,:]^2) + eps) ; out[n,c] = x[n,c] * rstd[n] * weight[c].
//
// rmsnorm_forward_bf16_x8, rmsnorm_backward_bf16_x8: the bf16 kernels with 16-byte loads and stores, eight
//     elements a thread at a time; the same arguments; C % 8 == 0 and x, out, dOut, dx, weight 16-byte aligned;
//     grid = N, block = a multiple of 32 up to 1024 (ceil(C / 8) rounded up to 32, at most 256, fills it). The
//     same formulas element by element; the row sums are added in another order than the plain kernels'.
//
// rmsnorm_backward_f32  (float* dx, const float* dOut, const float* x, const float* weight, const float* rstd,
//                        int N, int C)
// rmsnorm_backward_bf16 (bf16*  dx, const bf16*  dOut, const bf16*  x, const bf16*  weight, const float* rstd,
//                        int N, int C)
//     grid = N, block = 256 (any multiple of 32, <= 1024), no dynamic shared memory.
//     dx written: dx = rstd * (g*w - xhat * mean(g*w*xhat)), xhat = x * rstd.
//
// dWeight += sum over rows of dOut * x * rstd, in two launches (no atomics; fixed order):
// rmsnorm_dweight_partial_f32  (float* partials, const float* dOut, const float* x, const float* rstd,
//                               int N, int C, int rowsPerChunk)
// rmsnorm_dweight_partial_bf16 (float* partials, const bf16*  dOut, const bf16*  x, const float* rstd,
//                               int N, int C, int rowsPerChunk)
//     grid = (ceil(C / 256), R) with R = ceil(N / rowsPerChunk) <= 65535, block = 256 (any blockDim.x works
//     if grid.x = ceil(C / blockDim.x)), no dynamic shared memory.
//     partials (R, C): partials[r, c] = sum of rows [r*rowsPerChunk, min(N, (r+1)*rowsPerChunk)) in row order.
//     Suggested rowsPerChunk = 64 (scratch R*C floats).
// rmsnorm_dweight_finish (float* dWeight, const float* partials, int R, int C, int accumulate)
//     grid = ceil(C / 256), block = 256 (any, as above); s = sum over r in order of partials[r, c]; dWeight[c] += s
//     (accumulate != 0) or dWeight[c] = s (its contents ignored: no zeroing first).
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

template <typename T>
__device__ __forceinline__ void rmsnorm_forward_impl(T* out, float* rstd, const T* x, const T* weight, int N, int C,
                                                     float eps) {
    const long long row = (long long) blockIdx.x * C;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float v = ld(x + row + c);
        ss += v * v;
    }
    ss = block_sum(ss);
    float inv = 1.0f / sqrtf(ss / (float) C + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = inv;
    for (int c = threadIdx.x; c < C; c += blockDim.x) st(out + row + c, ld(x + row + c) * inv * ld(weight + c));
}

extern "C" __global__ void rmsnorm_forward_f32(float* out, float* rstd, const float* x, const float* weight, int N,
                                               int C, float eps) {
    rmsnorm_forward_impl(out, rstd, x, weight, N, C, eps);
}

extern "C" __global__ void rmsnorm_forward_bf16(bf16_t* out, float* rstd, const bf16_t* x, const bf16_t* weight,
                                                int N, int C, float eps) {
    rmsnorm_forward_impl(out, rstd, x, weight, N, C, eps);
}

extern "C" __global__ void rmsnorm_forward_f16(f16_t* out, float* rstd, const f16_t* x, const f16_t* weight,
                                                int N, int C, float eps) {
    rmsnorm_forward_impl(out, rstd, x, weight, N, C, eps);
}

template <typename T>
__device__ __forceinline__ void rmsnorm_backward_impl(T* dx, const T* dOut, const T* x, const T* weight,
                                                      const float* rstd, int N, int C) {
    const long long row = (long long) blockIdx.x * C;
    const float inv = rstd[blockIdx.x];
    float dot = 0.0f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        dot += ld(dOut + row + c) * ld(weight + c) * (ld(x + row + c) * inv);
    }
    const float mean = block_sum(dot) / (float) C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float xhat = ld(x + row + c) * inv;
        st(dx + row + c, inv * (ld(dOut + row + c) * ld(weight + c) - xhat * mean));
    }
}

extern "C" __global__ void rmsnorm_backward_f32(float* dx, const float* dOut, const float* x, const float* weight,
                                                const float* rstd, int N, int C) {
    rmsnorm_backward_impl(dx, dOut, x, weight, rstd, N, C);
}

extern "C" __global__ void rmsnorm_backward_bf16(bf16_t* dx, const bf16_t* dOut, const bf16_t* x,
                                                 const bf16_t* weight, const float* rstd, int N, int C) {
    rmsnorm_backward_impl(dx, dOut, x, weight, rstd, N, C);
}

extern "C" __global__ void rmsnorm_backward_f16(f16_t* dx, const f16_t* dOut, const f16_t* x,
                                                 const f16_t* weight, const float* rstd, int N, int C) {
    rmsnorm_backward_impl(dx, dOut, x, weight, rstd, N, C);
}

extern "C" __global__ void rmsnorm_forward_bf16_x8(bf16_t* out, float* rstd, const bf16_t* x, const bf16_t* weight,
                                                   int N, int C, float eps) {
    const long long row = (long long) blockIdx.x * C;
    const uint4* xv = reinterpret_cast<const uint4*>(x + row);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    uint4* ov = reinterpret_cast<uint4*>(out + row);
    const int nv = C / 8;
    float ss = 0.0f;
    for (int v = threadIdx.x; v < nv; v += blockDim.x) {
        const uint4 u = xv[v];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float f = bf16_of(u, e);
            ss += f * f;
        }
    }
    ss = block_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float) C + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = inv;
    for (int v = threadIdx.x; v < nv; v += blockDim.x) { // the row again, from the cache
        const uint4 u = xv[v], w = wv[v];
        float r[8];
#pragma unroll
        for (int e = 0; e < 8; e++) r[e] = bf16_of(u, e) * inv * bf16_of(w, e);
        ov[v] = bf16_pack8(r);
    }
}

extern "C" __global__ void rmsnorm_backward_bf16_x8(bf16_t* dx, const bf16_t* dOut, const bf16_t* x,
                                                    const bf16_t* weight, const float* rstd, int N, int C) {
    const long long row = (long long) blockIdx.x * C;
    const uint4* xv = reinterpret_cast<const uint4*>(x + row);
    const uint4* gv = reinterpret_cast<const uint4*>(dOut + row);
    const uint4* wv = reinterpret_cast<const uint4*>(weight);
    uint4* dv = reinterpret_cast<uint4*>(dx + row);
    const int nv = C / 8;
    const float inv = rstd[blockIdx.x];
    float dot = 0.0f;
    for (int v = threadIdx.x; v < nv; v += blockDim.x) {
        const uint4 u = xv[v], g = gv[v], w = wv[v];
#pragma unroll
        for (int e = 0; e < 8; e++) dot += bf16_of(g, e) * bf16_of(w, e) * (bf16_of(u, e) * inv);
    }
    const float mean = block_sum(dot) / (float) C;
    for (int v = threadIdx.x; v < nv; v += blockDim.x) {
        const uint4 u = xv[v], g = gv[v], w = wv[v];
        float r[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float xhat = bf16_of(u, e) * inv;
            r[e] = inv * (bf16_of(g, e) * bf16_of(w, e) - xhat * mean);
        }
        dv[v] = bf16_pack8(r);
    }
}

template <typename T>
__device__ __forceinline__ void rmsnorm_dweight_partial_impl(float* partials, const T* dOut, const T* x,
                                                             const float* rstd, int N, int C, int rowsPerChunk) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int r0 = blockIdx.y * rowsPerChunk;
    const int r1 = min(N, r0 + rowsPerChunk);
    float acc = 0.0f;
    for (int r = r0; r < r1; r++) {
        long long i = (long long) r * C + c;
        acc += ld(dOut + i) * ld(x + i) * rstd[r];
    }
    partials[(long long) blockIdx.y * C + c] = acc;
}

extern "C" __global__ void rmsnorm_dweight_partial_f32(float* partials, const float* dOut, const float* x,
                                                       const float* rstd, int N, int C, int rowsPerChunk) {
    rmsnorm_dweight_partial_impl(partials, dOut, x, rstd, N, C, rowsPerChunk);
}

extern "C" __global__ void rmsnorm_dweight_partial_bf16(float* partials, const bf16_t* dOut, const bf16_t* x,
                                                        const float* rstd, int N, int C, int rowsPerChunk) {
    rmsnorm_dweight_partial_impl(partials, dOut, x, rstd, N, C, rowsPerChunk);
}

extern "C" __global__ void rmsnorm_dweight_partial_f16(float* partials, const f16_t* dOut, const f16_t* x,
                                                        const float* rstd, int N, int C, int rowsPerChunk) {
    rmsnorm_dweight_partial_impl(partials, dOut, x, rstd, N, C, rowsPerChunk);
}

extern "C" __global__ void rmsnorm_dweight_finish(float* dWeight, const float* partials, int R, int C,
                                                  int accumulate) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
    for (int r = 0; r < R; r++) acc += partials[(long long) r * C + c];
    dWeight[c] = accumulate ? dWeight[c] + acc : acc;
}

// ---- per-head RMSNorm (Qwen3's and Gemma 3's q_norm and k_norm) ------------------------------------------
//
// x, out, dOut, dx (N, W) with W the row width; heads firstHead .. firstHead+H-1 of HS columns each are
// normalised, every other column is left untouched; weight (HS); rstd (N, H) fp32; dWeight (HS) fp32.
// out may be x, and dx may be dOut (in place): every element is read by the thread that writes it, after the
// head's reduction.
//
// head_rmsnorm_forward_f32  (float* out, float* rstd, const float* x, const float* weight, int N, int W,
//                            int firstHead, int H, int HS, float eps)
// head_rmsnorm_forward_bf16 (bf16*  out, float* rstd, const bf16*  x, const bf16*  weight, ... the same)
//     grid = N, block = a multiple of 32 (one warp a head at a time; 256 suggested), no dynamic shared memory.
//     rstd[n,h] = 1 / sqrt(mean(x[n, head h]^2) + eps) ; out[n, head h, j] = x * rstd[n,h] * weight[j].
//
// head_rmsnorm_backward_f32  (float* dx, const float* dOut, const float* x, const float* weight,
//                             const float* rstd, int N, int W, int firstHead, int H, int HS)
// head_rmsnorm_backward_bf16 (bf16*  dx, const bf16*  dOut, const bf16*  x, const bf16*  weight, ... the same)
//     grid = N, block = a multiple of 32, no dynamic shared memory.
//     dx = rstd * (g*w - xhat * mean(g*w*xhat)) over the head, xhat = x * rstd. When dx is dOut, launch the
//     dweight kernels first: they read dOut.
//
// head_rmsnorm_dweight_partial_f32  (float* partials, const float* dOut, const float* x, const float* rstd,
//                                    int N, int W, int firstHead, int H, int HS, int rowsPerChunk)
// head_rmsnorm_dweight_partial_bf16 (float* partials, const bf16*  dOut, const bf16*  x, ... the same)
//     grid = (ceil(HS / 256), R) with R = ceil(N / rowsPerChunk) <= 65535, block = 256 (any, grid.x matching).
//     partials (R, HS): partials[r, j] = sum over the chunk's rows in order, and over heads in order, of
//     dOut * x * rstd at column j of the head. Then rmsnorm_dweight_finish (R, C = HS) as for RMSNorm.

template <typename T>
__device__ __forceinline__ void head_rmsnorm_forward_impl(T* out, float* rstd, const T* x, const T* weight, int N,
                                                          int W, int firstHead, int H, int HS, float eps) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int h = warp; h < H; h += warps) {
        const long long col = (long long) blockIdx.x * W + (long long) (firstHead + h) * HS;
        float ss = 0.0f;
        for (int j = lane; j < HS; j += 32) {
            const float v = ld(x + col + j);
            ss += v * v;
        }
        ss = warp_sum(ss);
        const float inv = 1.0f / sqrtf(ss / (float) HS + eps);
        if (lane == 0) rstd[(long long) blockIdx.x * H + h] = inv;
        for (int j = lane; j < HS; j += 32) st(out + col + j, ld(x + col + j) * inv * ld(weight + j));
    }
}

extern "C" __global__ void head_rmsnorm_forward_f32(float* out, float* rstd, const float* x, const float* weight,
                                                    int N, int W, int firstHead, int H, int HS, float eps) {
    head_rmsnorm_forward_impl(out, rstd, x, weight, N, W, firstHead, H, HS, eps);
}

extern "C" __global__ void head_rmsnorm_forward_bf16(bf16_t* out, float* rstd, const bf16_t* x,
                                                     const bf16_t* weight, int N, int W, int firstHead, int H,
                                                     int HS, float eps) {
    head_rmsnorm_forward_impl(out, rstd, x, weight, N, W, firstHead, H, HS, eps);
}

extern "C" __global__ void head_rmsnorm_forward_f16(f16_t* out, float* rstd, const f16_t* x,
                                                     const f16_t* weight, int N, int W, int firstHead, int H,
                                                     int HS, float eps) {
    head_rmsnorm_forward_impl(out, rstd, x, weight, N, W, firstHead, H, HS, eps);
}

template <typename T>
__device__ __forceinline__ void head_rmsnorm_backward_impl(T* dx, const T* dOut, const T* x, const T* weight,
                                                           const float* rstd, int N, int W, int firstHead, int H,
                                                           int HS) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int h = warp; h < H; h += warps) {
        const long long col = (long long) blockIdx.x * W + (long long) (firstHead + h) * HS;
        const float inv = rstd[(long long) blockIdx.x * H + h];
        float dot = 0.0f;
        for (int j = lane; j < HS; j += 32) dot += ld(dOut + col + j) * ld(weight + j) * (ld(x + col + j) * inv);
        const float mean = warp_sum(dot) / (float) HS;
        for (int j = lane; j < HS; j += 32) {
            const float xhat = ld(x + col + j) * inv;
            st(dx + col + j, inv * (ld(dOut + col + j) * ld(weight + j) - xhat * mean));
        }
    }
}

extern "C" __global__ void head_rmsnorm_backward_f32(float* dx, const float* dOut, const float* x,
                                                     const float* weight, const float* rstd, int N, int W,
                                                     int firstHead, int H, int HS) {
    head_rmsnorm_backward_impl(dx, dOut, x, weight, rstd, N, W, firstHead, H, HS);
}

extern "C" __global__ void head_rmsnorm_backward_bf16(bf16_t* dx, const bf16_t* dOut, const bf16_t* x,
                                                      const bf16_t* weight, const float* rstd, int N, int W,
                                                      int firstHead, int H, int HS) {
    head_rmsnorm_backward_impl(dx, dOut, x, weight, rstd, N, W, firstHead, H, HS);
}

extern "C" __global__ void head_rmsnorm_backward_f16(f16_t* dx, const f16_t* dOut, const f16_t* x,
                                                      const f16_t* weight, const float* rstd, int N, int W,
                                                      int firstHead, int H, int HS) {
    head_rmsnorm_backward_impl(dx, dOut, x, weight, rstd, N, W, firstHead, H, HS);
}

template <typename T>
__device__ __forceinline__ void head_rmsnorm_dweight_partial_impl(float* partials, const T* dOut, const T* x,
                                                                  const float* rstd, int N, int W, int firstHead,
                                                                  int H, int HS, int rowsPerChunk) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= HS) return;
    const int r0 = blockIdx.y * rowsPerChunk, r1 = min(N, r0 + rowsPerChunk);
    float acc = 0.0f;
    for (int r = r0; r < r1; r++) {
        for (int h = 0; h < H; h++) {
            const long long i = (long long) r * W + (long long) (firstHead + h) * HS + j;
            acc += ld(dOut + i) * ld(x + i) * rstd[(long long) r * H + h];
        }
    }
    partials[(long long) blockIdx.y * HS + j] = acc;
}

extern "C" __global__ void head_rmsnorm_dweight_partial_f32(float* partials, const float* dOut, const float* x,
                                                            const float* rstd, int N, int W, int firstHead, int H,
                                                            int HS, int rowsPerChunk) {
    head_rmsnorm_dweight_partial_impl(partials, dOut, x, rstd, N, W, firstHead, H, HS, rowsPerChunk);
}

extern "C" __global__ void head_rmsnorm_dweight_partial_bf16(float* partials, const bf16_t* dOut, const bf16_t* x,
                                                             const float* rstd, int N, int W, int firstHead, int H,
                                                             int HS, int rowsPerChunk) {
    head_rmsnorm_dweight_partial_impl(partials, dOut, x, rstd, N, W, firstHead, H, HS, rowsPerChunk);
}

extern "C" __global__ void head_rmsnorm_dweight_partial_f16(float* partials, const f16_t* dOut, const f16_t* x,
                                                             const float* rstd, int N, int W, int firstHead, int H,
                                                             int HS, int rowsPerChunk) {
    head_rmsnorm_dweight_partial_impl(partials, dOut, x, rstd, N, W, firstHead, H, HS, rowsPerChunk);
}
