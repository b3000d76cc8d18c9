// attention_tc.cu: the bf16 attention of attention.cu on tensor cores (mma.sync m16n8k16 bf16 -> fp32, sm_80+),
// flash-attention-2 style: forward 128-query x 64-key tiles, 4 warps each owning 32 rows, masks only on the tiles
// that need them; backward 64 x 64 tiles, 4 warps each owning 16 rows; online softmax in registers, exponentials on
// the special-function unit (ex2.approx, subnormals flushed), probabilities recomputed from the saved lse in
// backward; the streamed tiles are double-buffered (cp.async). Same semantics, layouts and outputs as the _bf16
// kernels of attention.cu (read its header); only the launch differs. The backward is deterministic (no atomics):
// dq and dkdv kernels as in attention.cu, with the same delta kernel (attention_backward_delta_bf16, from
// attention.cu's module) launched first.
//
// Requirements: HS in {32, 64, 80, 96, 128, 256} (other HS: use attention.cu); qkv, out, dOut, dQkv 16-byte aligned
// (cuMemAlloc gives 256; a view's element offset must be a multiple of 8). Probabilities and dS enter the
// tensor cores rounded to bf16 (as in flash-attention); accumulation is fp32.
//
// docStart: the packed sequences' document starts of attention.cu (read its header), or null (0) when unpacked.
//
// attention_tc_forward_hsH_bf16 for H = HS (bf16* out, float* lse, const bf16* qkv, const int* docStart, int B,
//                            int T, int NH, int NKV, int HS, int window, float scale)
//     grid = (ceil(T / 128), NH, B), block = 128, dynamic shared = 768 * (HS + 8) bytes (HS = 128: 104448).
// attention_tc_forward_hs256_bf16 (the same arguments): HS = 256 in 64-query tiles: grid = (ceil(T / 64), NH, B),
//     block = 128, dynamic shared = 640 * (HS + 8) bytes (168960).
// attention_tc_backward_dq_bf16 (bf16* dQkv, const bf16* dOut, const bf16* qkv, const float* lse,
//                                const float* delta, const int* docStart, int B, int T, int NH, int NKV, int HS,
//                                int window, float scale)
//     grid = (ceil(T / 64), NH, B), block = 128, dynamic shared = 768 * (HS + 8) bytes (HS = 128: 104448).
// attention_tc_backward_dq_hs256_bf16 (the same arguments): dq for HS = 256, launched as dq (202752 bytes of shared
//     memory); attention_tc_backward_dkdv_hs256_bf16 (dkdv's arguments): dk and dv for HS = 256, launched as dkdv
//     (203776 bytes) but with grid = (ceil(T / 64), 2 * NKV * splits, B): block y = 2 * (kvHead * splits + split) +
//     half accumulates the columns [128 * half, 128 * half + 128) of the head's dk and dv (both halves compute the
//     scores). With the soft cap: attention_tc_backward_dq_cap_hs256_bf16, attention_tc_backward_dkdv_cap_hs256_bf16.
// Gemma 2's soft cap of the scores (attention.cu's header): the _cap kernels, with one more argument after all the
//     others, float softcap > 0: attention_tc_forward_cap_hsH_bf16 for H in {32, 64, 80, 96, 128, 256} (launched as
//     attention_tc_forward_hsH_bf16, except H = 128: 64-query tiles, grid = (ceil(T / 64), NH, B), dynamic shared =
//     640 * (HS + 8) bytes), attention_tc_backward_dq_cap_bf16 and attention_tc_backward_dkdv_cap_bf16 (HS <= 128,
//     launched as dq and dkdv); HS = 256's: the _hs256 kernels above.
// attention_tc_backward_dkdv_bf16 (same arguments as dq, then float* partial, int splits)
//     grid = (ceil(T / 64), NKV * splits, B), block = 128, dynamic shared = 768 * (HS + 8) + 1024 bytes
//     (HS = 128: 105472). splits divides the group NH / NKV; block y = kvHead * splits + split covers the group's
//     query heads [split * group / splits, (split + 1) * group / splits). splits = 1: dk and dv go straight into
//     dQkv (bf16) and partial is unused (null). splits > 1 (more blocks for the GPU when NKV is small, as in
//     grouped-query attention): each split's fp32 sums go to partial, laid out (splits, B, T, 2 * NKV * HS) with
//     the dk columns first, and attention_tc_dkdv_sum_bf16 adds them up in split order into dQkv.
// attention_tc_dkdv_sum_bf16 (bf16* dQkv, const float* partial, int B, int T, int NH, int NKV, int HS, int splits)
//     grid = ceil(B * T * NKV * HS / 256), block = 256: dQkv's key and value columns = the sum of the splits.
// Above 48 KB: cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes) once per function.
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

#define TC_TILE 64
#define TC_LOG2E 1.4426950408889634f
#define TC_LN2 0.6931471805599453f

