// attention.cu: causal grouped-query attention over a packed qkv activation, flash-style (tiled, online
// softmax, the probabilities recomputed from the saved log-sum-exp in backward). fp32 compute on CUDA cores.
// The general path (any even HS <= 128, fp32 or bf16); attention_tc.cu has bf16 tensor-core versions of the
// forward, dq and dkdv kernels (HS in {32, 64, 80, 96, 128}), about 10x faster, that reuse this file's delta kernel.
//
// Layout. qkv, dQkv (N, W) with N = B*T rows (row n = b*T + t) and W = (NH + 2*NKV) * HS: a row holds NH query
// heads, then NKV key heads, then NKV value heads, each HS wide. out, dOut (N, NH*HS). lse, delta (B, NH, T)
// fp32. Query head h uses kv head h / (NH / NKV). A query at t attends to keys k with k <= t and, when
// window > 0, k > t - window. scale = 1 / sqrt(HS). bf16 variants: qkv, out, dOut, dQkv in bf16; lse and
// delta fp32. Pointers include offsets. Limits: HS even and <= 128; NH a multiple of NKV; B, NH <= 65535.
//
// Packed sequences: docStart (N) int32, row n = b*T + t: the position in sequence b where the document of token t
// begins (0 <= docStart <= t, never decreasing along a sequence: documents are contiguous); a query at t then
// attends only to keys k >= docStart (with the window: max(docStart, t - window + 1) <= k <= t). docStart = null
// (0): one document per sequence, and no load of it. Key tiles that lie wholly before a query tile's first
// document (and, in dkdv, query tiles after the key tile's last document) are skipped.
//
// BLOOM's and Gemma 2's attention: the _ext kernels take three more arguments after scale, int perHead, int alibi
// and float softcap. perHead = 1: a row of qkv holds, for each head h, q_h, k_h, v_h side by side ([NH, 3, HS];
// NKV = NH) instead of the grouped order. alibi = 1: head h's score of key k for the query at t gets
// slope(h) * (k - t) (BLOOM's slopes: att_alibi_slope, as io.fsdp4j.backend.AttentionShape.alibiSlope). softcap > 0:
// the scaled score s = q.k * scale becomes softcap * tanh(s / softcap) before the bias and the mask (Gemma 2's
// attn_logit_softcapping), and backward multiplies dS by 1 - tanh^2. The kernels without _ext are the _ext ones with
// all three 0.
//
// Head sizes 128 < HS <= 256 (Gemma's 256): the _wide kernels, with the _ext kernels' arguments (in bf16 without
// ALiBi, HS = 256 runs on attention_tc.cu's tensor cores instead: its _hs256 kernels). Each thread keeps 16
// output columns instead of 8; the forward is the general one (shared 4 * (192 * LD + 4160), HS = 256: 214016
// bytes); dq reloads the query tile for each key tile into the buffer that then takes the value tile (three HS-wide
// tiles: the same shared size as the forward); dkdv likewise reloads the key and then the value tile for each query
// tile, and a block writes one half of the head's columns, [128 * half, min(HS, 128 * half + 128)), with
// grid = (ceil(T / 64), 2 * NKV, B), blockIdx.y = 2 * kvh + half, shared = 4 * (192 * LD + 8448) (HS = 256: 231168
// bytes, under sm_90's 232448): both halves compute the scores, each accumulates its own columns.
//
// Every kernel here except the delta kernel: block = 256 threads exactly, tiles of 64 x 64, and DYNAMIC shared
// memory above 48 KB: call cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes) once
// per function before launching (sm_90 allows up to 232448 bytes). With LD = HS + 1:
//
// attention_forward_f32  (float* out, float* lse, const float* qkv, const int* docStart, int B, int T, int NH,
//                         int NKV, int HS, int window, float scale)
// attention_forward_bf16 (bf16*  out, float* lse, const bf16*  qkv, ...same...)
//     grid = (ceil(T / 64), NH, B), block = 256, shared = 4 * (192 * LD + 4160) bytes (HS = 128: 115712).
//     Writes out and lse = log(sum_k exp(q.k * scale)) for every row t < T.
//
// Backward = three launches, deterministic (no atomics): delta, then dq and dkdv (in either order; each
// writes its own columns of dQkv, together all of them).
// attention_backward_delta_f32  (float* delta, const float* dOut, const float* out, int B, int T, int NH, int HS)
// attention_backward_delta_bf16 (float* delta, const bf16*  dOut, const bf16*  out, ...same...)
//     grid = ceil(B * T * NH / 8), block = 256 (one warp per (row, head)), no dynamic shared memory.
//     delta[b, h, t] = sum_d dOut[n, h*HS + d] * out[n, h*HS + d]; delta is a (B, NH, T) fp32 scratch.
// attention_backward_dq_f32  (float* dQkv, const float* dOut, const float* qkv, const float* lse,
//                             const float* delta, const int* docStart, int B, int T, int NH, int NKV, int HS,
//                             int window, float scale)
// attention_backward_dq_bf16 (bf16*  dQkv, const bf16*  dOut, const bf16*  qkv, ...same...)
//     grid = (ceil(T / 64), NH, B), block = 256, shared = 4 * (256 * LD + 4160) bytes (HS = 128: 148736).
//     Writes the query columns [0, NH*HS) of dQkv: dq = sum_k dS k, dS = P (dP - delta) * scale.
// attention_backward_dkdv_f32  (float* dQkv, const float* dOut, const float* qkv, const float* lse,
//                               const float* delta, const int* docStart, int B, int T, int NH, int NKV, int HS,
//                               int window, float scale)
// attention_backward_dkdv_bf16 (bf16*  dQkv, const bf16*  dOut, const bf16*  qkv, ...same...)
//     grid = (ceil(T / 64), NKV, B), block = 256, shared = 4 * (256 * LD + 8448) bytes (HS = 128: 165888).
//     Writes the key and value columns [NH*HS, W) of dQkv: for each kv head, dk = sum dS^T q and
//     dv = sum P^T dOut over the query heads of its group (in head order, then query order: deterministic).
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

#define ATT_TILE 64
#define ATT_MAXK 8   // output columns per thread: d = tx + 16k, k < 8, so HS <= 128
#define ATT_LDP 65   // row stride of the 64 x 64 score tiles in shared memory

/** Whether query q (< T to count) sees key k; lo is q's first key (att_first_key). */
__device__ __forceinline__ bool att_allowed(int q, int k, int T, int lo) {
    return q < T && k <= q && k >= lo;
}

/**
 * The first key query q may see: the window's start (0 without a window) or, for packed sequences, the start of
 * q's document if later. starts: the batch row's document starts (null when unpacked: no load); q < T.
 */
__device__ __forceinline__ int att_first_key(const int* starts, int q, int window) {
    const int lo = window > 0 ? q - window + 1 : 0;
    return starts ? max(lo, starts[q]) : lo;
}

/**
 * The last query that may see a key in [.., kLast] of a packed sequence: the last q with starts[q] <= kLast (document
 * starts never decrease along a sequence), by bisection over [kLast, T); kLast < T.
 */
