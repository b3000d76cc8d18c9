// fp8.cu: the casts of fp8 training (fsdp.param_dtype fp8), torchao's "tensorwise" recipe: a tensor's largest
// magnitude (amax) on the device, then its elements times scale = MAX / max(amax, 1e-12) rounded to e4m3 (MAX 448) or
// e5m2 (MAX 57344) with PTX's cvt.rn.satfinite (nearest even, saturated, NaN kept: io.fsdp4j.tensor.Fp8), written
// row-major and/or transposed (cuBLASLt's fp8 products take both operands K-major), and 1 / scale for cuBLASLt's
// A/B scale pointers. The host never waits: amax, the scale and its inverse stay on the device. Needs sm_89 or later
// (cvt to e4m3/e5m2); on earlier GPUs the kernels trap (fp8 is refused before a job starts there).
//
// Shapes: x (R, C) row-major; out (R, C) and outT (C, R) bytes, each may be null (0) for none. Pointers with offsets.
//
// fp8_amax_bf16 (unsigned int* amax, const bf16* x, long long n)
// fp8_amax_f32  (unsigned int* amax, const float* x, long long n)
//     grid-stride, block = 256, any grid. *amax = max(*amax, max |x|) as the bits of a non-negative float (their
//     order as unsigned ints is the floats' order, a NaN above infinity: a NaN element makes amax NaN). *amax must
//     be 0 before the first launch over a tensor.
// fp8_cast_e4m3_bf16 / fp8_cast_e4m3_f32 / fp8_cast_e5m2_bf16 / fp8_cast_e5m2_f32
//     (unsigned char* out, unsigned char* outT, float* inverseScale, const unsigned int* amax, const T* x, int R,
//      int C)
//     grid = (ceil(C / 32), ceil(R / 32)), block = 256 (8 warps), no dynamic shared memory. Each block casts a
//     32 x 32 tile: out[r, c] = outT[c, r] = fp8(x[r, c] * scale), scale = (float) (MAX / (double) max(amax, 1e-12)).
//     Block (0, 0)'s first thread writes *inverseScale = 1 / scale (fp32 division), if inverseScale is not null.
// fp8_amax_bf16x8 (unsigned int* amax, const uint4* x, long long n8)
//     as fp8_amax_bf16 over 8 * n8 bf16 elements, eight a thread at a time and four such loads in flight, two bf16
//     maxed at once by their bits (x 16-byte aligned; read with streaming loads: each byte is read once).
// fp8_cast_rows_e4m3_bf16x8 / fp8_cast_rows_e5m2_bf16x8
//     (uint2* out, float* inverseScale, const unsigned int* amax, const uint4* x, long long n8)
//     grid-stride, block = 256, any grid: out = the row-major cast of 8 * n8 bf16 elements (fp8_cast_*'s out, no
//     transpose), eight a thread at a time (x 16-byte and out 8-byte aligned); the inverse scale as there.
// fp8_cast_tiles_e4m3_bf16x8 / fp8_cast_tiles_e5m2_bf16x8
//     (uint2* out, uint2* outT, float* inverseScale, const unsigned int* amax, const uint4* x, int R, int C)
//     grid = (ceil(C / 64), ceil(R / 128)), block = 256, no dynamic shared memory: fp8_cast_*'s out and outT (each may
//     be null) of bf16 x with R and C multiples of 8, x 16-byte and out, outT 8-byte aligned. Each block casts a
//     128 x 64 tile, a thread reading eight elements of each of four rows (16 bytes each, all four loads issued
//     first) and writing their eight bytes to out, then, through shared memory, four times eight rows of one column
//     (8 bytes each) to outT. The inverse scale as fp8_cast_*'s.
//
// Rowwise (fsdp.fp8_recipe rowwise: a scale per row, or per column, instead of one per tensor; T bf16 or f32):
// fp8_cast_rowwise_e4m3_T / fp8_cast_rowwise_e5m2_T (unsigned char* out, float* inverse, const T* x, int R, int C)
//     grid = ceil(R / 8), block = 256: a warp a row, its amax then out[r, c] = fp8(x[r, c] * scale[r]) row-major,
//     scale[r] = MAX / max(amax of row r, 1e-12) as scale_of's, inverse[r] = 1 / scale[r].
// fp8_amax_columns_T (unsigned int* amax, const T* x, int R, int C)
//     grid = (ceil(C / 256), ceil(R / 64)), block = 256: amax[c] = max(amax[c], max over r of |x[r, c]|) as bits (as
//     fp8_amax_*'s); amax (C of them) must be 0 before the first launch over a tensor.
// fp8_cast_columns_e4m3_T / fp8_cast_columns_e5m2_T
//     (unsigned char* outT, float* inverse, const unsigned int* amax, const T* x, int R, int C)
//     grid = (ceil(C / 32), ceil(R / 32)), block = 256: outT[c, r] = fp8(x[r, c] * scale[c]) (x transposed), scale[c]
//     from amax[c] (fp8_amax_columns_*'s), inverse[c] = 1 / scale[c] (written by the blocks of the first row of tiles).
// The same three, eight bf16 a load (x 16-byte aligned, C a multiple of 8; for the columns' cast R too), as the
// tensorwise x8 kernels read: fp8_cast_rowwise_e4m3_bf16x8 / _e5m2_ (uint2* out, float* inverse, const uint4* x, int R,
// int C8) with grid = ceil(R / 8), block = 256; fp8_amax_columns_bf16x8 (unsigned int* amax, const uint4* x, int R,
// int C8) with grid = (ceil(C8 / 256), ceil(R / 64)), block = 256; fp8_cast_columns_e4m3_bf16x8 / _e5m2_ (uint2* outT,
// float* inverse, const unsigned int* amax, const uint4* x, int R, int C) with fp8_cast_tiles_*'s grid and block
// (128 x 64 tiles, outT only, each column its own scale).
#include "common.cuh" // bf16 as bits, ld, GRID_STRIDE, bf16_of, max_halves8, amax_commit