__device__ __forceinline__ unsigned int tc_smem_addr(const void* p) {
    unsigned int a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

/** 2^x on the special-function unit, flushing subnormal results to zero (probabilities that small are zero anyway). */
__device__ __forceinline__ float tc_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/**
 * The block's (tile, y, z) with the longest blocks first across the whole grid (causal attention: a query tile's
 * work grows with its index, a key tile's shrinks), so the GPU's last wave holds the short ones: blocks start in
 * order of their linear index, which here walks every (y, z) of one tile before the next tile.
 * lastTileFirst: query tiles (the last is the longest); otherwise key tiles (the first is).
 */
__device__ __forceinline__ void tc_block_order(bool lastTileFirst, int& tile, int& y, int& z) {
    const int linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const int others = gridDim.y * gridDim.z, rank = linear / others, rest = linear % others;
    tile = lastTileFirst ? gridDim.x - 1 - rank : rank;
    y = rest % gridDim.y;
    z = rest / gridDim.y;
}

/** Four 8x8 bf16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8. */
__device__ __forceinline__ void ldsm_x4(unsigned int* r, const bf16_t* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tc_smem_addr(p)));
}

__device__ __forceinline__ void ldsm_x4_trans(unsigned int* r, const bf16_t* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tc_smem_addr(p)));
}

