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
__device__ __forceinline__ void bias_add_impl(T* out, const T* bias, int O) {
    T* row = out + (long long) blockIdx.x * O;
    for (int o = threadIdx.x; o < O; o += blockDim.x) st(row + o, ld(row + o) + ld(bias + o));
}

extern "C" __global__ void bias_add_f32(float* out, const float* bias, int N, int O) { bias_add_impl(out, bias, O); }

extern "C" __global__ void bias_add_bf16(bf16_t* out, const bf16_t* bias, int N, int O) {
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

extern "C" __global__ void bias_grad_finish(float* dBias, const float* partials, int R, int O, int accumulate) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= O) return;
    float acc = 0.0f;
    for (int r = 0; r < R; r++) acc += partials[(long long) r * O + o];
    dBias[o] = accumulate ? dBias[o] + acc : acc;
}
