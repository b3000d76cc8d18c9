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
// swiglu_forward_bf16_x8, swiglu_backward_bf16_x8 (same arguments as the bf16 kernels): eight elements a thread
//     through 16-byte loads and stores, the same numbers; F % 8 == 0 and every pointer 16-byte aligned (the
//     caller checks).
// swiglu_forward_bf16_x8_amax, swiglu_backward_bf16_x8_amax (the same, then unsigned int* amax): also the largest
//     magnitude of the output as written (out, or the whole of dGateUp) maxed into *amax as fp8_amax_bf16x8 leaves
//     it (a float's bits; *amax zeroed before): an fp8 cast of the output needs no amax pass of its own.
#include "common.cuh" // bf16 as bits, ld/st, warp and block sums, GRID_STRIDE

__device__ __forceinline__ float swiglu_value(float g, float u) {
    return g / (1.0f + expf(-g)) * u;
}

/** dGate and dUp of one element. */
__device__ __forceinline__ void swiglu_grads(float g, float u, float gy, float& dGate, float& dUp) {
    const float sig = 1.0f / (1.0f + expf(-g));
    dGate = gy * u * sig * (1.0f + g * (1.0f - sig));
    dUp = gy * (g * sig);
}

template <typename T>
__device__ __forceinline__ void swiglu_forward_impl(T* out, const T* gateUp, int F) {
    const T* gu = gateUp + (long long) blockIdx.x * 2 * F;
    T* o = out + (long long) blockIdx.x * F;
    for (int j = threadIdx.x; j < F; j += blockDim.x) {
        st(o + j, swiglu_value(ld(gu + j), ld(gu + F + j)));
    }
}

template <typename T>
__device__ __forceinline__ void swiglu_backward_impl(T* dGateUp, const T* dOut, const T* gateUp, int F) {
    const T* gu = gateUp + (long long) blockIdx.x * 2 * F;
    const T* dy = dOut + (long long) blockIdx.x * F;
    T* d = dGateUp + (long long) blockIdx.x * 2 * F;
    for (int j = threadIdx.x; j < F; j += blockDim.x) {
        float dGate, dUp;
        swiglu_grads(ld(gu + j), ld(gu + F + j), ld(dy + j), dGate, dUp);
        st(d + j, dGate);
        st(d + F + j, dUp);
    }
}

/** The x8 forward, and with AMAX the largest magnitude of what it wrote maxed into *amax (fp8_amax_bf16x8's form). */
template <bool AMAX>
__device__ __forceinline__ void swiglu_forward_x8(bf16_t* out, const bf16_t* gateUp, int F, unsigned int* amax) {
    const int F8 = F / 8;
    const uint4* gate = reinterpret_cast<const uint4*>(gateUp + (long long) blockIdx.x * 2 * F);
    const uint4* up = gate + F8;
    uint4* o = reinterpret_cast<uint4*>(out + (long long) blockIdx.x * F);
    unsigned int halves = 0u;
    for (int j = threadIdx.x; j < F8; j += blockDim.x) {
        const uint4 g = gate[j], u = up[j];
        float r[8];
#pragma unroll
        for (int e = 0; e < 8; e++) r[e] = swiglu_value(bf16_of(g, e), bf16_of(u, e));
        const uint4 w = bf16_pack8(r);
        o[j] = w;
        if (AMAX) halves = max_halves8(halves, w);
    }
    if (AMAX) {
        __shared__ unsigned int block_max;
        amax_commit(amax, halves, block_max);
    }
}

/** The x8 backward, and with AMAX the largest magnitude of dGateUp as written maxed into *amax. */
template <bool AMAX>
__device__ __forceinline__ void swiglu_backward_x8(bf16_t* dGateUp, const bf16_t* dOut, const bf16_t* gateUp, int F,
                                                   unsigned int* amax) {
    const int F8 = F / 8;
    const uint4* gate = reinterpret_cast<const uint4*>(gateUp + (long long) blockIdx.x * 2 * F);
    const uint4* up = gate + F8;
    const uint4* dy = reinterpret_cast<const uint4*>(dOut + (long long) blockIdx.x * F);
    uint4* dGate = reinterpret_cast<uint4*>(dGateUp + (long long) blockIdx.x * 2 * F);
    uint4* dUp = dGate + F8;
    unsigned int halves = 0u;
    for (int j = threadIdx.x; j < F8; j += blockDim.x) {
        const uint4 g = gate[j], u = up[j], y = dy[j];
        float dg[8], du[8];
#pragma unroll
        for (int e = 0; e < 8; e++) swiglu_grads(bf16_of(g, e), bf16_of(u, e), bf16_of(y, e), dg[e], du[e]);
        const uint4 wg = bf16_pack8(dg), wu = bf16_pack8(du);
        dGate[j] = wg;
        dUp[j] = wu;
        if (AMAX) halves = max_halves8(max_halves8(halves, wg), wu);
    }
    if (AMAX) {
        __shared__ unsigned int block_max;
        amax_commit(amax, halves, block_max);
    }
}

extern "C" __global__ void swiglu_forward_bf16_x8(bf16_t* out, const bf16_t* gateUp, int N, int F) {
    swiglu_forward_x8<false>(out, gateUp, F, nullptr);
}

extern "C" __global__ void swiglu_forward_bf16_x8_amax(bf16_t* out, const bf16_t* gateUp, int N, int F,
                                                       unsigned int* amax) {
    swiglu_forward_x8<true>(out, gateUp, F, amax);
}