#define FP8_E4M3 0
#define FP8_E5M2 1

template <int FORMAT>
__device__ __forceinline__ unsigned char to_fp8(float v) {
#if __CUDA_ARCH__ >= 890
    unsigned short pair;
    if (FORMAT == FP8_E4M3) {
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(v)); // v: the low byte
    } else {
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(v));
    }
    return (unsigned char) (pair & 0xffu);
#else
    __trap();
    return 0;
#endif
}

template <typename T>
__device__ __forceinline__ void amax_impl(unsigned int* amax, const T* x, long long n) {
    __shared__ unsigned int block_max;
    if (threadIdx.x == 0) block_max = 0u;
    __syncthreads();
    unsigned int m = 0u;
    GRID_STRIDE(i, n) m = max(m, __float_as_uint(ld(x + i)) & 0x7fffffffu);
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(FULL_MASK, m, o));
    if ((threadIdx.x & 31) == 0) atomicMax(&block_max, m);
    __syncthreads();
    if (threadIdx.x == 0 && block_max != 0u) atomicMax(amax, block_max);
}

extern "C" __global__ void fp8_amax_bf16(unsigned int* amax, const bf16_t* x, long long n) { amax_impl(amax, x, n); }

extern "C" __global__ void fp8_amax_bf16x8(unsigned int* amax, const uint4* x, long long n8) {
    // four 16-byte loads in flight a thread before any max (the pass is bound by memory: more bytes on their way),
    // the magnitudes maxed two bf16 at a time (__vmaxu2 on their bits); the same amax as one element at a time
    unsigned int halves = 0u;
    const long long stride = (long long) blockDim.x * gridDim.x;
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n8; i += 4 * stride) {
        const uint4 a = __ldcs(x + i), b = __ldcs(x + i + stride), c = __ldcs(x + i + 2 * stride),
                    d = __ldcs(x + i + 3 * stride);
        halves = max_halves8(max_halves8(max_halves8(max_halves8(halves, a), b), c), d);
    }
    for (; i < n8; i += stride) halves = max_halves8(halves, __ldcs(x + i));
    __shared__ unsigned int block_max;
    amax_commit(amax, halves, block_max);
}

extern "C" __global__ void fp8_amax_f32(unsigned int* amax, const float* x, long long n) { amax_impl(amax, x, n); }

/** The scale for an amax given as its float's bits. */
template <int FORMAT>
__device__ __forceinline__ float scale_for(unsigned int amaxBits) {
    const double maxValue = FORMAT == FP8_E4M3 ? 448.0 : 57344.0;
    const double a = (double) __uint_as_float(amaxBits);
    return (float) (maxValue / (a < 1e-12 ? 1e-12 : a)); // a NaN amax stays NaN (as Java's Math.max)
}

