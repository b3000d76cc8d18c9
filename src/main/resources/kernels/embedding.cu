// embedding.cu: token embedding lookup and its deterministic backward (scatter-add).
//
// Shapes: ids (N) int32, table / dTable (V, C) row-major, out / dOut (N, C). Pointers include offsets.
//
// embedding_forward_f32   (float* out, const int* ids, const float* table, int N, int C, int V)
// embedding_forward_bf16  (bf16*  out, const int* ids, const bf16*  table, int N, int C, int V)
//     grid = N, block = 256 (any multiple of 32, <= 1024), no dynamic shared memory.
//     out[n, :] = table[ids[n], :]. An id outside [0, V) yields a row of zeros (the host validates ids).
//
// embedding_backward_f32  (float* dTable, const int* ids, const float* dOut, int N, int C, int V)
// embedding_backward_bf16 (float* dTable, const int* ids, const bf16*  dOut, int N, int C, int V)
//     grid = N, block = 256 (any multiple of 32, <= 1024), no dynamic shared memory (static: 4 KB + 128 B).
//     dTable[ids[n], :] += dOut[n, :] for every n (fp32 accumulation, dTable is fp32 in both variants).
//     Deterministic, no atomics: block n acts only if n is the first row holding its id; it then adds the
//     rows m >= n with that id in increasing m, the same order of additions as the CPU backend's loop
//     (dTable[id] + dOut[m1] + dOut[m2] + ...). Costs O(N^2 / 256) id comparisons in all (cheap for N up to
//     some 10^4 rows per call) plus one pass over dOut. Rows with an id outside [0, V) are skipped.
// ---- preamble (identical in every kernel file; tools/kernels/check.sh verifies it) ----------------------
// Self-contained for NVRTC: no #include. bf16 values travel as their bit patterns in unsigned short.
#ifndef FSDP4J_KERNEL_PREAMBLE
#define FSDP4J_KERNEL_PREAMBLE
typedef unsigned short bf16_t;

__device__ __forceinline__ float bf16_to_f32(bf16_t h) {
    return __uint_as_float(((unsigned int) h) << 16);
}

/** Round to nearest, ties to even; a NaN stays a (quiet) NaN with its sign: as io.fsdp4j.tensor.Half.toBf16. */
__device__ __forceinline__ bf16_t f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (bf16_t) ((u >> 16) | 0x0040u);
    }
    return (bf16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float ld(const float* p) { return *p; }
__device__ __forceinline__ float ld(const bf16_t* p) { return bf16_to_f32(*p); }
__device__ __forceinline__ void st(float* p, float v) { *p = v; }
__device__ __forceinline__ void st(bf16_t* p, float v) { *p = f32_to_bf16(v); }

#define NEG_INF __int_as_float(0xff800000)
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

/**
 * Sum over the block, returned to every thread, in a fixed order (deterministic for a given blockDim).
 * blockDim.x must be a multiple of 32 (at most 1024); every thread of the block must call it.
 */
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float scratch[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); // scratch may still be read by an earlier call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_sum(lane < warps ? scratch[lane] : 0.0f);
}

__device__ __forceinline__ double block_sum_d(double v) {
    __shared__ double scratch_d[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) scratch_d[warp] = v;
    __syncthreads();
    return warp_sum_d(lane < warps ? scratch_d[lane] : 0.0);
}

/** Eight bf16 in a 16-byte word: element e of w is (e even) the low or (odd) the high half of w[e / 2]. */
__device__ __forceinline__ float bf16_of(const uint4& w, int e) {
    const unsigned int word = e < 2 ? w.x : e < 4 ? w.y : e < 6 ? w.z : w.w;
    return (e & 1) ? __uint_as_float(word & 0xffff0000u) : __uint_as_float(word << 16);
}

__device__ __forceinline__ unsigned int bf16_pair(float lo, float hi) {
    return (unsigned int) f32_to_bf16(lo) | ((unsigned int) f32_to_bf16(hi) << 16);
}

/** Eight floats rounded to bf16 into a 16-byte word, in bf16_of's order. */
__device__ __forceinline__ uint4 bf16_pack8(const float* r) {
    uint4 w;
    w.x = bf16_pair(r[0], r[1]);
    w.y = bf16_pair(r[2], r[3]);
    w.z = bf16_pair(r[4], r[5]);
    w.w = bf16_pair(r[6], r[7]);
    return w;
}

/** Grid-stride loop over [0, n) with a 64-bit index. */
#define GRID_STRIDE(i, n) \
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long) blockDim.x * gridDim.x)
#endif
// ---- end of preamble -------------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ void embedding_forward_impl(T* out, const int* ids, const T* table, int N, int C,
                                                       int V) {
    int n = blockIdx.x;
    int id = ids[n];
    T* o = out + (long long) n * C;
    if (id < 0 || id >= V) {
        for (int c = threadIdx.x; c < C; c += blockDim.x) st(o + c, 0.0f);
        return;
    }
    const T* row = table + (long long) id * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = row[c];
}

extern "C" __global__ void embedding_forward_f32(float* out, const int* ids, const float* table, int N, int C,
                                                 int V) {
    embedding_forward_impl(out, ids, table, N, C, V);
}

extern "C" __global__ void embedding_forward_bf16(bf16_t* out, const int* ids, const bf16_t* table, int N, int C,
                                                  int V) {
    embedding_forward_impl(out, ids, table, N, C, V);
}

template <typename T>
__device__ __forceinline__ void embedding_backward_impl(float* dTable, const int* ids, const T* dOut, int N, int C,
                                                        int V) {
    __shared__ int rows[1024];     // rows of the current chunk holding this block's id, in increasing order
    __shared__ int warpCount[32];
    const int n = blockIdx.x;
    const int id = ids[n];
    if (id < 0 || id >= V) return;
    // this block owns the id only if no earlier row holds it
    for (int base = 0; base < n; base += blockDim.x) {
        int m = base + threadIdx.x;
        if (__syncthreads_or(m < n && ids[m] == id)) return;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    float* dst = dTable + (long long) id * C;
    for (int base = n; base < N; base += blockDim.x) {
        int m = base + threadIdx.x;
        bool hit = m < N && ids[m] == id;
        unsigned int ballot = __ballot_sync(FULL_MASK, hit);
        if (lane == 0) warpCount[warp] = __popc(ballot);
        __syncthreads();
        int offset = 0, count = 0;
        for (int w = 0; w < warps; w++) {
            if (w < warp) offset += warpCount[w];
            count += warpCount[w];
        }
        if (hit) rows[offset + __popc(ballot & ((1u << lane) - 1u))] = m;
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            float acc = dst[c];
            for (int k = 0; k < count; k++) acc += ld(dOut + (long long) rows[k] * C + c);
            dst[c] = acc;
        }
        __syncthreads(); // rows and warpCount are rewritten by the next chunk
    }
}

extern "C" __global__ void embedding_backward_f32(float* dTable, const int* ids, const float* dOut, int N, int C,
                                                  int V) {
    embedding_backward_impl(dTable, ids, dOut, N, C, V);
}

extern "C" __global__ void embedding_backward_bf16(float* dTable, const int* ids, const bf16_t* dOut, int N, int C,
                                                   int V) {
    embedding_backward_impl(dTable, ids, dOut, N, C, V);
}
