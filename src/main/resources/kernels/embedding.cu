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
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

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

extern "C" __global__ void embedding_forward_f16(f16_t* out, const int* ids, const f16_t* table, int N, int C,
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

extern "C" __global__ void embedding_backward_f16(float* dTable, const int* ids, const f16_t* dOut, int N, int C,
                                                   int V) {
    embedding_backward_impl(dTable, ids, dOut, N, C, V);
}