template <int FORMAT>
__device__ __forceinline__ float scale_of(const unsigned int* amax) {
    return scale_for<FORMAT>(*amax);
}

/** Eight bf16 (bf16_of's order) times scale, each rounded to fp8: element e in byte e of the 8 (little-endian). */
template <int FORMAT>
__device__ __forceinline__ uint2 fp8_pack8(const uint4& w, float scale) {
    unsigned int b[8];
    #pragma unroll
    for (int e = 0; e < 8; e++) b[e] = to_fp8<FORMAT>(bf16_of(w, e) * scale);
    uint2 packed;
    packed.x = b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24);
    packed.y = b[4] | (b[5] << 8) | (b[6] << 16) | (b[7] << 24);
    return packed;
}

template <int FORMAT>
__device__ __forceinline__ void cast_rows_x8(uint2* out, float* inverseScale, const unsigned int* amax,
                                             const uint4* x, long long n8) {
    const float scale = scale_of<FORMAT>(amax);
    if (inverseScale != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *inverseScale = 1.0f / scale;
    GRID_STRIDE(i, n8) {
        out[i] = fp8_pack8<FORMAT>(x[i], scale);
    }
}

extern "C" __global__ void fp8_cast_rows_e4m3_bf16x8(uint2* out, float* inverseScale, const unsigned int* amax,
                                                     const uint4* x, long long n8) {
    cast_rows_x8<FP8_E4M3>(out, inverseScale, amax, x, n8);
}

extern "C" __global__ void fp8_cast_rows_e5m2_bf16x8(uint2* out, float* inverseScale, const unsigned int* amax,
                                                     const uint4* x, long long n8) {
    cast_rows_x8<FP8_E5M2>(out, inverseScale, amax, x, n8);
}

template <int FORMAT, typename T>
__device__ __forceinline__ void cast_impl(unsigned char* out, unsigned char* outT, float* inverseScale,
                                          const unsigned int* amax, const T* x, int R, int C) {
    __shared__ unsigned char tile[32][33];
    const float scale = scale_of<FORMAT>(amax);
    if (inverseScale != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
        *inverseScale = 1.0f / scale;
    }
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int j = warp; j < 32; j += 8) { // a warp a row of the tile: reads along x's rows
        const int r = r0 + j, c = c0 + lane;
        if (r < R && c < C) {
            const unsigned char v = to_fp8<FORMAT>(ld(x + (long long) r * C + c) * scale);
            if (out != nullptr) out[(long long) r * C + c] = v;
            tile[j][lane] = v;
        }
    }
    if (outT == nullptr) return; // uniform over the block: no thread waits at the barrier below
    __syncthreads();
    for (int j = warp; j < 32; j += 8) { // a warp a row of the transposed tile: writes along outT's rows
        const int c = c0 + j, r = r0 + lane;
        if (r < R && c < C) outT[(long long) c * R + r] = tile[lane][j];
    }
}

extern "C" __global__ void fp8_cast_e4m3_bf16(unsigned char* out, unsigned char* outT, float* inverseScale,
                                              const unsigned int* amax, const bf16_t* x, int R, int C) {
    cast_impl<FP8_E4M3>(out, outT, inverseScale, amax, x, R, C);
}

extern "C" __global__ void fp8_cast_e4m3_f32(unsigned char* out, unsigned char* outT, float* inverseScale,
                                             const unsigned int* amax, const float* x, int R, int C) {
    cast_impl<FP8_E4M3>(out, outT, inverseScale, amax, x, R, C);
}

extern "C" __global__ void fp8_cast_e5m2_bf16(unsigned char* out, unsigned char* outT, float* inverseScale,
                                              const unsigned int* amax, const bf16_t* x, int R, int C) {
    cast_impl<FP8_E5M2>(out, outT, inverseScale, amax, x, R, C);
}

extern "C" __global__ void fp8_cast_e5m2_f32(unsigned char* out, unsigned char* outT, float* inverseScale,
                                             const unsigned int* amax, const float* x, int R, int C) {
    cast_impl<FP8_E5M2>(out, outT, inverseScale, amax, x, R, C);
}

#define TILE_ROWS 128 // a block's tile: 128 rows x 64 columns, four row groups of 32 a thread