/** c (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col). */
__device__ __forceinline__ void mma_bf16(float* c, const unsigned int* a, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/** Two floats to a bf16 pair (round to nearest even), lo in the low half. */
__device__ __forceinline__ unsigned int pack_bf16(float lo, float hi) {
    unsigned int r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// Fragment layouts (PTX ISA, mma.m16n8k16): g = lane / 4, t = lane % 4. Accumulator c: c0, c1 at (row g,
// cols 2t, 2t+1), c2, c3 at (row g+8, same cols). The accumulators of two adjacent 8-column tiles, packed to
// bf16, are exactly the A operand of the next product over those 16 columns (the flash-attention register reuse).

/** A operand (16 rows x 16 cols at (row0, col0)) of a row-major shared tile with row stride LDS. */
template <int LDS>
__device__ __forceinline__ void load_a(unsigned int* a, const bf16_t* tile, int row0, int col0) {
    const int lane = threadIdx.x & 31;
    ldsm_x4(a, tile + (row0 + (lane & 15)) * LDS + col0 + (lane >> 4) * 8);
}

/** B operands of two 8-wide n-tiles (rows n0..n0+15 of a [n][k] tile), k-step at col0: b[0..1] and b[2..3]. */
template <int LDS>
__device__ __forceinline__ void load_b_nk(unsigned int* b, const bf16_t* tile, int n0, int col0) {
    const int lane = threadIdx.x & 31;
    ldsm_x4(b, tile + (n0 + ((lane >> 4) << 3) + (lane & 7)) * LDS + col0 + ((lane >> 3) & 1) * 8);
}

/** B operands of two 8-wide n-tiles (cols n0..n0+15 of a [k][n] tile), k-step rows k0..k0+15. */
template <int LDS>
__device__ __forceinline__ void load_b_kn(unsigned int* b, const bf16_t* tile, int k0, int n0) {
    const int lane = threadIdx.x & 31;
    ldsm_x4_trans(b, tile + (k0 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LDS + n0 + (lane >> 4) * 8);
}

/**
 * Rows [row0, row0 + ROWS) of one head (src at its column 0 of row 0) into a ROWS x LDS bf16 shared tile,
 * asynchronously (cp.async, 16 bytes a copy, zero-filled past T); commit and wait after.
 */
template <int HS, int ROWS = TC_TILE>
__device__ __forceinline__ void tc_load_tile_async(bf16_t* dst, const bf16_t* src, int rowStride, int row0, int T) {
    constexpr int CH = HS / 8, LDS = HS + 8;
    for (int idx = threadIdx.x; idx < ROWS * CH; idx += blockDim.x) {
        const int i = idx / CH, c = idx - i * CH;
        const bool in = row0 + i < T;
        const bf16_t* from = in ? src + (long long) (row0 + i) * rowStride + c * 8 : src;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                     :: "r"(tc_smem_addr(dst + i * LDS + c * 8)), "l"(from), "r"(in ? 16 : 0) : "memory");
    }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

/** Whether query q (< T to count) sees key k; lo is q's first key (tc_first_key). */
__device__ __forceinline__ bool tc_allowed(int q, int k, int T, int lo) {
    return q < T && k <= q && k >= lo;
}

/**
 * Whether every query in [qFirst, qLast] sees every key in [kFirst, kLast], so that no mask need be applied: all
 * queries inside the sequence, every key at or before every query, inside every query's window, and in every
 * query's document (document starts never decrease: the last query's start is the latest).
 */
__device__ __forceinline__ bool tc_unmasked(const int* starts, int window, int kFirst, int kLast, int qFirst, int qLast,
                                            int T) {
    return qLast < T && kLast <= qFirst && (window <= 0 || qLast - window + 1 <= kFirst)
            && (starts == nullptr || starts[qLast] <= kFirst);
}

/**
 * Whether a whole 64 x 64 tile (queries from q0, keys from k0) needs no mask, for causal attention only (no window,
 * no packed documents). Used by the dq kernel only: measured on an H200 (Qwen2.5-7B, 2026-11-23), testing for
 * unmasked tiles in the dk/dv kernel, or per warp or with windows and documents in the dq kernel, made them slower.
 */
__device__ __forceinline__ bool tc_whole(const int* starts, int window, int k0, int q0, int T) {
    return starts == nullptr && window <= 0 && tc_unmasked(nullptr, 0, k0, k0 + TC_TILE - 1, q0, q0 + TC_TILE - 1, T);
}

/**
 * The first key query q may see: the window's start (0 without a window) or, for packed sequences, the start of
 * q's document if later. starts: the batch row's document starts (null when unpacked: no load); q < T.
 */
__device__ __forceinline__ int tc_first_key(const int* starts, int q, int window) {
    const int lo = window > 0 ? q - window + 1 : 0;
    return starts ? max(lo, starts[q]) : lo;
}

/**
 * The last query that may see a key in [.., kLast] of a packed sequence: the last q with starts[q] <= kLast (document
 * starts never decrease along a sequence), by bisection over [kLast, T); kLast < T.
 */
__device__ __forceinline__ int tc_doc_last_query(const int* starts, int kLast, int T) {
    int lo = kLast, hi = T - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (starts[mid] <= kLast) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/**
 * Gemma 2's soft cap on a thread's scores s (n-tiles of 4, raw q.k): s * scale becomes softcap * tanh(s * scale /
 * softcap), kept in units of scale (divided by it again), so that the code after it is the uncapped code.
 */
template <int N>
__device__ __forceinline__ void tc_cap(float (*s)[4], float scale, float softcap) {
    const float in = scale / softcap, out = softcap / scale;
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] = out * tanhf(s[n][e] * in);
}

/** The cap's slope 1 - tanh^2 at a capped score c (in units of scale, as tc_cap leaves it). */
__device__ __forceinline__ float tc_cap_slope(float c, float scale, float softcap) {
    const float t = c * (scale / softcap);
    return 1.0f - t * t;
}

/**
 * The forward: 128-query tiles, each of the 4 warps owning 32 query rows (two 16-row mma tiles), so that every K and
 * V fragment read from shared memory feeds two products; keys stream in 64-row tiles, double-buffered. Q fragments
 * are read from shared memory at each use (registers hold the rows' outputs). Masks are applied only to the tiles
 * that need them, and a warp skips a key tile none of its rows may see. Measured on an H200 (2026-11-23,
 * tools/kernels/attention_bench.cu): 1.17x the 64-query-tile kernel at Qwen2.5-7B's shapes, 1.5x at 0.5B's.
 */
// MT: 16-row mma tiles a warp (2: the 128-query tiles above; 1: 64-query tiles, for HS = 256, whose outputs of two
// tiles would not fit in registers). At most 2.
template <int HS, int MT = 2, bool CAP = false>
__device__ __forceinline__ void tc_forward(bf16_t* out, float* lse, const bf16_t* qkv, const int* docStart, int T,
                                           int NH, int NKV, int window, float scale, float softcap = 0.0f) {
    constexpr int BM = 64 * MT, BN = TC_TILE, LDS = HS + 8, KS = HS / 16, NO = HS / 8, NS = BN / 8;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    bf16_t* sQ = reinterpret_cast<bf16_t*>(tc_smem);
    bf16_t* sKV = sQ + BM * LDS; // two stages of (K, V) tiles of BN rows
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int tile, h, b;
    tc_block_order(true, tile, h, b);
    const int q0 = tile * BM, kvh = h / (NH / NKV);
    const int W = (NH + 2 * NKV) * HS;
    const bf16_t* base = qkv + (long long) b * T * W;
    tc_load_tile_async<HS, BM>(sQ, base + h * HS, W, q0, T);
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    const int qw0 = q0 + warp * 16 * MT; // this warp's first row; its thread's rows: qw0 + 16 mt + 8 r + g
    // the keys this warp's rows may see: from its first row's first key to its last row
    const int wLast = min(qw0 + 16 * MT - 1, T - 1);
    const int wFirst = qw0 < T ? tc_first_key(starts, qw0, window) : 0;
    float o[MT][NO][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < NO; n++) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        m[mt][0] = m[mt][1] = NEG_INF;
        l[mt][0] = l[mt][1] = 0.0f;
    }
    const float sl2 = scale * TC_LOG2E;
    const int qLast = min(q0 + BM - 1, T - 1);
    const int kFirst = max(0, tc_first_key(starts, q0, window)); // the tile's earliest: first keys never decrease
    const bf16_t* kSrc = base + (NH + kvh) * HS;
    const bf16_t* vSrc = base + (NH + NKV + kvh) * HS;
    int k0 = kFirst & ~(BN - 1);
    tc_load_tile_async<HS, BN>(sKV, kSrc, W, k0, T);
    tc_load_tile_async<HS, BN>(sKV + BN * LDS, vSrc, W, k0, T);
    cp_async_commit();
    for (int it = 0; k0 <= qLast; it++, k0 += BN) {
        const bf16_t* sK = sKV + (it & 1) * 2 * BN * LDS;
        const bf16_t* sV = sK + BN * LDS;
        if (k0 + BN <= qLast) { // prefetch the next (K, V) into the other stage
            bf16_t* next = sKV + ((it + 1) & 1) * 2 * BN * LDS;
            tc_load_tile_async<HS, BN>(next, kSrc, W, k0 + BN, T);
            tc_load_tile_async<HS, BN>(next + BN * LDS, vSrc, W, k0 + BN, T);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (qw0 < T && k0 <= wLast && k0 + BN - 1 >= wFirst) {
            float s[MT][NS][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < NS; n++) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                unsigned int qa[MT][4];
                load_a<LDS>(qa[0], sQ, warp * 16 * MT, kk * 16); // written out: the same code as before MT
                if (MT > 1) load_a<LDS>(qa[MT - 1], sQ, warp * 16 * MT + 16, kk * 16);
#pragma unroll
                for (int np = 0; np < NS / 2; np++) {
                    unsigned int kb[4];
                    load_b_nk<LDS>(kb, sK, np * 16, kk * 16);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma_bf16(s[mt][2 * np], qa[mt], kb[0], kb[1]);
                        mma_bf16(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
                    }
                }
            }
            if (CAP) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++) tc_cap<NS>(s[mt], scale, softcap);
            }
            if (!tc_unmasked(starts, window, k0, k0 + BN - 1, qw0, qw0 + 16 * MT - 1, T)) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++)
#pragma unroll
                    for (int r = 0; r < 2; r++) {
                        const int q = qw0 + mt * 16 + 8 * r + g;
                        const int first = q < T ? tc_first_key(starts, q, window) : 0;
#pragma unroll
                        for (int n = 0; n < NS; n++)
#pragma unroll
                            for (int c = 0; c < 2; c++) {
                                if (!tc_allowed(q, k0 + n * 8 + 2 * t + c, T, first)) s[mt][n][2 * r + c] = NEG_INF;
                            }
                    }
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                float mx[2] = {NEG_INF, NEG_INF};
#pragma unroll
                for (int n = 0; n < NS; n++) {
                    mx[0] = fmaxf(mx[0], fmaxf(s[mt][n][0], s[mt][n][1]));
                    mx[1] = fmaxf(mx[1], fmaxf(s[mt][n][2], s[mt][n][3]));
                }
                float alpha[2], mSafe[2];
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 1));
                    mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 2));
                    const float mNew = fmaxf(m[mt][r], mx[r] * sl2);
                    mSafe[r] = mNew == NEG_INF ? 0.0f : mNew;
                    alpha[r] = tc_exp2(m[mt][r] - mSafe[r]);
                    m[mt][r] = mNew;
                }
                float ps[2] = {0.0f, 0.0f};