__device__ __forceinline__ int att_doc_last_query(const int* starts, int kLast, int T) {
    int lo = kLast, hi = T - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (starts[mid] <= kLast) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/** First columns of query head h, key head kvh and value head kvh in a row of qkv, for either layout. */
__device__ __forceinline__ int att_q_col(int h, int NH, int NKV, int HS, int perHead) {
    return perHead ? 3 * h * HS : h * HS;
}
__device__ __forceinline__ int att_k_col(int kvh, int NH, int NKV, int HS, int perHead) {
    return perHead ? (3 * kvh + 1) * HS : (NH + kvh) * HS;
}
__device__ __forceinline__ int att_v_col(int kvh, int NH, int NKV, int HS, int perHead) {
    return perHead ? (3 * kvh + 2) * HS : (NH + NKV + kvh) * HS;
}

/**
 * BLOOM's ALiBi slope of head h of n, 0 without ALiBi: with p the largest power of two <= n, heads below p get
 * 2^(-8(h+1)/p), the others 2^(-8(2i+1)/(2p)) for i = h - p. Computed in double and rounded once, as on the CPU.
 */
__device__ __forceinline__ float att_alibi_slope(int h, int n, int alibi) {
    if (!alibi) return 0.0f;
    int p = 1;
    while (p * 2 <= n) p *= 2;
    double e = h < p ? -8.0 * (h + 1) / p : -8.0 * (2 * (h - p) + 1) / (2.0 * p);
    return (float) exp2(e);
}

/** The score of a scaled q.k soft-capped at cap (cap > 0: cap * tanh(s / cap)); s itself for cap 0. */
__device__ __forceinline__ float att_cap(float s, float cap) {
    return cap > 0.0f ? cap * tanhf(s / cap) : s;
}

/** d att_cap(s) / ds at the capped score c: 1 - (c / cap)^2, or 1 uncapped. */
__device__ __forceinline__ float att_cap_slope(float c, float cap) {
    if (cap <= 0.0f) return 1.0f;
    const float t = c / cap;
    return 1.0f - t * t;
}

/** Loads rows [row0, row0 + 64) of one head (src points at its column 0 of row 0) into a 64 x LD fp32 tile. */
template <typename E>
__device__ __forceinline__ void att_load_tile(float* dst, int LD, const E* src, int rowStride, int row0, int T,
                                              int HS) {
    const int rows = min(ATT_TILE, T - row0);
    for (int idx = threadIdx.x; idx < ATT_TILE * HS; idx += blockDim.x) {
        int i = idx / HS, d = idx - i * HS;
        dst[i * LD + d] = i < rows ? ld(src + (long long) (row0 + i) * rowStride + d) : 0.0f;
    }
}

// Thread layout of every 64 x 64 tile: tx = threadIdx.x & 15, ty = threadIdx.x >> 4; a thread owns tile rows
// ty + 16r (r < 4) and tile columns tx + 16c (c < 4), and head-dimension columns tx + 16k (k < 8; the wide kernels: k < 16). The 16
// threads sharing a row are 16 consecutive lanes of one warp, so row reductions are xor-shuffles 8, 4, 2, 1.

template <typename E, int MAXK = ATT_MAXK>
__device__ __forceinline__ void attention_forward_impl(E* out, float* lse, const E* qkv, const int* docStart, int T,
                                                       int NH, int NKV, int HS, int window, float scale, int perHead,
                                                       int alibi, float softcap) {
    extern __shared__ float smem[];
    const int LD = HS + 1;
    float* sQ = smem;
    float* sK = sQ + ATT_TILE * LD;
    float* sV = sK + ATT_TILE * LD;
    float* sP = sV + ATT_TILE * LD;
    const int q0 = (gridDim.x - 1 - blockIdx.x) * ATT_TILE; // longest (last) query tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (NH / NKV);
    const int W = (NH + 2 * NKV) * HS;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const E* base = qkv + (long long) b * T * W;
    const float slope = att_alibi_slope(h, NH, alibi);
    att_load_tile(sQ, LD, base + att_q_col(h, NH, NKV, HS, perHead), W, q0, T, HS);

    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    float m[4], l[4], acc[4][MAXK];
    int lo[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int q = q0 + ty + 16 * r;
        lo[r] = q < T ? att_first_key(starts, q, window) : 0;
        m[r] = NEG_INF;
        l[r] = 0.0f;
#pragma unroll
        for (int k = 0; k < MAXK; k++) acc[r][k] = 0.0f;
    }
    const int qLast = min(q0 + ATT_TILE - 1, T - 1);
    const int kFirst = max(0, att_first_key(starts, q0, window)); // the tile's earliest: first keys never decrease
    for (int k0 = kFirst & ~(ATT_TILE - 1); k0 <= qLast; k0 += ATT_TILE) {
        __syncthreads(); // the previous tile is no longer read
        att_load_tile(sK, LD, base + att_k_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
        att_load_tile(sV, LD, base + att_v_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
        __syncthreads();
        float s[4][4];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) s[r][c] = 0.0f;
#pragma unroll 4
        for (int d = 0; d < HS; d++) {
            float qv[4], kv[4];
#pragma unroll
            for (int r = 0; r < 4; r++) qv[r] = sQ[(ty + 16 * r) * LD + d];
#pragma unroll
            for (int c = 0; c < 4; c++) kv[c] = sK[(tx + 16 * c) * LD + d];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) s[r][c] += qv[r] * kv[c];
        }
        // online softmax: rescale the running sums to the new row maximum
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int q = q0 + ty + 16 * r;
            float mx = NEG_INF;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int key = k0 + tx + 16 * c;
                s[r][c] = att_allowed(q, key, T, lo[r]) ? att_cap(s[r][c] * scale, softcap) + slope * (float) (key - q)
                                                        : NEG_INF;
                mx = fmaxf(mx, s[r][c]);
            }
            for (int o = 8; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, o));
            const float mNew = fmaxf(m[r], mx);
            const float mSafe = mNew == NEG_INF ? 0.0f : mNew; // a row with no key allowed yet
            const float alpha = expf(m[r] - mSafe);
            float ps = 0.0f;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float p = expf(s[r][c] - mSafe);
                sP[(ty + 16 * r) * ATT_LDP + tx + 16 * c] = p;
                ps += p;
            }
            for (int o = 8; o > 0; o >>= 1) ps += __shfl_xor_sync(FULL_MASK, ps, o);
            l[r] = l[r] * alpha + ps;
            m[r] = mNew;
#pragma unroll
            for (int k = 0; k < MAXK; k++) acc[r][k] *= alpha;
        }
        __syncthreads();
        // acc += P V
#pragma unroll 4
        for (int j = 0; j < ATT_TILE; j++) {
            float pv[4], vv[MAXK];
#pragma unroll
            for (int r = 0; r < 4; r++) pv[r] = sP[(ty + 16 * r) * ATT_LDP + j];
#pragma unroll
            for (int k = 0; k < MAXK; k++) vv[k] = tx + 16 * k < HS ? sV[j * LD + tx + 16 * k] : 0.0f;
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int k = 0; k < MAXK; k++) acc[r][k] += pv[r] * vv[k];
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int q = q0 + ty + 16 * r;
        if (q >= T) continue;
        const float inv = 1.0f / l[r];
        E* o = out + ((long long) b * T + q) * NH * HS + h * HS;
#pragma unroll
        for (int k = 0; k < MAXK; k++) {
            if (tx + 16 * k < HS) st(o + tx + 16 * k, acc[r][k] * inv);
        }
        if (tx == 0) lse[((long long) b * NH + h) * T + q] = m[r] + logf(l[r]);
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_forward_f32(float* out, float* lse, const float* qkv,
        const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale) {
    attention_forward_impl(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, 0, 0, 0.0f);
}

extern "C" __global__ void __launch_bounds__(256) attention_forward_bf16(bf16_t* out, float* lse, const bf16_t* qkv,
        const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale) {
    attention_forward_impl(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, 0, 0, 0.0f);
}

extern "C" __global__ void __launch_bounds__(256) attention_forward_f16(f16_t* out, float* lse, const f16_t* qkv,
        const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale) {
    attention_forward_impl(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, 0, 0, 0.0f);
}