/**
 * The second half of the 128 x 64 transposing casts: the tile's fp8 bytes (in shared memory, rows 68 bytes apart) to
 * outT (C, R), thread t writing four times eight rows of one column (8 bytes each), after the block's barrier.
 */
__device__ __forceinline__ void write_tile_transposed(uint2* outT, const unsigned char (*tile)[68], int c0, int r0,
                                                      int t, int R, int C) {
    const int c = t >> 2; // a column of the tile; rows from (t & 3) * 8 in each group of 32, eight at a time
    if (c0 + c < C) {
        #pragma unroll
        for (int g = 0; g < 4; g++) {
            const int r = (t & 3) * 8 + 32 * g;
            if (r0 + r < R) {
                uint2 packed;
                packed.x = tile[r][c] | (tile[r + 1][c] << 8) | (tile[r + 2][c] << 16)
                        | ((unsigned int) tile[r + 3][c] << 24);
                packed.y = tile[r + 4][c] | (tile[r + 5][c] << 8) | (tile[r + 6][c] << 16)
                        | ((unsigned int) tile[r + 7][c] << 24);
                outT[((long long) (c0 + c) * R + r0 + r) / 8] = packed;
            }
        }
    }
}

template <int FORMAT>
__device__ __forceinline__ void cast_tiles_x8(uint2* out, uint2* outT, float* inverseScale, const unsigned int* amax,
                                              const uint4* x, int R, int C) {
    // a row 68 bytes: rows 17 words apart, so that the column reads below (8 columns x 4 row groups 8 rows apart a
    // warp) fall in distinct banks
    __shared__ __align__(16) unsigned char tile[TILE_ROWS][68];
    const float scale = scale_of<FORMAT>(amax);
    if (inverseScale != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *inverseScale = 1.0f / scale;
    const int c0 = blockIdx.x * 64, r0 = blockIdx.y * TILE_ROWS, t = threadIdx.x;
    {
        const int r = t >> 3, c = (t & 7) * 8; // rows r, r + 32, r + 64, r + 96 of the tile, eight columns from c
        uint4 w[4];
        #pragma unroll
        for (int g = 0; g < 4; g++) { // the four loads first: more bytes in flight
            if (r0 + r + 32 * g < R && c0 + c < C) w[g] = x[((long long) (r0 + r + 32 * g) * C + c0 + c) / 8];
        }
        #pragma unroll
        for (int g = 0; g < 4; g++) {
            const int rg = r + 32 * g;
            if (r0 + rg < R && c0 + c < C) { // R and C multiples of 8: eight columns are all in or all out
                const uint2 packed = fp8_pack8<FORMAT>(w[g], scale);
                if (out != nullptr) out[((long long) (r0 + rg) * C + c0 + c) / 8] = packed;
                *reinterpret_cast<unsigned int*>(&tile[rg][c]) = packed.x; // 4-byte aligned: 68 rg + c
                *reinterpret_cast<unsigned int*>(&tile[rg][c + 4]) = packed.y;
            }
        }
    }
    if (outT == nullptr) return; // uniform over the block: no thread waits at the barrier below
    __syncthreads();
    write_tile_transposed(outT, tile, c0, r0, t, R, C);
}

extern "C" __global__ void fp8_cast_tiles_e4m3_bf16x8(uint2* out, uint2* outT, float* inverseScale,
                                                      const unsigned int* amax, const uint4* x, int R, int C) {
    cast_tiles_x8<FP8_E4M3>(out, outT, inverseScale, amax, x, R, C);
}

extern "C" __global__ void fp8_cast_tiles_e5m2_bf16x8(uint2* out, uint2* outT, float* inverseScale,
                                                      const unsigned int* amax, const uint4* x, int R, int C) {
    cast_tiles_x8<FP8_E5M2>(out, outT, inverseScale, amax, x, R, C);
}

// ---- rowwise --------------------------------------------------------------------------------------------------

template <int FORMAT, typename T>
__device__ __forceinline__ void cast_rowwise(unsigned char* out, float* inverse, const T* x, int R, int C) {
    const int r = (int) (((long long) blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (r >= R) return; // a whole warp: no barrier below
    const T* row = x + (long long) r * C;
    unsigned int m = 0u;
    for (int c = lane; c < C; c += 32) m = max(m, __float_as_uint(ld(row + c)) & 0x7fffffffu);
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(FULL_MASK, m, o));
    const float scale = scale_for<FORMAT>(m);
    if (lane == 0) inverse[r] = 1.0f / scale;
    unsigned char* o = out + (long long) r * C;
    for (int c = lane; c < C; c += 32) o[c] = to_fp8<FORMAT>(ld(row + c) * scale);
}

template <typename T>
__device__ __forceinline__ void amax_columns(unsigned int* amax, const T* x, int R, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int r0 = blockIdx.y * 64, r1 = min(R, r0 + 64);
    unsigned int m = 0u;
    for (int r = r0; r < r1; r++) m = max(m, __float_as_uint(ld(x + (long long) r * C + c)) & 0x7fffffffu);
    if (m != 0u) atomicMax(amax + c, m);
}

template <int FORMAT, typename T>
__device__ __forceinline__ void cast_columns(unsigned char* outT, float* inverse, const unsigned int* amax,
                                             const T* x, int R, int C) {
    __shared__ unsigned char tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int c = c0 + lane;
    const float scale = c < C ? scale_for<FORMAT>(amax[c]) : 0.0f;
    if (blockIdx.y == 0 && warp == 0 && c < C) inverse[c] = 1.0f / scale;
    for (int j = warp; j < 32; j += 8) { // a warp a row of the tile: reads along x's rows, a scale a column
        const int r = r0 + j;
        if (r < R && c < C) tile[j][lane] = to_fp8<FORMAT>(ld(x + (long long) r * C + c) * scale);
    }
    __syncthreads();
    for (int j = warp; j < 32; j += 8) { // a warp a row of the transposed tile: writes along outT's rows
        const int cc = c0 + j, r = r0 + lane;
        if (r < R && cc < C) outT[(long long) cc * R + r] = tile[lane][j];
    }
}

#define FP8_ROWWISE(F, FMT, TN, T)                                                                                     \
    extern "C" __global__ void fp8_cast_rowwise_##F##_##TN(unsigned char* out, float* inverse, const T* x, int R,  \
                                                           int C) {                                                \
        cast_rowwise<FMT>(out, inverse, x, R, C);                                                                  \
    }                                                                                                              \
    extern "C" __global__ void fp8_cast_columns_##F##_##TN(unsigned char* outT, float* inverse,                    \
                                                           const unsigned int* amax, const T* x, int R, int C) {  \
        cast_columns<FMT>(outT, inverse, amax, x, R, C);                                                           \
    }