#pragma unroll
                for (int n = 0; n < NS; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        s[mt][n][e] = tc_exp2(fmaf(s[mt][n][e], sl2, -mSafe[e >> 1]));
                        ps[e >> 1] += s[mt][n][e];
                    }
                // each thread keeps its own part of the row sums; the quad adds them up at the end
                l[mt][0] = l[mt][0] * alpha[0] + ps[0];
                l[mt][1] = l[mt][1] * alpha[1] + ps[1];
#pragma unroll
                for (int n = 0; n < NO; n++) {
                    o[mt][n][0] *= alpha[0];
                    o[mt][n][1] *= alpha[0];
                    o[mt][n][2] *= alpha[1];
                    o[mt][n][3] *= alpha[1];
                }
            }
            // o += P V
#pragma unroll
            for (int j = 0; j < NS / 2; j++) {
                unsigned int a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    a[mt][0] = pack_bf16(s[mt][2 * j][0], s[mt][2 * j][1]);
                    a[mt][1] = pack_bf16(s[mt][2 * j][2], s[mt][2 * j][3]);
                    a[mt][2] = pack_bf16(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
                    a[mt][3] = pack_bf16(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
                }
#pragma unroll
                for (int dp = 0; dp < HS / 16; dp++) {
                    unsigned int vb[4];
                    load_b_kn<LDS>(vb, sV, j * 16, dp * 16);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma_bf16(o[mt][2 * dp], a[mt], vb[0], vb[1]);
                        mma_bf16(o[mt][2 * dp + 1], a[mt], vb[2], vb[3]);
                    }
                }
            }
        }
        __syncthreads(); // this stage is refilled by the next iteration's prefetch
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float sum = l[mt][r];
            sum += __shfl_xor_sync(FULL_MASK, sum, 1);
            sum += __shfl_xor_sync(FULL_MASK, sum, 2);
            const int q = qw0 + mt * 16 + 8 * r + g;
            if (q >= T) continue;
            const float inv = 1.0f / sum;
            bf16_t* dst = out + ((long long) b * T + q) * NH * HS + h * HS + 2 * t;
#pragma unroll
            for (int n = 0; n < NO; n++) {
                *reinterpret_cast<unsigned int*>(dst + n * 8) =
                        pack_bf16(o[mt][n][2 * r] * inv, o[mt][n][2 * r + 1] * inv);
            }
            if (t == 0) lse[((long long) b * NH + h) * T + q] = (m[mt][r] + log2f(sum)) * TC_LN2;
        }
}