template <typename E>
__device__ __forceinline__ void attention_backward_delta_impl(float* delta, const E* dOut, const E* out, int B, int T,
                                                              int NH, int HS) {
    const long long w = (long long) blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (w >= (long long) B * T * NH) return;
    const int lane = threadIdx.x & 31;
    const int h = (int) (w % NH);
    const long long n = w / NH;
    const E* a = dOut + n * NH * HS + h * HS;
    const E* o = out + n * NH * HS + h * HS;
    float acc = 0.0f;
    for (int d = lane; d < HS; d += 32) acc += ld(a + d) * ld(o + d);
    acc = warp_sum(acc);
    if (lane == 0) {
        const long long b = n / T, t = n - b * T;
        delta[(b * NH + h) * T + t] = acc;
    }
}

extern "C" __global__ void attention_backward_delta_f32(float* delta, const float* dOut, const float* out, int B,
                                                        int T, int NH, int HS) {
    attention_backward_delta_impl(delta, dOut, out, B, T, NH, HS);
}

extern "C" __global__ void attention_backward_delta_bf16(float* delta, const bf16_t* dOut, const bf16_t* out, int B,
                                                         int T, int NH, int HS) {
    attention_backward_delta_impl(delta, dOut, out, B, T, NH, HS);
}

extern "C" __global__ void attention_backward_delta_f16(float* delta, const f16_t* dOut, const f16_t* out, int B,
                                                         int T, int NH, int HS) {
    attention_backward_delta_impl(delta, dOut, out, B, T, NH, HS);
}

template <typename E>
__device__ __forceinline__ void attention_backward_dq_impl(E* dQkv, const E* dOut, const E* qkv, const float* lse,
                                                           const float* delta, const int* docStart, int T, int NH,
                                                           int NKV, int HS, int window, float scale, int perHead,
                                                           int alibi, float softcap) {
    extern __shared__ float smem[];
    const int LD = HS + 1;
    float* sQ = smem;
    float* sO = sQ + ATT_TILE * LD; // dOut tile
    float* sK = sO + ATT_TILE * LD;
    float* sV = sK + ATT_TILE * LD;
    float* sS = sV + ATT_TILE * LD; // dS tile
    const int q0 = (gridDim.x - 1 - blockIdx.x) * ATT_TILE;
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (NH / NKV);
    const int W = (NH + 2 * NKV) * HS;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const E* base = qkv + (long long) b * T * W;
    const float slope = att_alibi_slope(h, NH, alibi);
    att_load_tile(sQ, LD, base + att_q_col(h, NH, NKV, HS, perHead), W, q0, T, HS);
    att_load_tile(sO, LD, dOut + (long long) b * T * NH * HS + h * HS, NH * HS, q0, T, HS);
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    float rowLse[4], rowDelta[4], dq[4][ATT_MAXK];
    int lo[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int q = q0 + ty + 16 * r;
        lo[r] = q < T ? att_first_key(starts, q, window) : 0;
        const long long at = ((long long) b * NH + h) * T + q;
        rowLse[r] = q < T ? lse[at] : 0.0f;
        rowDelta[r] = q < T ? delta[at] : 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_MAXK; k++) dq[r][k] = 0.0f;
    }
    const int qLast = min(q0 + ATT_TILE - 1, T - 1);
    const int kFirst = max(0, att_first_key(starts, q0, window)); // the tile's earliest: first keys never decrease
    for (int k0 = kFirst & ~(ATT_TILE - 1); k0 <= qLast; k0 += ATT_TILE) {
        __syncthreads();
        att_load_tile(sK, LD, base + att_k_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
        att_load_tile(sV, LD, base + att_v_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
        __syncthreads();
        float s[4][4], dp[4][4];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                s[r][c] = 0.0f;
                dp[r][c] = 0.0f;
            }
#pragma unroll 2
        for (int d = 0; d < HS; d++) {
            float qv[4], ov[4], kv[4], vv[4];
#pragma unroll
            for (int r = 0; r < 4; r++) {
                qv[r] = sQ[(ty + 16 * r) * LD + d];
                ov[r] = sO[(ty + 16 * r) * LD + d];
            }
#pragma unroll
            for (int c = 0; c < 4; c++) {
                kv[c] = sK[(tx + 16 * c) * LD + d];
                vv[c] = sV[(tx + 16 * c) * LD + d];
            }
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    s[r][c] += qv[r] * kv[c];
                    dp[r][c] += ov[r] * vv[c];
                }
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int q = q0 + ty + 16 * r;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float ds = 0.0f;
                const int key = k0 + tx + 16 * c;
                if (att_allowed(q, key, T, lo[r])) {
                    const float sc = att_cap(s[r][c] * scale, softcap);
                    float p = expf(sc + slope * (float) (key - q) - rowLse[r]);
                    ds = p * (dp[r][c] - rowDelta[r]) * att_cap_slope(sc, softcap) * scale;
                }
                sS[(ty + 16 * r) * ATT_LDP + tx + 16 * c] = ds;
            }
        }
        __syncthreads();
#pragma unroll 4
        for (int j = 0; j < ATT_TILE; j++) {
            float sv[4], kv[ATT_MAXK];
#pragma unroll
            for (int r = 0; r < 4; r++) sv[r] = sS[(ty + 16 * r) * ATT_LDP + j];
#pragma unroll
            for (int k = 0; k < ATT_MAXK; k++) kv[k] = tx + 16 * k < HS ? sK[j * LD + tx + 16 * k] : 0.0f;
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int k = 0; k < ATT_MAXK; k++) dq[r][k] += sv[r] * kv[k];
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int q = q0 + ty + 16 * r;
        if (q >= T) continue;
        E* o = dQkv + ((long long) b * T + q) * W + att_q_col(h, NH, NKV, HS, perHead);
#pragma unroll
        for (int k = 0; k < ATT_MAXK; k++) {
            if (tx + 16 * k < HS) st(o + tx + 16 * k, dq[r][k]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_f32(float* dQkv, const float* dOut,
        const float* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale) {
    attention_backward_dq_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, 0, 0, 0.0f);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH,
        int NKV, int HS, int window, float scale) {
    attention_backward_dq_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, 0, 0, 0.0f);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_f16(f16_t* dQkv, const f16_t* dOut,
        const f16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH,
        int NKV, int HS, int window, float scale) {
    attention_backward_dq_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, 0, 0, 0.0f);
}

