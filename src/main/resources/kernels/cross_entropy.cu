// cross_entropy.cu: fused softmax cross-entropy over logits, with the gradient written over the logits.
//
// Shapes: logits (N, V) row-major; targets (N) int32, -100 = ignored; lossPerRow (N) fp32. Pointers include
// offsets. V may be any size (one block per row loops over it; V = 152064 is fine).
//
// cross_entropy_f32  (float* logits, float* lossPerRow, const int* targets, int N, int V, float gradScale)
// cross_entropy_bf16 (bf16*  logits, float* lossPerRow, const int* targets, int N, int V, float gradScale)
//     grid = N, block = 1024 (any multiple of 32, <= 1024), no dynamic shared memory.
//     For a counted row (0 <= target < V): lse = log(sum_j exp(z_j)) (online max/sum, fp32),
//       lossPerRow[n] = lse - z[target]; when gradScale != 0 the row is overwritten with
//       exp(z_j - lse) * gradScale, minus gradScale at j = target (bf16: rounded once).
//     Ignored row (target == -100): lossPerRow[n] = 0, and when gradScale != 0 the row is set to zeros.
//     A target outside [0, V) that is not -100 is an error the host should have caught: lossPerRow[n] = NaN
//     (so the summed loss shows it) and, when gradScale != 0, the row is set to zeros.
//     Deterministic (fixed reduction order for a given blockDim).
//
// cross_entropy_bf16_x8: cross_entropy_bf16 with 16-byte loads and stores, eight logits a thread at a time, the
//     exponentials on the special-function unit (__expf); the same arguments and launch; V % 8 == 0 and logits
//     16-byte aligned. The same results up to the order of the sums and the exponentials' last bits.
//
// cross_entropy_sum (double* out, const float* lossPerRow, int N)
//     grid = 1, block = 1024 (any multiple of 32, <= 1024); out[0] = sum over n of (double) lossPerRow[n].
//
// argmax_rows_f32 / _bf16 / _f16 (int* out, const T* logits, int N, int V)
//     grid = N, block = 256 (any multiple of 32, <= 1024); out[n] = the index of row n's largest value, the lowest
//     such index on ties; NaN is never the largest (a row of NaN only gives 0). Greedy decoding: N rows of B x V
//     logits become N ints on the device, not B x V floats on the host.
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

/** Merges the running (max, sum of exp(z - max)) pair (m2, s2) into (m, s). */
__device__ __forceinline__ void softmax_merge(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    if (mn == NEG_INF) return; // both empty
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

/**
 * The log-sum-exp of a block's rows of logits from each thread's running (max, sum of exp(z - max)): merged across
 * the warp, then the warps in order; the same value in every thread. Every thread must call it (it synchronizes).
 */
__device__ __forceinline__ float block_logsumexp(float m, float s) {
    __shared__ float shM[32], shS[32];
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);
        softmax_merge(m, s, m2, s2);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (lane == 0) {
        shM[warp] = m;
        shS[warp] = s;
    }
    __syncthreads();
    m = NEG_INF;
    s = 0.0f;
    for (int w = 0; w < warps; w++) softmax_merge(m, s, shM[w], shS[w]);
    return m + logf(s);
}

template <typename T>
__device__ __forceinline__ void cross_entropy_impl(T* logits, float* lossPerRow, const int* targets, int V,
                                                   float gradScale) {
    const int n = blockIdx.x;
    const int target = targets[n];
    T* row = logits + (long long) n * V;
    if (target < 0 || target >= V) {
        if (threadIdx.x == 0) lossPerRow[n] = target == -100 ? 0.0f : __int_as_float(0x7fc00000);
        if (gradScale != 0.0f) {
            for (int j = threadIdx.x; j < V; j += blockDim.x) st(row + j, 0.0f);
        }
        return;
    }
    // pass 1: online max and sum of exponentials
    float m = NEG_INF, s = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float z = ld(row + j);
        if (z > m) {
            s = s * expf(m - z) + 1.0f;
            m = z;
        } else {
            s += expf(z - m);
        }
    }
    const float zt = ld(row + target); // read before any thread overwrites the row
    const float lse = block_logsumexp(m, s);
    if (threadIdx.x == 0) lossPerRow[n] = lse - zt;
    if (gradScale == 0.0f) return;
    // pass 2: the gradient of loss * gradScale
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        float g = expf(ld(row + j) - lse) * gradScale;
        if (j == target) g -= gradScale;
        st(row + j, g);
    }
}

extern "C" __global__ void cross_entropy_f32(float* logits, float* lossPerRow, const int* targets, int N, int V,
                                             float gradScale) {
    cross_entropy_impl(logits, lossPerRow, targets, V, gradScale);
}