template <int HS, bool CAP = false>
__device__ __forceinline__ void tc_backward_dq(bf16_t* dQkv, const bf16_t* dOut, const bf16_t* qkv, const float* lse,
                                               const float* delta, const int* docStart, int T, int NH, int NKV,
                                               int window, float scale, float softcap = 0.0f) {
    constexpr int LDS = HS + 8, KS = HS / 16, NO = HS / 8;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    bf16_t* sQ = reinterpret_cast<bf16_t*>(tc_smem);
    bf16_t* sO = sQ + TC_TILE * LDS;
    bf16_t* sKV = sO + TC_TILE * LDS; // two stages of (K, V) tiles
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int tile, h, b;
    tc_block_order(true, tile, h, b);
    const int q0 = tile * TC_TILE, kvh = h / (NH / NKV);
    const int W = (NH + 2 * NKV) * HS;
    const bf16_t* base = qkv + (long long) b * T * W;
    tc_load_tile_async<HS>(sQ, base + h * HS, W, q0, T);
    tc_load_tile_async<HS>(sO, dOut + (long long) b * T * NH * HS + h * HS, NH * HS, q0, T);
    const int qRow[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    float rowLse[2], rowD[2];
    int lo[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        lo[r] = qRow[r] < T ? tc_first_key(starts, qRow[r], window) : 0;
        const long long at = ((long long) b * NH + h) * T + qRow[r];
        rowLse[r] = qRow[r] < T ? lse[at] * TC_LOG2E : 0.0f;
        rowD[r] = qRow[r] < T ? delta[at] : 0.0f;
    }
    float dq[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    const float sl2 = scale * TC_LOG2E;
    const int qLast = min(q0 + TC_TILE - 1, T - 1);
    const int kFirst = max(0, tc_first_key(starts, q0, window)); // the tile's earliest: first keys never decrease
    const bf16_t* kSrc = base + (NH + kvh) * HS;
    const bf16_t* vSrc = base + (NH + NKV + kvh) * HS;
    int k0 = kFirst & ~(TC_TILE - 1);
    tc_load_tile_async<HS>(sKV, kSrc, W, k0, T);
    tc_load_tile_async<HS>(sKV + TC_TILE * LDS, vSrc, W, k0, T);
    cp_async_commit();
    for (int it = 0; k0 <= qLast; it++, k0 += TC_TILE) {
        const bf16_t* sK = sKV + (it & 1) * 2 * TC_TILE * LDS;
        const bf16_t* sV = sK + TC_TILE * LDS;
        if (k0 + TC_TILE <= qLast) {
            bf16_t* next = sKV + ((it + 1) & 1) * 2 * TC_TILE * LDS;
            tc_load_tile_async<HS>(next, kSrc, W, k0 + TC_TILE, T);
            tc_load_tile_async<HS>(next + TC_TILE * LDS, vSrc, W, k0 + TC_TILE, T);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        float s[8][4], dp[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            unsigned int qa[4], oa[4];
            load_a<LDS>(qa, sQ, warp * 16, kk * 16);
            load_a<LDS>(oa, sO, warp * 16, kk * 16);
#pragma unroll
            for (int np = 0; np < 4; np++) {
                unsigned int kb[4], vb[4];
                load_b_nk<LDS>(kb, sK, np * 16, kk * 16);
                load_b_nk<LDS>(vb, sV, np * 16, kk * 16);
                mma_bf16(s[2 * np], qa, kb[0], kb[1]);
                mma_bf16(s[2 * np + 1], qa, kb[2], kb[3]);
                mma_bf16(dp[2 * np], oa, vb[0], vb[1]);
                mma_bf16(dp[2 * np + 1], oa, vb[2], vb[3]);
            }
        }
        if (CAP) tc_cap<8>(s, scale, softcap);
        // dS = P (dP - delta) * scale, in place of s (capped: times the cap's slope)
        const bool whole = tc_whole(starts, window, k0, q0, T); // no mask to apply in this tile
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1;
                const int key = k0 + n * 8 + 2 * t + (e & 1);
                float ds = 0.0f;
                if (whole || tc_allowed(qRow[r], key, T, lo[r])) {
                    ds = tc_exp2(fmaf(s[n][e], sl2, -rowLse[r])) * (dp[n][e] - rowD[r]) * scale;
                    if (CAP) ds *= tc_cap_slope(s[n][e], scale, softcap);
                }
                s[n][e] = ds;
            }
        // dq += dS K
#pragma unroll
        for (int j = 0; j < 4; j++) {
            unsigned int a[4] = {pack_bf16(s[2 * j][0], s[2 * j][1]), pack_bf16(s[2 * j][2], s[2 * j][3]),
                                 pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]),
                                 pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
            for (int d2 = 0; d2 < HS / 16; d2++) {
                unsigned int kb[4];
                load_b_kn<LDS>(kb, sK, j * 16, d2 * 16);
                mma_bf16(dq[2 * d2], a, kb[0], kb[1]);
                mma_bf16(dq[2 * d2 + 1], a, kb[2], kb[3]);
            }
        }
        __syncthreads(); // this stage is refilled by the next iteration's prefetch
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int q = qRow[r];
        if (q >= T) continue;
        bf16_t* dst = dQkv + ((long long) b * T + q) * W + h * HS + 2 * t;
#pragma unroll
        for (int n = 0; n < NO; n++) {
            *reinterpret_cast<unsigned int*>(dst + n * 8) = pack_bf16(dq[n][2 * r], dq[n][2 * r + 1]);
        }
    }
}

// COLS < HS (HS = 256: COLS = 128): a block accumulates the dk and dv of COLS of the head's columns only, part =
// y % (HS / COLS) of them, so that its accumulators fit in registers; every part computes the scores (HS wide).
template <int HS, bool CAP = false, int COLS = HS>
__device__ __forceinline__ void tc_backward_dkdv(bf16_t* dQkv, const bf16_t* dOut, const bf16_t* qkv,
                                                 const float* lse, const float* delta, const int* docStart, int T,
                                                 int NH, int NKV, int window, float scale, float* partial,
                                                 int splits, float softcap = 0.0f) {
    constexpr int LDS = HS + 8, KS = HS / 16, NO = COLS / 8, PARTS = HS / COLS;
    extern __shared__ __align__(16) unsigned char tc_smem[];
    bf16_t* sK = reinterpret_cast<bf16_t*>(tc_smem);
    bf16_t* sV = sK + TC_TILE * LDS;
    bf16_t* sQO = sV + TC_TILE * LDS;                               // two stages of (Q, dOut) tiles
    float* sLD = reinterpret_cast<float*>(sQO + 4 * TC_TILE * LDS); // two stages of (lse, delta)
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int tile, y, b;
    tc_block_order(false, tile, y, b);
    const int col0 = (y % PARTS) * COLS; // the first of this block's dk and dv columns
    y /= PARTS;
    const int k0 = tile * TC_TILE;
    const int kvh = y / splits, split = y % splits, group = NH / NKV;
    const int heads = group / splits, h0 = kvh * group + split * heads; // the query heads this block meets
    const int W = (NH + 2 * NKV) * HS;
    const bf16_t* base = qkv + (long long) b * T * W;
    tc_load_tile_async<HS>(sK, base + (NH + kvh) * HS, W, k0, T);
    tc_load_tile_async<HS>(sV, base + (NH + NKV + kvh) * HS, W, k0, T);
    const int kRow[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
    float dk[NO][4], dv[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;
    const float sl2 = scale * TC_LOG2E;
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    int qEnd = window > 0 ? min(T - 1, k0 + TC_TILE - 2 + window) : T - 1;
    if (starts) qEnd = min(qEnd, tc_doc_last_query(starts, min(k0 + TC_TILE - 1, T - 1), T)); // later documents: none
    // the (query head, query tile) pairs this key tile meets, in order: head-major, then query tiles
    const int nq = (qEnd - k0) / TC_TILE + 1, steps = heads * nq;
    const bf16_t* dOutB = dOut + (long long) b * T * NH * HS;
    auto issue = [&](int step) { // async copies of step's Q and dOut tiles; plain loads of its lse and delta
        const int h = h0 + step / nq, q0 = k0 + (step % nq) * TC_TILE, stage = step & 1;
        bf16_t* dst = sQO + stage * 2 * TC_TILE * LDS;
        tc_load_tile_async<HS>(dst, base + h * HS, W, q0, T);
        tc_load_tile_async<HS>(dst + TC_TILE * LDS, dOutB + h * HS, NH * HS, q0, T);
        cp_async_commit();
        if (threadIdx.x < TC_TILE) {
            const int q = q0 + threadIdx.x;
            const long long at = ((long long) b * NH + h) * T + q;
            sLD[stage * 2 * TC_TILE + threadIdx.x] = q < T ? lse[at] * TC_LOG2E : 0.0f;
            sLD[stage * 2 * TC_TILE + TC_TILE + threadIdx.x] = q < T ? delta[at] : 0.0f;
        }
    };
    issue(0);
    for (int step = 0; step < steps; step++) {
        const int q0 = k0 + (step % nq) * TC_TILE, stage = step & 1;
        const bf16_t* sQ = sQO + stage * 2 * TC_TILE * LDS;
        const bf16_t* sO = sQ + TC_TILE * LDS;
        const float* sL = sLD + stage * 2 * TC_TILE;
        const float* sD = sL + TC_TILE;
        if (step + 1 < steps) {
            issue(step + 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        // per 16-query slice j: S^T, dP^T (16 keys x 16 queries), then dv += P^T dOut, dk += dS^T Q
        for (int j = 0; j < 4; j++) {
            const int qs = q0 + j * 16, kw = k0 + warp * 16;
            if (qs + 15 < kw || (window > 0 && qs > kw + 15 + window - 1)) continue; // all masked
            if (starts && qs < T && starts[qs] > kw + 15) continue; // the slice's documents start after these keys
            int qlo[2][2]; // first keys of this thread's queries j*16 + n*8 + 2t + c
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const int q = qs + n * 8 + 2 * t + c;
                    qlo[n][c] = q < T ? tc_first_key(starts, q, window) : 0;
                }
            float p[2][4], ds[2][4];
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) p[n][e] = ds[n][e] = 0.0f;
#pragma unroll 2
            for (int kk = 0; kk < KS; kk++) {
                unsigned int ka[4], va[4], qb[4], ob[4];
                load_a<LDS>(ka, sK, warp * 16, kk * 16);
                load_a<LDS>(va, sV, warp * 16, kk * 16);
                load_b_nk<LDS>(qb, sQ, j * 16, kk * 16);
                load_b_nk<LDS>(ob, sO, j * 16, kk * 16);
                mma_bf16(p[0], ka, qb[0], qb[1]);
                mma_bf16(p[1], ka, qb[2], qb[3]);
                mma_bf16(ds[0], va, ob[0], ob[1]);
                mma_bf16(ds[1], va, ob[2], ob[3]);
            }
            if (CAP) tc_cap<2>(p, scale, softcap);
#pragma unroll
            for (int n = 0; n < 2; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = j * 16 + n * 8 + 2 * t + (e & 1);
                    const float pe = tc_allowed(q0 + i, kRow[e >> 1], T, qlo[n][e & 1])
                            ? tc_exp2(fmaf(p[n][e], sl2, -sL[i])) : 0.0f;
                    ds[n][e] = pe * (ds[n][e] - sD[i]) * scale;
                    if (CAP) ds[n][e] *= tc_cap_slope(p[n][e], scale, softcap);
                    p[n][e] = pe;
                }
            const unsigned int pa[4] = {pack_bf16(p[0][0], p[0][1]), pack_bf16(p[0][2], p[0][3]),
                                        pack_bf16(p[1][0], p[1][1]), pack_bf16(p[1][2], p[1][3])};
            const unsigned int sa[4] = {pack_bf16(ds[0][0], ds[0][1]), pack_bf16(ds[0][2], ds[0][3]),
                                        pack_bf16(ds[1][0], ds[1][1]), pack_bf16(ds[1][2], ds[1][3])};
#pragma unroll
            for (int d2 = 0; d2 < COLS / 16; d2++) {
                unsigned int ob[4], qb[4];
                load_b_kn<LDS>(ob, sO, j * 16, col0 + d2 * 16);
                load_b_kn<LDS>(qb, sQ, j * 16, col0 + d2 * 16);
                mma_bf16(dv[2 * d2], pa, ob[0], ob[1]);
                mma_bf16(dv[2 * d2 + 1], pa, ob[2], ob[3]);
                mma_bf16(dk[2 * d2], sa, qb[0], qb[1]);
                mma_bf16(dk[2 * d2 + 1], sa, qb[2], qb[3]);
            }
        }
        __syncthreads(); // this stage is refilled by the next step's prefetch
    }
    if (splits > 1) {
        const int PW = 2 * NKV * HS;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int key = kRow[r];
            if (key >= T) continue;
            float* row = partial + (((long long) split * gridDim.z + b) * T + key) * PW + 2 * t;
#pragma unroll
            for (int n = 0; n < NO; n++) {
                float2 k2, v2;
                k2.x = dk[n][2 * r];
                k2.y = dk[n][2 * r + 1];
                v2.x = dv[n][2 * r];
                v2.y = dv[n][2 * r + 1];
                *reinterpret_cast<float2*>(row + kvh * HS + col0 + n * 8) = k2;
                *reinterpret_cast<float2*>(row + (NKV + kvh) * HS + col0 + n * 8) = v2;
            }
        }
        return;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int key = kRow[r];
        if (key >= T) continue;
        bf16_t* row = dQkv + ((long long) b * T + key) * W + 2 * t;
#pragma unroll
        for (int n = 0; n < NO; n++) {
            *reinterpret_cast<unsigned int*>(row + (NH + kvh) * HS + col0 + n * 8) =
                    pack_bf16(dk[n][2 * r], dk[n][2 * r + 1]);
            *reinterpret_cast<unsigned int*>(row + (NH + NKV + kvh) * HS + col0 + n * 8) =
                    pack_bf16(dv[n][2 * r], dv[n][2 * r + 1]);
        }
    }
}

#define TC_DISPATCH(F, ...)                       \
    switch (HS) {                                 \
        case 32: F<32>(__VA_ARGS__); break;       \
        case 64: F<64>(__VA_ARGS__); break;       \
        case 80: F<80>(__VA_ARGS__); break;       \
        case 96: F<96>(__VA_ARGS__); break;       \
        case 128: F<128>(__VA_ARGS__); break;     \
        default: break;                           \
    }

// one forward kernel a head size (a switch over head sizes in one kernel would allocate registers for the largest
// and spill there)
#define TC_FORWARD_KERNEL(H)                                                                                        \
    extern "C" __global__ void __launch_bounds__(128, 2) attention_tc_forward_hs##H##_bf16(bf16_t* out, float* lse,  \
            const bf16_t* qkv, const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale) { \
        tc_forward<H>(out, lse, qkv, docStart, T, NH, NKV, window, scale);                                         \
    }
TC_FORWARD_KERNEL(32)
TC_FORWARD_KERNEL(64)
TC_FORWARD_KERNEL(80)
TC_FORWARD_KERNEL(96)
TC_FORWARD_KERNEL(128)

// the same with Gemma 2's soft cap of the scores (one more argument, float softcap > 0); HS = 128 in 64-query tiles
// (MT = 1: the 128-query tiles would spill more with the cap's code)
#define TC_FORWARD_CAP_KERNEL(H, MT)                                                                                \
    extern "C" __global__ void __launch_bounds__(128, 2) attention_tc_forward_cap_hs##H##_bf16(bf16_t* out,         \
            float* lse, const bf16_t* qkv, const int* docStart, int B, int T, int NH, int NKV, int HS, int window,  \
            float scale, float softcap) {                                                                           \
        tc_forward<H, MT, true>(out, lse, qkv, docStart, T, NH, NKV, window, scale, softcap);                       \
    }