template <typename E>
__device__ __forceinline__ void attention_backward_dkdv_impl(E* dQkv, const E* dOut, const E* qkv, const float* lse,
                                                             const float* delta, const int* docStart, int T, int NH,
                                                             int NKV, int HS, int window, float scale, int perHead,
                                                             int alibi, float softcap) {
    extern __shared__ float smem[];
    const int LD = HS + 1;
    float* sK = smem;
    float* sV = sK + ATT_TILE * LD;
    float* sQ = sV + ATT_TILE * LD;
    float* sO = sQ + ATT_TILE * LD;    // dOut tile
    float* sP = sO + ATT_TILE * LD;    // P^T tile: [key][query]
    float* sS = sP + ATT_TILE * ATT_LDP; // dS^T tile
    float* sL = sS + ATT_TILE * ATT_LDP; // lse of the query tile
    float* sD = sL + ATT_TILE;           // delta of the query tile
    const int k0 = blockIdx.x * ATT_TILE; // first key tiles have the most queries: they start first
    const int kvh = blockIdx.y, b = blockIdx.z;
    const int group = NH / NKV;
    const int W = (NH + 2 * NKV) * HS;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const E* base = qkv + (long long) b * T * W;
    att_load_tile(sK, LD, base + att_k_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
    att_load_tile(sV, LD, base + att_v_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
    float dk[4][ATT_MAXK], dv[4][ATT_MAXK];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int k = 0; k < ATT_MAXK; k++) {
            dk[r][k] = 0.0f;
            dv[r][k] = 0.0f;
        }
    // queries that may see a key of this tile: k0 <= q < k0 + 64 - 1 + window
    // and, packed, whose documents start at or before its last key
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    int qEnd = window > 0 ? min(T - 1, k0 + ATT_TILE - 2 + window) : T - 1;
    if (starts) qEnd = min(qEnd, att_doc_last_query(starts, min(k0 + ATT_TILE - 1, T - 1), T));
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        const float slope = att_alibi_slope(h, NH, alibi);
        for (int q0 = k0; q0 <= qEnd; q0 += ATT_TILE) {
            __syncthreads();
            att_load_tile(sQ, LD, base + att_q_col(h, NH, NKV, HS, perHead), W, q0, T, HS);
            att_load_tile(sO, LD, dOut + (long long) b * T * NH * HS + h * HS, NH * HS, q0, T, HS);
            if (threadIdx.x < ATT_TILE) {
                const int q = q0 + threadIdx.x;
                const long long at = ((long long) b * NH + h) * T + q;
                sL[threadIdx.x] = q < T ? lse[at] : 0.0f;
                sD[threadIdx.x] = q < T ? delta[at] : 0.0f;
            }
            __syncthreads();
            // rows: keys j = ty + 16r ; columns: queries i = tx + 16c
            int qlo[4];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int q = q0 + tx + 16 * c;
                qlo[c] = q < T ? att_first_key(starts, q, window) : 0;
            }
            float s[4][4], dp[4][4];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    s[r][c] = 0.0f;
                    dp[r][c] = 0.0f;
                }
#pragma unroll 2
            for (int d = 0; d < HS; d++) {
                float kv[4], vv[4], qv[4], ov[4];
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    kv[r] = sK[(ty + 16 * r) * LD + d];
                    vv[r] = sV[(ty + 16 * r) * LD + d];
                }
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    qv[c] = sQ[(tx + 16 * c) * LD + d];
                    ov[c] = sO[(tx + 16 * c) * LD + d];
                }
#pragma unroll
                for (int r = 0; r < 4; r++)
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        s[r][c] += kv[r] * qv[c];
                        dp[r][c] += vv[r] * ov[c];
                    }
            }
#pragma unroll
            for (int r = 0; r < 4; r++) {
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int i = tx + 16 * c;
                    float p = 0.0f, ds = 0.0f;
                    const int key = k0 + ty + 16 * r;
                    if (att_allowed(q0 + i, key, T, qlo[c])) {
                        const float sc = att_cap(s[r][c] * scale, softcap);
                        p = expf(sc + slope * (float) (key - (q0 + i)) - sL[i]);
                        ds = p * (dp[r][c] - sD[i]) * att_cap_slope(sc, softcap) * scale;
                    }
                    sP[(ty + 16 * r) * ATT_LDP + i] = p;
                    sS[(ty + 16 * r) * ATT_LDP + i] = ds;
                }
            }
            __syncthreads();
            // dv += P^T dOut ; dk += dS^T q
#pragma unroll 2
            for (int i = 0; i < ATT_TILE; i++) {
                float pv[4], sv[4], ov[ATT_MAXK], qv[ATT_MAXK];
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    pv[r] = sP[(ty + 16 * r) * ATT_LDP + i];
                    sv[r] = sS[(ty + 16 * r) * ATT_LDP + i];
                }
#pragma unroll
                for (int k = 0; k < ATT_MAXK; k++) {
                    const bool in = tx + 16 * k < HS;
                    ov[k] = in ? sO[i * LD + tx + 16 * k] : 0.0f;
                    qv[k] = in ? sQ[i * LD + tx + 16 * k] : 0.0f;
                }
#pragma unroll
                for (int r = 0; r < 4; r++)
#pragma unroll
                    for (int k = 0; k < ATT_MAXK; k++) {
                        dv[r][k] += pv[r] * ov[k];
                        dk[r][k] += sv[r] * qv[k];
                    }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int key = k0 + ty + 16 * r;
        if (key >= T) continue;
        E* row = dQkv + ((long long) b * T + key) * W;
