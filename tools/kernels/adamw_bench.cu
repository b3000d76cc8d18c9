// adamw_bench.cu: adamw.cu's kernels timed on one Qwen2.5-7B block's worth of fp32 state (233M elements, twelve
// segments laid out as a unit's parameters), beside a kernel that moves the same bytes with no arithmetic (the
// memory's ceiling). Realistic values (moments near those of training), not zeros: with zeros double sqrt takes a
// slower path. The table is built as io.fsdp4j.backend.CudaAdamW.launchOf builds it.
// Build (no GPU needed): nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -cudart static
//   -I src/main/resources/kernels tools/kernels/adamw_bench.cu -o adamw_bench
// Run on the GPU machine: ./adamw_bench (prints ms and TB/s for each kernel; 3 untimed, 10 timed launches).
#include <cmath>
#include <cstdio>
#include <cuda_runtime.h>
#include "adamw.cu"

extern "C" __global__ void fill(float* p, float* g, float* m, float* v, long long n) {
    GRID_STRIDE(i, n) {
        unsigned int h = (unsigned int) (i * 2654435761ULL) ^ (unsigned int) (i >> 17);
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        const float u = (h & 0xffffff) / 16777216.0f - 0.5f, w = ((h >> 8) & 0xffff) / 65536.0f;
        p[i] = 0.04f * u; g[i] = 2e-3f * u * w + 1e-5f; m[i] = 1e-4f * u; v[i] = 1e-7f * (w + 0.01f);
    }
}

// the same 28 bytes an element (four loads, three stores), no AdamW arithmetic
extern "C" __global__ void stream_x4(float4* p4, const float4* g4, float4* m4, float4* v4, long long n4, float s) {
    GRID_STRIDE(i, n4) {
        float4 p = p4[i], g = g4[i], mi = m4[i], vi = v4[i];
        p.x += s * g.x; mi.y += g.y; vi.z += g.z; p.w += mi.w * vi.w;
        p4[i] = p; m4[i] = mi; v4[i] = vi;
    }
}

#define CK(x) do { cudaError_t e = (x); if (e) { printf("error %s, line %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

int main() {
    const long long lens[12] = {3584, 12845056, 3584, 512, 1835008, 512, 1835008, 12845056, 3584, 67895296, 67895296,
                                67895296}; // norm, q, q bias, ..., gate, up, down: 233M in all
    long long n = 0;
    for (long long l : lens) n += l;
    float *p, *g, *m, *v; unsigned short* r; unsigned int* amax; int* seg;
    CK(cudaMalloc(&p, n * 4)); CK(cudaMalloc(&g, n * 4)); CK(cudaMalloc(&m, n * 4)); CK(cudaMalloc(&v, n * 4));
    CK(cudaMalloc(&r, n * 2)); CK(cudaMalloc(&amax, 64 * 4));
    fill<<<4096, 256>>>(p, g, m, v, n);
    CK(cudaDeviceSynchronize());
    const int blocks = (int) std::fmin(65536.0, std::ceil((n + 3) / 4 / 256.0));
    int table[48], grid = 0;
    long long at = 0;
    for (int s = 0; s < 12; s++) { // CudaAdamW.launchOf
        table[4 * s] = (int) at; table[4 * s + 1] = (int) lens[s]; table[4 * s + 2] = lens[s] > 4096;
        table[4 * s + 3] = grid;
        grid += (int) std::fmax(1.0, std::ceil((double) blocks * lens[s] / n));
        at += lens[s];
    }
    CK(cudaMalloc(&seg, sizeof table));
    CK(cudaMemcpy(seg, table, sizeof table, cudaMemcpyHostToDevice));
    cudaEvent_t a, b;
    cudaEventCreate(&a); cudaEventCreate(&b);
    auto time = [&](const char* name, double bytes, auto launch) {
        for (int w = 0; w < 3; w++) launch();
        cudaEventRecord(a);
        for (int k = 0; k < 10; k++) launch();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        ms /= 10;
        printf("%-36s %7.3f ms %6.2f TB/s  %s\n", name, ms, bytes / ms / 1e9, cudaGetErrorString(cudaGetLastError()));
    };
    const double b28 = 28.0 * n, b30 = 30.0 * n;
    const long long n4 = n / 4;
    time("stream_x4 (28 bytes, no arithmetic)", b28, [&] {
        stream_x4<<<blocks, 256>>>((float4*) p, (float4*) g, (float4*) m, (float4*) v, n4, 0.5f); });
    time("adamw_f32_x4 (one tensor)", b28, [&] {
        adamw_f32_x4<<<blocks, 256>>>(p, g, m, v, n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1e-4f, 0.3, 1.0f); });
    time("adamw_f32_segments", b28, [&] {
        adamw_f32_segments<<<grid, 256>>>(p, g, m, v, seg, 12, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1e-4f, 0.3, 1.0f); });
    time("adamw_f32_segments_bf16", b30, [&] {
        adamw_f32_segments_bf16<<<grid, 256>>>(p, g, m, v, (bf16_t*) r, seg, 12, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f,
                                               1e-4f, 0.3, 1.0f); });
    time("adamw_f32_segments_bf16_amax", b30, [&] {
        adamw_f32_segments_bf16_amax<<<grid, 256>>>(p, g, m, v, (bf16_t*) r, amax, seg, 12, 1e-4f, 0.9f, 0.95f,
                                                    1e-8f, 0.1f, 1e-4f, 0.3, 1.0f); });
    return 0;
}