TC_FORWARD_CAP_KERNEL(32, 2)
TC_FORWARD_CAP_KERNEL(64, 2)
TC_FORWARD_CAP_KERNEL(80, 2)
TC_FORWARD_CAP_KERNEL(96, 2)
TC_FORWARD_CAP_KERNEL(128, 1)

// HS = 256 (Gemma's heads): 64-query tiles, each warp 16 rows (two rows' worth of output registers would spill)
extern "C" __global__ void __launch_bounds__(128, 1) attention_tc_forward_hs256_bf16(bf16_t* out, float* lse,
        const bf16_t* qkv, const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale) {
    tc_forward<256, 1>(out, lse, qkv, docStart, T, NH, NKV, window, scale);
}

extern "C" __global__ void __launch_bounds__(128, 1) attention_tc_forward_cap_hs256_bf16(bf16_t* out, float* lse,
        const bf16_t* qkv, const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale,
        float softcap) {
    tc_forward<256, 1, true>(out, lse, qkv, docStart, T, NH, NKV, window, scale, softcap);
}

extern "C" __global__ void __launch_bounds__(128) attention_tc_backward_dq_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale) {
    TC_DISPATCH(tc_backward_dq, dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, window, scale)
}

// HS = 256's dq and dk/dv: kernels of their own (in the head-size switch their registers would be every head
// size's); dk/dv in two halves of the columns (each block 128 of them: all 256 would spill), with or without the cap
extern "C" __global__ void __launch_bounds__(128) attention_tc_backward_dq_hs256_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale) {
    tc_backward_dq<256>(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, window, scale);
}