#pragma unroll
        for (int k = 0; k < ATT_MAXK; k++) {
            const int d = tx + 16 * k;
            if (d < HS) {
                st(row + att_k_col(kvh, NH, NKV, HS, perHead) + d, dk[r][k]);
                st(row + att_v_col(kvh, NH, NKV, HS, perHead) + d, dv[r][k]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkdv_f32(float* dQkv, const float* dOut,
        const float* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale) {
    attention_backward_dkdv_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, 0, 0, 0.0f);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkdv_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH,
        int NKV, int HS, int window, float scale) {
    attention_backward_dkdv_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, 0, 0, 0.0f);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkdv_f16(f16_t* dQkv, const f16_t* dOut,
        const f16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH,
        int NKV, int HS, int window, float scale) {
    attention_backward_dkdv_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, 0, 0, 0.0f);
}

// ---- the _ext kernels: the same, with the per-head qkv layout and ALiBi of BLOOM, Gemma 2's soft cap (see the header)

extern "C" __global__ void __launch_bounds__(256) attention_forward_ext_f32(float* out, float* lse, const float* qkv,
        const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale, int perHead, int alibi,
        float softcap) {
    attention_forward_impl(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, perHead, alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_forward_ext_bf16(bf16_t* out, float* lse,
        const bf16_t* qkv, const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale,
        int perHead, int alibi, float softcap) {
    attention_forward_impl(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, perHead, alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_forward_ext_f16(f16_t* out, float* lse,
        const f16_t* qkv, const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale,
        int perHead, int alibi, float softcap) {
    attention_forward_impl(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, perHead, alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_ext_f32(float* dQkv, const float* dOut,
        const float* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dq_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                               alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_ext_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dq_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                               alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_ext_f16(f16_t* dQkv, const f16_t* dOut,
        const f16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dq_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                               alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkdv_ext_f32(float* dQkv, const float* dOut,
        const float* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dkdv_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                               alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkdv_ext_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dkdv_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                               alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkdv_ext_f16(f16_t* dQkv, const f16_t* dOut,
        const f16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dkdv_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                               alibi, softcap);
}

// ---- the _wide kernels: 128 < HS <= 256 (Gemma's 256), with the _ext kernels' arguments (see the header) ----------

#define ATT_WIDE_MAXK 16 // output columns per thread in the wide forward and dq: d = tx + 16k, k < 16, so HS <= 256

extern "C" __global__ void __launch_bounds__(256) attention_forward_wide_f32(float* out, float* lse, const float* qkv,
        const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale, int perHead, int alibi,
        float softcap) {
    attention_forward_impl<float, ATT_WIDE_MAXK>(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, perHead,
                                                 alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_forward_wide_bf16(bf16_t* out, float* lse,
        const bf16_t* qkv, const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale,
        int perHead, int alibi, float softcap) {
    attention_forward_impl<bf16_t, ATT_WIDE_MAXK>(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, perHead,
                                                  alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_forward_wide_f16(f16_t* out, float* lse,
        const f16_t* qkv, const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale,
        int perHead, int alibi, float softcap) {
    attention_forward_impl<f16_t, ATT_WIDE_MAXK>(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, perHead,
                                                  alibi, softcap);
}

/**
 * dq for 128 < HS <= 256: as attention_backward_dq_impl, with three HS-wide tiles instead of four: for each key tile
 * the query tile is loaded into sX for the scores, then the value tile in its place for dP.
 */
template <typename E>
__device__ __forceinline__ void attention_backward_dq_wide_impl(E* dQkv, const E* dOut, const E* qkv, const float* lse,
                                                                const float* delta, const int* docStart, int T, int NH,
                                                                int NKV, int HS, int window, float scale, int perHead,
                                                                int alibi, float softcap) {
    extern __shared__ float smem[];
    const int LD = HS + 1;
    float* sX = smem;               // the query tile, then the value tile, of each key tile
    float* sO = sX + ATT_TILE * LD; // dOut tile
    float* sK = sO + ATT_TILE * LD;
    float* sS = sK + ATT_TILE * LD; // dS tile
    const int q0 = (gridDim.x - 1 - blockIdx.x) * ATT_TILE;
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (NH / NKV);
    const int W = (NH + 2 * NKV) * HS;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const E* base = qkv + (long long) b * T * W;
    const float slope = att_alibi_slope(h, NH, alibi);
    att_load_tile(sO, LD, dOut + (long long) b * T * NH * HS + h * HS, NH * HS, q0, T, HS);
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    float rowLse[4], rowDelta[4], dq[4][ATT_WIDE_MAXK];
    int lo[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int q = q0 + ty + 16 * r;
        lo[r] = q < T ? att_first_key(starts, q, window) : 0;
        const long long at = ((long long) b * NH + h) * T + q;
        rowLse[r] = q < T ? lse[at] : 0.0f;
        rowDelta[r] = q < T ? delta[at] : 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_WIDE_MAXK; k++) dq[r][k] = 0.0f;
    }
    const int qLast = min(q0 + ATT_TILE - 1, T - 1);
    const int kFirst = max(0, att_first_key(starts, q0, window));
    for (int k0 = kFirst & ~(ATT_TILE - 1); k0 <= qLast; k0 += ATT_TILE) {
        __syncthreads(); // sX and sK of the previous tile are no longer read
        att_load_tile(sX, LD, base + att_q_col(h, NH, NKV, HS, perHead), W, q0, T, HS);
        att_load_tile(sK, LD, base + att_k_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
        __syncthreads();
        float s[4][4], dp[4][4];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                s[r][c] = 0.0f;
                dp[r][c] = 0.0f;
            }
#pragma unroll 4
        for (int d = 0; d < HS; d++) {
            float qv[4], kv[4];
#pragma unroll
            for (int r = 0; r < 4; r++) qv[r] = sX[(ty + 16 * r) * LD + d];
#pragma unroll
            for (int c = 0; c < 4; c++) kv[c] = sK[(tx + 16 * c) * LD + d];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) s[r][c] += qv[r] * kv[c];
        }
        __syncthreads(); // the query tile is no longer read: the value tile takes its place
        att_load_tile(sX, LD, base + att_v_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
        __syncthreads();
#pragma unroll 4
        for (int d = 0; d < HS; d++) {
            float ov[4], vv[4];
#pragma unroll
            for (int r = 0; r < 4; r++) ov[r] = sO[(ty + 16 * r) * LD + d];
#pragma unroll
            for (int c = 0; c < 4; c++) vv[c] = sX[(tx + 16 * c) * LD + d];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) dp[r][c] += ov[r] * vv[c];
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int q = q0 + ty + 16 * r;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float ds = 0.0f;
                const int key = k0 + tx + 16 * c;
                if (att_allowed(q, key, T, lo[r])) {
                    const float sc = att_cap(s[r][c] * scale, softcap);
                    float p = expf(sc + slope * (float) (key - q) - rowLse[r]);
                    ds = p * (dp[r][c] - rowDelta[r]) * att_cap_slope(sc, softcap) * scale;
                }
                sS[(ty + 16 * r) * ATT_LDP + tx + 16 * c] = ds;
            }
        }
        __syncthreads();
#pragma unroll 2
        for (int j = 0; j < ATT_TILE; j++) {
            float sv[4], kv[ATT_WIDE_MAXK];
#pragma unroll
            for (int r = 0; r < 4; r++) sv[r] = sS[(ty + 16 * r) * ATT_LDP + j];
#pragma unroll
            for (int k = 0; k < ATT_WIDE_MAXK; k++) kv[k] = tx + 16 * k < HS ? sK[j * LD + tx + 16 * k] : 0.0f;
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int k = 0; k < ATT_WIDE_MAXK; k++) dq[r][k] += sv[r] * kv[k];
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int q = q0 + ty + 16 * r;
        if (q >= T) continue;
        E* o = dQkv + ((long long) b * T + q) * W + att_q_col(h, NH, NKV, HS, perHead);
#pragma unroll
        for (int k = 0; k < ATT_WIDE_MAXK; k++) {
            if (tx + 16 * k < HS) st(o + tx + 16 * k, dq[r][k]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_wide_f32(float* dQkv, const float* dOut,
        const float* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dq_wide_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                                    alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_wide_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dq_wide_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                                    alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dq_wide_f16(f16_t* dQkv, const f16_t* dOut,
        const f16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dq_wide_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                                    alibi, softcap);
}

/**
 * dk and dv for 128 < HS <= 256: as attention_backward_dkdv_impl, with three HS-wide tiles instead of four (for each
 * query tile the key tile is loaded into sX for the scores, then the value tile in its place for dP), and each block
 * accumulating one half of the head's columns (blockIdx.y = 2 * kvh + half): eight columns a thread, as the general
 * kernel, at the price of both halves computing the scores.
 */
template <typename E>
__device__ __forceinline__ void attention_backward_dkdv_wide_impl(E* dQkv, const E* dOut, const E* qkv,
                                                                  const float* lse, const float* delta,
                                                                  const int* docStart, int T, int NH, int NKV, int HS,
                                                                  int window, float scale, int perHead, int alibi,
                                                                  float softcap) {
    extern __shared__ float smem[];
    const int LD = HS + 1;
    float* sX = smem;                    // the key tile, then the value tile, of each query tile
    float* sQ = sX + ATT_TILE * LD;
    float* sO = sQ + ATT_TILE * LD;      // dOut tile
    float* sP = sO + ATT_TILE * LD;      // P^T tile: [key][query]
    float* sS = sP + ATT_TILE * ATT_LDP; // dS^T tile
    float* sL = sS + ATT_TILE * ATT_LDP; // lse of the query tile
    float* sD = sL + ATT_TILE;           // delta of the query tile
    const int k0 = blockIdx.x * ATT_TILE;
    const int kvh = blockIdx.y >> 1, col0 = (blockIdx.y & 1) * 16 * ATT_MAXK, b = blockIdx.z;
    const int group = NH / NKV;
    const int W = (NH + 2 * NKV) * HS;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const E* base = qkv + (long long) b * T * W;
    float dk[4][ATT_MAXK], dv[4][ATT_MAXK];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int k = 0; k < ATT_MAXK; k++) {
            dk[r][k] = 0.0f;
            dv[r][k] = 0.0f;
        }
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    int qEnd = window > 0 ? min(T - 1, k0 + ATT_TILE - 2 + window) : T - 1;
    if (starts) qEnd = min(qEnd, att_doc_last_query(starts, min(k0 + ATT_TILE - 1, T - 1), T));
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        const float slope = att_alibi_slope(h, NH, alibi);
        for (int q0 = k0; q0 <= qEnd; q0 += ATT_TILE) {
            __syncthreads(); // the previous tiles are no longer read
            att_load_tile(sX, LD, base + att_k_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
            att_load_tile(sQ, LD, base + att_q_col(h, NH, NKV, HS, perHead), W, q0, T, HS);
            att_load_tile(sO, LD, dOut + (long long) b * T * NH * HS + h * HS, NH * HS, q0, T, HS);
            if (threadIdx.x < ATT_TILE) {
                const int q = q0 + threadIdx.x;
                const long long at = ((long long) b * NH + h) * T + q;
                sL[threadIdx.x] = q < T ? lse[at] : 0.0f;
                sD[threadIdx.x] = q < T ? delta[at] : 0.0f;
            }
            __syncthreads();
            // rows: keys j = ty + 16r ; columns: queries i = tx + 16c
            int qlo[4];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int q = q0 + tx + 16 * c;
                qlo[c] = q < T ? att_first_key(starts, q, window) : 0;
            }
            float s[4][4], dp[4][4];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    s[r][c] = 0.0f;
                    dp[r][c] = 0.0f;
                }
#pragma unroll 4
            for (int d = 0; d < HS; d++) {
                float kv[4], qv[4];
#pragma unroll
                for (int r = 0; r < 4; r++) kv[r] = sX[(ty + 16 * r) * LD + d];
#pragma unroll
                for (int c = 0; c < 4; c++) qv[c] = sQ[(tx + 16 * c) * LD + d];
#pragma unroll
                for (int r = 0; r < 4; r++)
#pragma unroll
                    for (int c = 0; c < 4; c++) s[r][c] += kv[r] * qv[c];
            }
            __syncthreads(); // the key tile is no longer read: the value tile takes its place
            att_load_tile(sX, LD, base + att_v_col(kvh, NH, NKV, HS, perHead), W, k0, T, HS);
            __syncthreads();
#pragma unroll 4
            for (int d = 0; d < HS; d++) {
                float vv[4], ov[4];
#pragma unroll
                for (int r = 0; r < 4; r++) vv[r] = sX[(ty + 16 * r) * LD + d];
#pragma unroll
                for (int c = 0; c < 4; c++) ov[c] = sO[(tx + 16 * c) * LD + d];
#pragma unroll
                for (int r = 0; r < 4; r++)
#pragma unroll
                    for (int c = 0; c < 4; c++) dp[r][c] += vv[r] * ov[c];
            }
#pragma unroll
            for (int r = 0; r < 4; r++) {
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int i = tx + 16 * c;
                    float p = 0.0f, ds = 0.0f;
                    const int key = k0 + ty + 16 * r;
                    if (att_allowed(q0 + i, key, T, qlo[c])) {
                        const float sc = att_cap(s[r][c] * scale, softcap);
                        p = expf(sc + slope * (float) (key - (q0 + i)) - sL[i]);
                        ds = p * (dp[r][c] - sD[i]) * att_cap_slope(sc, softcap) * scale;
                    }
                    sP[(ty + 16 * r) * ATT_LDP + i] = p;
                    sS[(ty + 16 * r) * ATT_LDP + i] = ds;
                }
            }
            __syncthreads();
            // dv += P^T dOut ; dk += dS^T q, over this block's half of the columns
#pragma unroll 2
            for (int i = 0; i < ATT_TILE; i++) {
                float pv[4], sv[4], ov[ATT_MAXK], qv[ATT_MAXK];
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    pv[r] = sP[(ty + 16 * r) * ATT_LDP + i];
                    sv[r] = sS[(ty + 16 * r) * ATT_LDP + i];
                }
#pragma unroll
                for (int k = 0; k < ATT_MAXK; k++) {
                    const int d = col0 + tx + 16 * k;
                    const bool in = d < HS;
                    ov[k] = in ? sO[i * LD + d] : 0.0f;
                    qv[k] = in ? sQ[i * LD + d] : 0.0f;
                }
#pragma unroll
                for (int r = 0; r < 4; r++)
#pragma unroll
                    for (int k = 0; k < ATT_MAXK; k++) {
                        dv[r][k] += pv[r] * ov[k];
                        dk[r][k] += sv[r] * qv[k];
                    }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int key = k0 + ty + 16 * r;
        if (key >= T) continue;
        E* row = dQkv + ((long long) b * T + key) * W;
#pragma unroll
        for (int k = 0; k < ATT_MAXK; k++) {
            const int d = col0 + tx + 16 * k;
            if (d < HS) {
                st(row + att_k_col(kvh, NH, NKV, HS, perHead) + d, dk[r][k]);
                st(row + att_v_col(kvh, NH, NKV, HS, perHead) + d, dv[r][k]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkdv_wide_f32(float* dQkv, const float* dOut,
        const float* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dkdv_wide_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                                      alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkdv_wide_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dkdv_wide_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                                      alibi, softcap);
}

extern "C" __global__ void __launch_bounds__(256) attention_backward_dkdv_wide_f16(f16_t* dQkv, const f16_t* dOut,
        const f16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi, float softcap) {
    attention_backward_dkdv_wide_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,
                                      alibi, softcap);
}

// ---- generation: a KV cache per sequence of a batch --------------------------------------------------------------
// The batch is B sequences of M rows each (N = B*M rows; row n belongs to sequence n / M) at the positions
// positions (N) int32. keys, values (B, capacity, NKV*HS), in the type of qkv. perHead and alibi as for the _ext
// kernels above. HS <= 256.
//
// kv_cache_append_f32  (float* keys, float* values, const float* qkv, const int* positions, int N, int M,
//                       int capacity, int NH, int NKV, int HS, int perHead)
// kv_cache_append_bf16 (bf16*  keys, bf16*  values, const bf16*  qkv, ...same...)
//     grid-stride over N * NKV * HS elements, block = 256. The k and v heads of row n become row positions[n] of
//     sequence n / M's keys and values.
//
// attention_cached_f32  (float* out, const float* qkv, const float* keys, const float* values, const int* positions,
//                        int N, int M, int capacity, int NH, int NKV, int HS, int window, float scale, int perHead,
//                        int alibi)
// attention_cached_bf16 (bf16*  out, const bf16*  qkv, const bf16*  keys, const bf16*  values, ...same...)
//     grid = ceil(N * NH / 8), block = 256: one warp per (row, query head), each lane holding HS/32 of the head's
//     columns. The query of row n at t = positions[n] attends to its sequence's cached rows max(0, t - window + 1)
//     (window > 0) .. t, with an online softmax in fp32; out (N, NH*HS).

__device__ __forceinline__ int att_key_column(int kvh, int NH, int HS, int perHead) {
    return perHead ? (3 * kvh + 1) * HS : (NH + kvh) * HS;
}

__device__ __forceinline__ int att_value_column(int kvh, int NH, int NKV, int HS, int perHead) {
    return perHead ? (3 * kvh + 2) * HS : (NH + NKV + kvh) * HS;
}

template <typename T>
__device__ __forceinline__ void kv_cache_append_impl(T* keys, T* values, const T* qkv, const int* positions, int N,
                                                     int M, int capacity, int NH, int NKV, int HS, int perHead) {
    const int kvWidth = NKV * HS, W = (NH + 2 * NKV) * HS;
    GRID_STRIDE(i, (long long) N * kvWidth) {
        int n = (int) (i / kvWidth), c = (int) (i % kvWidth), kvh = c / HS, d = c % HS;
        long long dst = ((long long) (n / M) * capacity + positions[n]) * kvWidth + c;
        const T* row = qkv + (long long) n * W;
        keys[dst] = row[att_key_column(kvh, NH, HS, perHead) + d];
        values[dst] = row[att_value_column(kvh, NH, NKV, HS, perHead) + d];
    }
}

extern "C" __global__ void kv_cache_append_f32(float* keys, float* values, const float* qkv, const int* positions,
                                               int N, int M, int capacity, int NH, int NKV, int HS, int perHead) {
    kv_cache_append_impl(keys, values, qkv, positions, N, M, capacity, NH, NKV, HS, perHead);
}

extern "C" __global__ void kv_cache_append_bf16(bf16_t* keys, bf16_t* values, const bf16_t* qkv, const int* positions,
                                                int N, int M, int capacity, int NH, int NKV, int HS, int perHead) {
    kv_cache_append_impl(keys, values, qkv, positions, N, M, capacity, NH, NKV, HS, perHead);
}

extern "C" __global__ void kv_cache_append_f16(f16_t* keys, f16_t* values, const f16_t* qkv, const int* positions,
                                                int N, int M, int capacity, int NH, int NKV, int HS, int perHead) {
    kv_cache_append_impl(keys, values, qkv, positions, N, M, capacity, NH, NKV, HS, perHead);
}

template <typename T>
__device__ __forceinline__ void attention_cached_impl(T* out, const T* qkv, const T* keys, const T* values,
                                                      const int* positions, int N, int M, int capacity, int NH,
                                                      int NKV, int HS, int window, float scale, int perHead,
                                                      int alibi) {
    const int warpId = (int) (((long long) blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (warpId >= N * NH) return; // the whole warp: warpId is the same for its lanes
    const int n = warpId / NH, h = warpId % NH, kvh = h / (NH / NKV), t = positions[n];
    const int W = (NH + 2 * NKV) * HS, kvWidth = NKV * HS;
    const T* q = qkv + (long long) n * W + (perHead ? 3 * h * HS : h * HS);
    const long long cache = (long long) (n / M) * capacity * kvWidth + (long long) kvh * HS;
    const float slope = att_alibi_slope(h, NH, alibi);
    float qv[8], acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int d = lane + 32 * i;
        qv[i] = d < HS ? ld(q + d) : 0.0f;
        acc[i] = 0.0f;
    }
    float m = NEG_INF, l = 0.0f;
    const int lo = window > 0 ? max(0, t - window + 1) : 0;
    for (int k = lo; k <= t; k++) {
        const T* key = keys + cache + (long long) k * kvWidth;
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int d = lane + 32 * i;
            if (d < HS) dot += qv[i] * ld(key + d);
        }
        float s = warp_sum(dot) * scale + slope * (float) (k - t);
        float mNew = fmaxf(m, s), correction = expf(m - mNew), p = expf(s - mNew);
        l = l * correction + p;
        const T* value = values + cache + (long long) k * kvWidth;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int d = lane + 32 * i;
            acc[i] = acc[i] * correction + (d < HS ? p * ld(value + d) : 0.0f);
        }
        m = mNew;
    }
    T* o = out + (long long) n * NH * HS + h * HS;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int d = lane + 32 * i;
        if (d < HS) st(o + d, acc[i] / l);
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_cached_f32(float* out, const float* qkv,
        const float* keys, const float* values, const int* positions, int N, int M, int capacity, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi) {
    attention_cached_impl(out, qkv, keys, values, positions, N, M, capacity, NH, NKV, HS, window, scale, perHead,
                          alibi);
}

extern "C" __global__ void __launch_bounds__(256) attention_cached_bf16(bf16_t* out, const bf16_t* qkv,
        const bf16_t* keys, const bf16_t* values, const int* positions, int N, int M, int capacity, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi) {
    attention_cached_impl(out, qkv, keys, values, positions, N, M, capacity, NH, NKV, HS, window, scale, perHead,
                          alibi);
}

extern "C" __global__ void __launch_bounds__(256) attention_cached_f16(f16_t* out, const f16_t* qkv,
        const f16_t* keys, const f16_t* values, const int* positions, int N, int M, int capacity, int NH, int NKV,
        int HS, int window, float scale, int perHead, int alibi) {
    attention_cached_impl(out, qkv, keys, values, positions, N, M, capacity, NH, NKV, HS, window, scale, perHead,
                          alibi);
}

// ---- the simple kernels: one warp a row, registers only (no shared memory), any architecture ----------------------
//
// For GPUs where the tiled kernels above do not fit (their shared memory: 115712 bytes at HS = 128, where sm_70 gives
// a block 96 KiB and sm_75 64 KiB) and the tensor cores of attention_tc.cu do not exist (mma.sync bf16, cp.async:
// sm_80): V100, T4. Correctness first: the same arguments, layouts, masks, ALiBi, soft cap and outputs as the _ext
// kernels (grouped or per-head qkv, any HS <= 256), fp32 arithmetic, deterministic (no atomics). A warp owns one row:
// lane l holds head-dimension columns d = l + 32c (c < 8); a dot product over HS is a warp_sum.
// attention_simple_forward_f32 / _bf16 / _f16        (E* out, float* lse, const E* qkv, const int* docStart, int B,
//                                                     int T, int NH, int NKV, int HS, int window, float scale,
//                                                     int perHead, int alibi, float softcap)
//     grid = (ceil(T / 8), NH, B), block = 256 (8 warps: query rows blockIdx.x * 8 + warp), no shared memory.
//     The query walks its keys in order with an online softmax: out and lse as attention_forward_ext.
// attention_simple_backward_dq_f32 / _bf16 / _f16    (E* dQkv, const E* dOut, const E* qkv, const float* lse,
//                                                     const float* delta, ...the forward's from docStart on...)
//     grid = (ceil(T / 8), NH, B), block = 256: a warp a query row; dq = sum_k dS k (keys in order). delta from
//     attention_backward_delta_<E>.
// attention_simple_backward_dkdv_f32 / _bf16 / _f16  (same arguments as dq)
//     grid = (ceil(T / 8), NKV, B), block = 256: a warp a key row of kv head blockIdx.y; dk = sum dS^T q and
//     dv = sum P^T dOut over the query heads of its group (in head order, then query order).

#define AS_MAXC 8   // columns per lane: d = lane + 32c, c < 8, so HS <= 256
#define AS_ROWS 8   // rows (warps) per block of 256 threads

/** This lane's columns of a head's row (src points at column 0 of it), 0 past HS. */
template <typename E>
__device__ __forceinline__ void as_load_row(float* r, const E* src, int HS, int lane) {
#pragma unroll
    for (int c = 0; c < AS_MAXC; c++) {
        const int d = lane + 32 * c;
        r[c] = d < HS ? ld(src + d) : 0.0f;
    }
}

__device__ __forceinline__ float as_dot(const float* a, const float* b) {
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < AS_MAXC; c++) s += a[c] * b[c];
    return warp_sum(s);
}

template <typename E>
__device__ __forceinline__ void as_store_row(E* dst, const float* r, int HS, int lane) {
#pragma unroll
    for (int c = 0; c < AS_MAXC; c++) {
        const int d = lane + 32 * c;
        if (d < HS) st(dst + d, r[c]);
    }
}

template <typename E>
__device__ __forceinline__ void attention_simple_forward_impl(E* out, float* lse, const E* qkv, const int* docStart,
                                                              int T, int NH, int NKV, int HS, int window, float scale,
                                                              int perHead, int alibi, float softcap) {
    const int lane = threadIdx.x & 31;
    const int q = blockIdx.x * AS_ROWS + (threadIdx.x >> 5);
    if (q >= T) return; // a whole warp: warp_sum's shuffles stay within warps that go on
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (NH / NKV);
    const int W = (NH + 2 * NKV) * HS;
    const E* base = qkv + (long long) b * T * W;
    const float slope = att_alibi_slope(h, NH, alibi);
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    const int lo = max(0, att_first_key(starts, q, window)); // a window's start may lie before the sequence's
    float qr[AS_MAXC], kr[AS_MAXC], vr[AS_MAXC], acc[AS_MAXC];
    as_load_row(qr, base + (long long) q * W + att_q_col(h, NH, NKV, HS, perHead), HS, lane);
#pragma unroll
    for (int c = 0; c < AS_MAXC; c++) acc[c] = 0.0f;
    float m = NEG_INF, l = 0.0f;
    for (int key = lo; key <= q; key++) { // every key in [lo, q] is allowed (att_allowed), and q itself is one
        as_load_row(kr, base + (long long) key * W + att_k_col(kvh, NH, NKV, HS, perHead), HS, lane);
        as_load_row(vr, base + (long long) key * W + att_v_col(kvh, NH, NKV, HS, perHead), HS, lane);
        const float s = att_cap(as_dot(qr, kr) * scale, softcap) + slope * (float) (key - q);
        const float mNew = fmaxf(m, s);
        const float alpha = expf(m - mNew), p = expf(s - mNew);
        l = l * alpha + p;
#pragma unroll
        for (int c = 0; c < AS_MAXC; c++) acc[c] = acc[c] * alpha + p * vr[c];
        m = mNew;
    }
    const float inv = 1.0f / l;
#pragma unroll
    for (int c = 0; c < AS_MAXC; c++) acc[c] *= inv;
    as_store_row(out + ((long long) b * T + q) * NH * HS + h * HS, acc, HS, lane);
    if (lane == 0) lse[((long long) b * NH + h) * T + q] = m + logf(l);
}

template <typename E>
__device__ __forceinline__ void attention_simple_dq_impl(E* dQkv, const E* dOut, const E* qkv, const float* lse,
                                                         const float* delta, const int* docStart, int T, int NH,
                                                         int NKV, int HS, int window, float scale, int perHead,
                                                         int alibi, float softcap) {
    const int lane = threadIdx.x & 31;
    const int q = blockIdx.x * AS_ROWS + (threadIdx.x >> 5);
    if (q >= T) return;
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (NH / NKV);
    const int W = (NH + 2 * NKV) * HS;
    const E* base = qkv + (long long) b * T * W;
    const float slope = att_alibi_slope(h, NH, alibi);
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    const int lo = max(0, att_first_key(starts, q, window));
    const long long at = ((long long) b * NH + h) * T + q;
    const float rowLse = lse[at], rowDelta = delta[at];
    float qr[AS_MAXC], orow[AS_MAXC], kr[AS_MAXC], vr[AS_MAXC], dq[AS_MAXC];
    as_load_row(qr, base + (long long) q * W + att_q_col(h, NH, NKV, HS, perHead), HS, lane);
    as_load_row(orow, dOut + ((long long) b * T + q) * NH * HS + h * HS, HS, lane);
#pragma unroll
    for (int c = 0; c < AS_MAXC; c++) dq[c] = 0.0f;
    for (int key = lo; key <= q; key++) {
        as_load_row(kr, base + (long long) key * W + att_k_col(kvh, NH, NKV, HS, perHead), HS, lane);
        as_load_row(vr, base + (long long) key * W + att_v_col(kvh, NH, NKV, HS, perHead), HS, lane);
        const float sc = att_cap(as_dot(qr, kr) * scale, softcap);
        const float p = expf(sc + slope * (float) (key - q) - rowLse);
        const float ds = p * (as_dot(orow, vr) - rowDelta) * att_cap_slope(sc, softcap) * scale;
#pragma unroll
        for (int c = 0; c < AS_MAXC; c++) dq[c] += ds * kr[c];
    }
    as_store_row(dQkv + ((long long) b * T + q) * W + att_q_col(h, NH, NKV, HS, perHead), dq, HS, lane);
}

template <typename E>
__device__ __forceinline__ void attention_simple_dkdv_impl(E* dQkv, const E* dOut, const E* qkv, const float* lse,
                                                           const float* delta, const int* docStart, int T, int NH,
                                                           int NKV, int HS, int window, float scale, int perHead,
                                                           int alibi, float softcap) {
    const int lane = threadIdx.x & 31;
    const int key = blockIdx.x * AS_ROWS + (threadIdx.x >> 5);
    if (key >= T) return;
    const int kvh = blockIdx.y, b = blockIdx.z;
    const int group = NH / NKV;
    const int W = (NH + 2 * NKV) * HS;
    const E* base = qkv + (long long) b * T * W;
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    float kr[AS_MAXC], vr[AS_MAXC], qr[AS_MAXC], orow[AS_MAXC], dk[AS_MAXC], dv[AS_MAXC];
    as_load_row(kr, base + (long long) key * W + att_k_col(kvh, NH, NKV, HS, perHead), HS, lane);
    as_load_row(vr, base + (long long) key * W + att_v_col(kvh, NH, NKV, HS, perHead), HS, lane);
#pragma unroll
    for (int c = 0; c < AS_MAXC; c++) {
        dk[c] = 0.0f;
        dv[c] = 0.0f;
    }
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        const float slope = att_alibi_slope(h, NH, alibi);
        for (int q = key; q < T; q++) {
            if (window > 0 && q - window + 1 > key) break;  // later queries' windows start later still
            if (starts && starts[q] > key) break;           // and later documents start later still
            if (!att_allowed(q, key, T, att_first_key(starts, q, window))) continue;
            as_load_row(qr, base + (long long) q * W + att_q_col(h, NH, NKV, HS, perHead), HS, lane);
            as_load_row(orow, dOut + ((long long) b * T + q) * NH * HS + h * HS, HS, lane);
            const long long at = ((long long) b * NH + h) * T + q;
            const float sc = att_cap(as_dot(qr, kr) * scale, softcap);
            const float p = expf(sc + slope * (float) (key - q) - lse[at]);
            const float ds = p * (as_dot(orow, vr) - delta[at]) * att_cap_slope(sc, softcap) * scale;
#pragma unroll
            for (int c = 0; c < AS_MAXC; c++) {
                dv[c] += p * orow[c];
                dk[c] += ds * qr[c];
            }
        }
    }
    E* row = dQkv + ((long long) b * T + key) * W;
    as_store_row(row + att_k_col(kvh, NH, NKV, HS, perHead), dk, HS, lane);
    as_store_row(row + att_v_col(kvh, NH, NKV, HS, perHead), dv, HS, lane);
}

#define ATTENTION_SIMPLE_KERNELS(SFX, E)                                                                              \
    extern "C" __global__ void __launch_bounds__(256) attention_simple_forward_##SFX(E* out, float* lse,             \
            const E* qkv, const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale,       \
            int perHead, int alibi, float softcap) {                                                                  \
        attention_simple_forward_impl(out, lse, qkv, docStart, T, NH, NKV, HS, window, scale, perHead, alibi,        \
                                      softcap);                                                                       \
    }                                                                                                                 \
    extern "C" __global__ void __launch_bounds__(256) attention_simple_backward_dq_##SFX(E* dQkv, const E* dOut,     \
            const E* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,  \
            int HS, int window, float scale, int perHead, int alibi, float softcap) {                                \
        attention_simple_dq_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,      \
                                 alibi, softcap);                                                                     \
    }                                                                                                                 \
    extern "C" __global__ void __launch_bounds__(256) attention_simple_backward_dkdv_##SFX(E* dQkv, const E* dOut,   \
            const E* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,  \
            int HS, int window, float scale, int perHead, int alibi, float softcap) {                                \
        attention_simple_dkdv_impl(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, HS, window, scale, perHead,    \
                                   alibi, softcap);                                                                   \
    }

ATTENTION_SIMPLE_KERNELS(f32, float)
ATTENTION_SIMPLE_KERNELS(bf16, bf16_t)
ATTENTION_SIMPLE_KERNELS(f16, f16_t)