extern "C" __global__ void swiglu_backward_bf16_x8(bf16_t* dGateUp, const bf16_t* dOut, const bf16_t* gateUp, int N,
                                                   int F) {
    swiglu_backward_x8<false>(dGateUp, dOut, gateUp, F, nullptr);
}

extern "C" __global__ void swiglu_backward_bf16_x8_amax(bf16_t* dGateUp, const bf16_t* dOut, const bf16_t* gateUp,
                                                        int N, int F, unsigned int* amax) {
    swiglu_backward_x8<true>(dGateUp, dOut, gateUp, F, amax);
}

extern "C" __global__ void swiglu_forward_f32(float* out, const float* gateUp, int N, int F) {
    swiglu_forward_impl(out, gateUp, F);
}

extern "C" __global__ void swiglu_forward_bf16(bf16_t* out, const bf16_t* gateUp, int N, int F) {
    swiglu_forward_impl(out, gateUp, F);
}

extern "C" __global__ void swiglu_forward_f16(f16_t* out, const f16_t* gateUp, int N, int F) {
    swiglu_forward_impl(out, gateUp, F);
}

extern "C" __global__ void swiglu_backward_f32(float* dGateUp, const float* dOut, const float* gateUp, int N, int F) {
    swiglu_backward_impl(dGateUp, dOut, gateUp, F);
}

extern "C" __global__ void swiglu_backward_bf16(bf16_t* dGateUp, const bf16_t* dOut, const bf16_t* gateUp, int N,
                                                int F) {
    swiglu_backward_impl(dGateUp, dOut, gateUp, F);
}

extern "C" __global__ void swiglu_backward_f16(f16_t* dGateUp, const f16_t* dOut, const f16_t* gateUp, int N,
                                                int F) {
    swiglu_backward_impl(dGateUp, dOut, gateUp, F);
}

// ---- GeGLU (Gemma's gated MLP): the same layout, GELU's tanh approximation instead of SiLU ---------------
//
//   forward:  out = gelu(gate) * up, gelu(g) = 0.5 g (1 + tanh(k (g + c g^3))), k = sqrt(2/pi), c = 0.044715
//   backward: dGate = dOut * up * gelu'(gate) ; dUp = dOut * gelu(gate)   (dGateUp written), with
//             gelu'(g) = 0.5 (1 + t) + 0.5 g (1 - t^2) k (1 + 3 c g^2), t = tanh(k (g + c g^3))
// geglu_forward_f32   (float* out,     const float* gateUp, int N, int F)
// geglu_forward_bf16  (bf16*  out,     const bf16*  gateUp, int N, int F)
// geglu_backward_f32  (float* dGateUp, const float* dOut, const float* gateUp, int N, int F)
// geglu_backward_bf16 (bf16*  dGateUp, const bf16*  dOut, const bf16*  gateUp, int N, int F)
//     grid = N, block = 256 (any), no dynamic shared memory.

#define GEGLU_K 0.7978845608028654f
#define GEGLU_C 0.044715f

template <typename T>
__device__ __forceinline__ void geglu_forward_impl(T* out, const T* gateUp, int F) {
    const T* gu = gateUp + (long long) blockIdx.x * 2 * F;
    T* o = out + (long long) blockIdx.x * F;
    for (int j = threadIdx.x; j < F; j += blockDim.x) {
        const float g = ld(gu + j);
        const float t = tanhf(GEGLU_K * (g + GEGLU_C * g * g * g));
        st(o + j, 0.5f * g * (1.0f + t) * ld(gu + F + j));
    }
}

template <typename T>
__device__ __forceinline__ void geglu_backward_impl(T* dGateUp, const T* dOut, const T* gateUp, int F) {
    const T* gu = gateUp + (long long) blockIdx.x * 2 * F;
    const T* dy = dOut + (long long) blockIdx.x * F;
    T* d = dGateUp + (long long) blockIdx.x * 2 * F;
    for (int j = threadIdx.x; j < F; j += blockDim.x) {
        const float g = ld(gu + j), u = ld(gu + F + j), y = ld(dy + j);
        const float t = tanhf(GEGLU_K * (g + GEGLU_C * g * g * g));
        const float dgelu = 0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * GEGLU_K * (1.0f + 3.0f * GEGLU_C * g * g);
        st(d + j, y * u * dgelu);
        st(d + F + j, y * (0.5f * g * (1.0f + t)));
    }
}

extern "C" __global__ void geglu_forward_f32(float* out, const float* gateUp, int N, int F) {
    geglu_forward_impl(out, gateUp, F);
}

extern "C" __global__ void geglu_forward_bf16(bf16_t* out, const bf16_t* gateUp, int N, int F) {
    geglu_forward_impl(out, gateUp, F);
}

extern "C" __global__ void geglu_forward_f16(f16_t* out, const f16_t* gateUp, int N, int F) {
    geglu_forward_impl(out, gateUp, F);
}

extern "C" __global__ void geglu_backward_f32(float* dGateUp, const float* dOut, const float* gateUp, int N, int F) {
    geglu_backward_impl(dGateUp, dOut, gateUp, F);
}

extern "C" __global__ void geglu_backward_bf16(bf16_t* dGateUp, const bf16_t* dOut, const bf16_t* gateUp, int N,
                                               int F) {
    geglu_backward_impl(dGateUp, dOut, gateUp, F);
}

extern "C" __global__ void geglu_backward_f16(f16_t* dGateUp, const f16_t* dOut, const f16_t* gateUp, int N,
                                               int F) {
    geglu_backward_impl(dGateUp, dOut, gateUp, F);
}