FP8_ROWWISE(e4m3, FP8_E4M3, bf16, bf16_t)
FP8_ROWWISE(e5m2, FP8_E5M2, bf16, bf16_t)
FP8_ROWWISE(e4m3, FP8_E4M3, f32, float)
FP8_ROWWISE(e5m2, FP8_E5M2, f32, float)

extern "C" __global__ void fp8_amax_columns_bf16(unsigned int* amax, const bf16_t* x, int R, int C) {
    amax_columns(amax, x, R, C);
}

extern "C" __global__ void fp8_amax_columns_f32(unsigned int* amax, const float* x, int R, int C) {
    amax_columns(amax, x, R, C);
}

// ---- rowwise, eight bf16 a load ---------------------------------------------------------------------------------

template <int FORMAT>
__device__ __forceinline__ void cast_rowwise_x8(uint2* out, float* inverse, const uint4* x, int R, int C8) {
    const int r = (int) (((long long) blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (r >= R) return; // a whole warp: no barrier below
    const uint4* row = x + (long long) r * C8;
    unsigned int halves = 0u;
    for (int c = lane; c < C8; c += 32) halves = max_halves8(halves, row[c]);
    unsigned int m = max(halves >> 16, halves & 0xffffu) << 16; // the bf16's bits as a float's
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(FULL_MASK, m, o));
    const float scale = scale_for<FORMAT>(m);
    if (lane == 0) inverse[r] = 1.0f / scale;
    uint2* o = out + (long long) r * C8;
    for (int c = lane; c < C8; c += 32) o[c] = fp8_pack8<FORMAT>(row[c], scale); // the row again: from the caches
}

extern "C" __global__ void fp8_cast_rowwise_e4m3_bf16x8(uint2* out, float* inverse, const uint4* x, int R, int C8) {
    cast_rowwise_x8<FP8_E4M3>(out, inverse, x, R, C8);
}

extern "C" __global__ void fp8_cast_rowwise_e5m2_bf16x8(uint2* out, float* inverse, const uint4* x, int R, int C8) {
    cast_rowwise_x8<FP8_E5M2>(out, inverse, x, R, C8);
}

extern "C" __global__ void fp8_amax_columns_bf16x8(unsigned int* amax, const uint4* x, int R, int C8) {
    const int c8 = blockIdx.x * blockDim.x + threadIdx.x; // columns 8 c8 .. 8 c8 + 7
    if (c8 >= C8) return;
    const int r0 = blockIdx.y * 64, r1 = min(R, r0 + 64);
    uint4 m = make_uint4(0u, 0u, 0u, 0u); // each half the largest magnitude of one column (bf16 bits)
    for (int r = r0; r < r1; r++) {
        const uint4 w = x[(long long) r * C8 + c8];
        m.x = max_halves(m.x, w.x);
        m.y = max_halves(m.y, w.y);
        m.z = max_halves(m.z, w.z);
        m.w = max_halves(m.w, w.w);
    }
    const unsigned int words[4] = {m.x, m.y, m.z, m.w};
    unsigned int* a = amax + 8LL * c8;
    #pragma unroll
    for (int e = 0; e < 4; e++) { // element 2e in the low half (little-endian), 2e + 1 in the high
        const unsigned int lo = words[e] << 16, hi = words[e] & 0xffff0000u;
        if (lo != 0u) atomicMax(a + 2 * e, lo);
        if (hi != 0u) atomicMax(a + 2 * e + 1, hi);
    }
}

/** Eight bf16 (bf16_of's order), element e times scale[e], each rounded to fp8 as fp8_pack8. */
template <int FORMAT>
__device__ __forceinline__ uint2 fp8_pack8_scaled(const uint4& w, const float* scale) {
    unsigned int b[8];
    #pragma unroll
    for (int e = 0; e < 8; e++) b[e] = to_fp8<FORMAT>(bf16_of(w, e) * scale[e]);
    uint2 packed;
    packed.x = b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24);
    packed.y = b[4] | (b[5] << 8) | (b[6] << 16) | (b[7] << 24);
    return packed;
}