extern "C" __global__ void cross_entropy_bf16(bf16_t* logits, float* lossPerRow, const int* targets, int N, int V,
                                              float gradScale) {
    cross_entropy_impl(logits, lossPerRow, targets, V, gradScale);
}

extern "C" __global__ void cross_entropy_f16(f16_t* logits, float* lossPerRow, const int* targets, int N, int V,
                                              float gradScale) {
    cross_entropy_impl(logits, lossPerRow, targets, V, gradScale);
}

extern "C" __global__ void cross_entropy_bf16_x8(bf16_t* logits, float* lossPerRow, const int* targets, int N, int V,
                                                 float gradScale) {
    const int n = blockIdx.x;
    const int target = targets[n];
    bf16_t* row = logits + (long long) n * V;
    uint4* words = reinterpret_cast<uint4*>(row);
    const int nv = V / 8;
    if (target < 0 || target >= V) {
        if (threadIdx.x == 0) lossPerRow[n] = target == -100 ? 0.0f : __int_as_float(0x7fc00000);
        if (gradScale != 0.0f) {
            for (int v = threadIdx.x; v < nv; v += blockDim.x) words[v] = make_uint4(0, 0, 0, 0);
        }
        return;
    }
    // pass 1: online max and sum of exponentials, eight logits at a time
    float m = NEG_INF, s = 0.0f;
    for (int v = threadIdx.x; v < nv; v += blockDim.x) {
        const uint4 u = words[v];
        float z[8], mx = NEG_INF;
#pragma unroll
        for (int e = 0; e < 8; e++) {
            z[e] = bf16_of(u, e);
            mx = fmaxf(mx, z[e]);
        }
        if (mx > m) {
            s *= __expf(m - mx);
            m = mx;
        }
#pragma unroll
        for (int e = 0; e < 8; e++) s += __expf(z[e] - m);
    }
    const float zt = bf16_to_f32(row[target]); // read before any thread overwrites the row
    const float lse = block_logsumexp(m, s);
    if (threadIdx.x == 0) lossPerRow[n] = lse - zt;
    if (gradScale == 0.0f) return;
    // pass 2: the gradient of loss * gradScale
    for (int v = threadIdx.x; v < nv; v += blockDim.x) {
        const uint4 u = words[v];
        float g[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            g[e] = __expf(bf16_of(u, e) - lse) * gradScale;
            if (8 * v + e == target) g[e] -= gradScale;
        }
        words[v] = bf16_pack8(g);
    }
}

extern "C" __global__ void cross_entropy_sum(double* out, const float* lossPerRow, int N) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < N; i += blockDim.x) acc += (double) lossPerRow[i];
    acc = block_sum_d(acc);
    if (threadIdx.x == 0) out[0] = acc;
}

/**
 * Whether (v, i) comes before (bv, bi): larger, or as large and earlier. The running best starts as (-inf, V), which
 * every real (value, index) comes before and "none yet" (-inf, V) of another thread does not; NaN is never offered.
 */
__device__ __forceinline__ bool argmax_before(float v, int i, float bv, int bi) {
    return v > bv || (v == bv && i < bi);
}

template <typename T>
__device__ __forceinline__ void argmax_rows(int* out, const T* logits, int N, int V) {
    const int n = blockIdx.x;
    const T* row = logits + (size_t) n * V;
    float best = NEG_INF;
    int at = V; // none yet: any real index comes before it
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        const float z = ld(row + v);
        if (z == z && argmax_before(z, v, best, at)) {
            best = z;
            at = v;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float b2 = __shfl_xor_sync(FULL_MASK, best, o);
        const int a2 = __shfl_xor_sync(FULL_MASK, at, o);
        if (argmax_before(b2, a2, best, at)) {
            best = b2;
            at = a2;
        }
    }
    __shared__ float shBest[32];
    __shared__ int shAt[32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) {
        shBest[warp] = best;
        shAt[warp] = at;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < warps; w++) {
            if (argmax_before(shBest[w], shAt[w], best, at)) {
                best = shBest[w];
                at = shAt[w];
            }
        }
        out[n] = at == V ? 0 : at;
    }
}

extern "C" __global__ void argmax_rows_f32(int* out, const float* logits, int N, int V) {
    argmax_rows(out, logits, N, V);
}

extern "C" __global__ void argmax_rows_bf16(int* out, const bf16_t* logits, int N, int V) {
    argmax_rows(out, logits, N, V);
}

extern "C" __global__ void argmax_rows_f16(int* out, const f16_t* logits, int N, int V) {
    argmax_rows(out, logits, N, V);
}
