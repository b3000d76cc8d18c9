// swiglu.cu: SwiGLU over a packed gate|up activation.
//
// Shapes: gateUp, dGateUp (N, 2F): gate in columns [0, F), up in [F, 2F) of each row; out, dOut (N, F).
// Pointers include offsets. bf16 variants: bf16 storage, fp32 compute.
//   forward:  out = silu(gate) * up, silu(g) = g * sigmoid(g)
//   backward: dGate = dOut * up * sig * (1 + g * (1 - sig)) ; dUp = dOut * silu(g)   (dGateUp written)
//
// swiglu_forward_f32   (float* out,     const float* gateUp, int N, int F)
// swiglu_forward_bf16  (bf16*  out,     const bf16*  gateUp, int N, int F)
// swiglu_backward_f32  (float* dGateUp, const float* dOut, const float* gateUp, int N, int F)
// swiglu_backward_bf16 (bf16*  dGateUp, const bf16*  dOut, const bf16*  gateUp, int N, int F)
//     grid = N, block = 256 (any), no dynamic shared memory.
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

/** Grid-stride loop over [0, n) with a 64-bit index. */
#define GRID_STRIDE(i, n) \
    for (long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long) blockDim.x * gridDim.x)
#endif
// ---- end of preamble -------------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ void swiglu_forward_impl(T* out, const T* gateUp, int F) {
    const T* gu = gateUp + (long long) blockIdx.x * 2 * F;
    T* o = out + (long long) blockIdx.x * F;
    for (int j = threadIdx.x; j < F; j += blockDim.x) {
        float g = ld(gu + j), u = ld(gu + F + j);
        st(o + j, g / (1.0f + expf(-g)) * u);
    }
}

template <typename T>
__device__ __forceinline__ void swiglu_backward_impl(T* dGateUp, const T* dOut, const T* gateUp, int F) {
    const T* gu = gateUp + (long long) blockIdx.x * 2 * F;
    const T* dy = dOut + (long long) blockIdx.x * F;
    T* d = dGateUp + (long long) blockIdx.x * 2 * F;
    for (int j = threadIdx.x; j < F; j += blockDim.x) {
        float g = ld(gu + j), u = ld(gu + F + j), gy = ld(dy + j);
        float sig = 1.0f / (1.0f + expf(-g));
        st(d + j, gy * u * sig * (1.0f + g * (1.0f - sig)));
        st(d + F + j, gy * (g * sig));
    }
}

extern "C" __global__ void swiglu_forward_f32(float* out, const float* gateUp, int N, int F) {
    swiglu_forward_impl(out, gateUp, F);
}

extern "C" __global__ void swiglu_forward_bf16(bf16_t* out, const bf16_t* gateUp, int N, int F) {
    swiglu_forward_impl(out, gateUp, F);
}

extern "C" __global__ void swiglu_backward_f32(float* dGateUp, const float* dOut, const float* gateUp, int N, int F) {
    swiglu_backward_impl(dGateUp, dOut, gateUp, F);
}

extern "C" __global__ void swiglu_backward_bf16(bf16_t* dGateUp, const bf16_t* dOut, const bf16_t* gateUp, int N,
                                                int F) {
    swiglu_backward_impl(dGateUp, dOut, gateUp, F);
}
