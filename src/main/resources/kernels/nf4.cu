// nf4.cu: NF4 dequantization of a frozen base under QLoRA (lora.quantize: nf4), bit for bit as
// io.fsdp4j.tensor.Nf4 and CpuBackend.dequantizeNf4, which are bitsandbytes' dequantize_4bit (blocksize 64).
//
// Kernel                                 arguments (in order)                                    effect
// nf4_dequantize_f32 / _bf16 / _f16      T* out, const unsigned char* codes, const float* absmax,   out[i] = code book[
//                                        long long n                                             code of i] * absmax[i / 64]
//     codes: n / 2 bytes, two 4-bit codes a byte, element 2k in the high nibble of byte k, 2k + 1 in the low one
//     (bitsandbytes' order); absmax: n / 64 fp32 values; the product in fp32, rounded (rne) to bf16 or fp16 where
//     out is. One thread per byte; grid-stride: any grid of at least one block; suggested block 256,
//     grid min(ceil(n / 512), 65536).
#include "common.cuh" // bf16 as bits, st, GRID_STRIDE

// bitsandbytes' nf4_dequantization_lut (its get_4bit_type("nf4")), index = the 4-bit code
__constant__ float NF4_CODE[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
    -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
    0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
    0.7229568362236023f, 1.0f};

template <typename T>
__device__ __forceinline__ void nf4_dequantize_impl(T* out, const unsigned char* codes, const float* absmax,
                                                    long long n) {
    GRID_STRIDE(k, n / 2) {
        unsigned int b = codes[k];
        float scale = absmax[k / 32]; // 32 bytes, 64 elements, a block
        st(out + 2 * k, NF4_CODE[b >> 4] * scale);
        st(out + 2 * k + 1, NF4_CODE[b & 15u] * scale);
    }
}

extern "C" __global__ void nf4_dequantize_f32(float* out, const unsigned char* codes, const float* absmax,
                                              long long n) {
    nf4_dequantize_impl(out, codes, absmax, n);
}

extern "C" __global__ void nf4_dequantize_bf16(bf16_t* out, const unsigned char* codes, const float* absmax,
                                               long long n) {
    nf4_dequantize_impl(out, codes, absmax, n);
}

extern "C" __global__ void nf4_dequantize_f16(f16_t* out, const unsigned char* codes, const float* absmax,
                                              long long n) {
    nf4_dequantize_impl(out, codes, absmax, n);
}