extern "C" __global__ void __launch_bounds__(128) attention_tc_backward_dq_cap_hs256_bf16(bf16_t* dQkv,
        const bf16_t* dOut, const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T,
        int NH, int NKV, int HS, int window, float scale, float softcap) {
    tc_backward_dq<256, true>(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, window, scale, softcap);
}

extern "C" __global__ void __launch_bounds__(128) attention_tc_backward_dkdv_hs256_bf16(bf16_t* dQkv,
        const bf16_t* dOut, const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T,
        int NH, int NKV, int HS, int window, float scale, float* partial, int splits) {
    tc_backward_dkdv<256, false, 128>(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, window, scale, partial,
                                      splits);
}

extern "C" __global__ void __launch_bounds__(128) attention_tc_backward_dkdv_cap_hs256_bf16(bf16_t* dQkv,
        const bf16_t* dOut, const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T,
        int NH, int NKV, int HS, int window, float scale, float* partial, int splits, float softcap) {
    tc_backward_dkdv<256, true, 128>(dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, window, scale, partial,
                                     splits, softcap);
}

extern "C" __global__ void __launch_bounds__(128) attention_tc_backward_dkdv_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, float* partial, int splits) {
    TC_DISPATCH(tc_backward_dkdv, dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, window, scale, partial, splits)
}

