// The tensor cores' rate on Hopper for the wgmma shapes attention_sm90.cu's backward issues, with one or two
// warpgroups issuing at once (the kernels run two consumer warpgroups a block): a step of 8 products (K = 128) from
// a fixed tile, repeated; one block a multiprocessor. Tells whether the products with both operands in shared memory
// (S^T = K Q^T, dP^T = V dOut^T: m64n64k16, 4 KB read a product) run below those with A in registers (dv += P^T dOut,
// dk += dS^T Q: m64n128k16, 4 KB read for twice the work) when two warpgroups share a multiprocessor's shared memory.
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o wgmma_rates tools/kernels/wgmma_rates.cu
// Run on an H100 or H200: ./wgmma_rates. TFLOP/s over the whole GPU. On an H100 (2026-11-27): 957-988 for every
// shape with one warpgroup issuing or two: the operands in shared memory do not hold the products back.
#include <cstdio>
#include <cuda_runtime.h>
#include "../../src/main/resources/kernels/attention_sm90.cu"

#define REPS 4096

template <int KIND> // 0: ss m64n64k16, 1: ss m64n128k16, 2: rs m64n128k16 (B transposed), 3: rs m64n64k16
__global__ void __launch_bounds__(256, 1) rates(int warpgroups, float* sink) {
    extern __shared__ __align__(1024) unsigned char raw[];
    const unsigned int base = (sm90_smem(raw) + 1023) & ~1023u;
    for (int i = threadIdx.x; i < 65536 / 4; i += blockDim.x) // 64 KB of small bf16 values
        reinterpret_cast<unsigned int*>(raw + (base - sm90_smem(raw)))[i] = 0x3c003c00u ^ (i * 2654435761u & 0x00ff00ffu);
    __syncthreads();
    const int wg = threadIdx.x >> 7;
    if (wg >= warpgroups) return;
    const unsigned int sA = base, sB = base + 32768;
    float d[64];
    for (int i = 0; i < 64; i++) d[i] = 0.0f;
    unsigned int a[32];
    for (int i = 0; i < 32; i++) a[i] = 0x3c003c00u + i;
    for (int r = 0; r < REPS; r++) {
        sm90_fence_regs(d);
        sm90_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 8; kk++) {
            const unsigned long long da = sm90_desc(sA + (kk >> 2) * 8192 + (kk & 3) * 32, 16, 1024);
            if (KIND == 0) {
                sm90_wgmma_ss_n64(*reinterpret_cast<float(*)[32]>(d), da,
                                  sm90_desc(sB + (kk >> 2) * 8192 + (kk & 3) * 32, 16, 1024), 1);
            } else if (KIND == 1) {
                sm90_wgmma_ss_n128(d, da, sm90_desc(sB + (kk >> 2) * 16384 + (kk & 3) * 32, 16, 1024), 1);
            } else if (KIND == 2) {
                sm90_wgmma_rs_n128(d, a + 4 * (kk & 7), sm90_desc(sB + kk * 2048, 8192, 1024));
            } else {
                sm90_wgmma_rs_n64(*reinterpret_cast<float(*)[32]>(d), a + 4 * (kk & 7), sm90_desc(sB + kk * 2048, 8192, 1024));
            }
        }
        sm90_wgmma_commit();
        sm90_wgmma_wait<1>();
    }
    sm90_wgmma_wait<0>();
    sm90_fence_regs(d);
    float s = 0;
    for (int i = 0; i < 64; i++) s += d[i];
    if (s == 1.2345f) sink[threadIdx.x] = s;
}

template <int KIND>
static void run(const char* name, int n, int warpgroups, float* sink, int sms) {
    cudaFuncSetAttribute(rates<KIND>, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024);
    rates<KIND><<<sms, 256, 100 * 1024>>>(warpgroups, sink);
    cudaEvent_t a, z;
    cudaEventCreate(&a); cudaEventCreate(&z);
    cudaEventRecord(a);
    for (int i = 0; i < 3; i++) rates<KIND><<<sms, 256, 100 * 1024>>>(warpgroups, sink);
    cudaEventRecord(z);
    cudaEventSynchronize(z);
    float ms; cudaEventElapsedTime(&ms, a, z);
    const double flop = 3.0 * sms * warpgroups * (double) REPS * 8 * 2.0 * 64 * n * 16;
    std::printf("%-34s warpgroups %d: %7.1f TFLOP/s (%s)\n", name, warpgroups, flop / (ms / 1e3) / 1e12,
                cudaGetErrorString(cudaGetLastError()));
}

int main() {
    cudaDeviceProp p; cudaGetDeviceProperties(&p, 0);
    std::printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
    float* sink; cudaMalloc(&sink, 4096);
    for (int wgs = 1; wgs <= 2; wgs++) {
        run<0>("ss m64n64k16 (S^T, dP^T)", 64, wgs, sink, p.multiProcessorCount);
        run<1>("ss m64n128k16", 128, wgs, sink, p.multiProcessorCount);
        run<3>("rs m64n64k16", 64, wgs, sink, p.multiProcessorCount);
        run<2>("rs m64n128k16 (dv, dk)", 128, wgs, sink, p.multiProcessorCount);
    }
    return 0;
}