template <int FORMAT>
__device__ __forceinline__ void cast_columns_x8(uint2* outT, float* inverse, const unsigned int* amax, const uint4* x,
                                                int R, int C) {
    __shared__ __align__(16) unsigned char tile[TILE_ROWS][68]; // as cast_tiles_x8's
    const int c0 = blockIdx.x * 64, r0 = blockIdx.y * TILE_ROWS, t = threadIdx.x;
    {
        const int r = t >> 3, c = (t & 7) * 8; // rows r, r + 32, r + 64, r + 96 of the tile, eight columns from c
        float scale[8];
        #pragma unroll
        for (int e = 0; e < 8; e++) scale[e] = c0 + c < C ? scale_for<FORMAT>(amax[c0 + c + e]) : 0.0f;
        if (blockIdx.y == 0 && r == 0 && c0 + c < C) {
            #pragma unroll
            for (int e = 0; e < 8; e++) inverse[c0 + c + e] = 1.0f / scale[e];
        }
        uint4 w[4];
        #pragma unroll
        for (int g = 0; g < 4; g++) {
            if (r0 + r + 32 * g < R && c0 + c < C) w[g] = x[((long long) (r0 + r + 32 * g) * C + c0 + c) / 8];
        }
        #pragma unroll
        for (int g = 0; g < 4; g++) {
            const int rg = r + 32 * g;
            if (r0 + rg < R && c0 + c < C) {
                const uint2 packed = fp8_pack8_scaled<FORMAT>(w[g], scale);
                *reinterpret_cast<unsigned int*>(&tile[rg][c]) = packed.x;
                *reinterpret_cast<unsigned int*>(&tile[rg][c + 4]) = packed.y;
            }
        }
    }
    __syncthreads();
    write_tile_transposed(outT, tile, c0, r0, t, R, C);
}

extern "C" __global__ void fp8_cast_columns_e4m3_bf16x8(uint2* outT, float* inverse, const unsigned int* amax,
                                                        const uint4* x, int R, int C) {
    cast_columns_x8<FP8_E4M3>(outT, inverse, amax, x, R, C);
}

extern "C" __global__ void fp8_cast_columns_e5m2_bf16x8(uint2* outT, float* inverse, const unsigned int* amax,
                                                        const uint4* x, int R, int C) {
    cast_columns_x8<FP8_E5M2>(outT, inverse, amax, x, R, C);
}