// the dq and dk/dv kernels with Gemma 2's soft cap (one more argument, float softcap > 0, after the others)
#define TC_DISPATCH_CAP(F, ...)                   \
    switch (HS) {                                 \
        case 32: F<32, true>(__VA_ARGS__); break; \
        case 64: F<64, true>(__VA_ARGS__); break; \
        case 80: F<80, true>(__VA_ARGS__); break; \
        case 96: F<96, true>(__VA_ARGS__); break; \
        case 128: F<128, true>(__VA_ARGS__); break; \
        default: break;                           \
    }

extern "C" __global__ void __launch_bounds__(128) attention_tc_backward_dq_cap_bf16(bf16_t* dQkv, const bf16_t* dOut,
        const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,
        int HS, int window, float scale, float softcap) {
    TC_DISPATCH_CAP(tc_backward_dq, dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, window, scale, softcap)
}

extern "C" __global__ void __launch_bounds__(128) attention_tc_backward_dkdv_cap_bf16(bf16_t* dQkv,
        const bf16_t* dOut, const bf16_t* qkv, const float* lse, const float* delta, const int* docStart, int B, int T,
        int NH, int NKV, int HS, int window, float scale, float* partial, int splits, float softcap) {
    TC_DISPATCH_CAP(tc_backward_dkdv, dQkv, dOut, qkv, lse, delta, docStart, T, NH, NKV, window, scale, partial,
                    splits, softcap)
}

extern "C" __global__ void attention_tc_dkdv_sum_bf16(bf16_t* dQkv, const float* partial, int B, int T, int NH,
                                                      int NKV, int HS, int splits) {
    const int PW = 2 * NKV * HS; // a pair of columns a thread
    const long long i = ((long long) blockIdx.x * blockDim.x + threadIdx.x) * 2, n = (long long) B * T * PW;
    if (i >= n) return;
    const long long row = i / PW;
    const int col = (int) (i - row * PW);
    float lo = 0.0f, hi = 0.0f;
    for (int s = 0; s < splits; s++) {
        const float2 v = *reinterpret_cast<const float2*>(partial + s * n + i);
        lo += v.x;
        hi += v.y;
    }
    *reinterpret_cast<unsigned int*>(dQkv + row * ((long long) (NH + 2 * NKV) * HS) + NH * HS + col) = pack_bf16(lo, hi);
}
