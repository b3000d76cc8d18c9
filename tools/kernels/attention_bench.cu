// Times fsdp4j's tensor-core attention kernels (forward, backward dq, backward dk/dv) at the Qwen2.5 presets' shapes
// and checks them on causal, windowed and packed-document inputs against a baseline: another version of
// attention_tc.cu (for instance the last commit's, whose kernels CudaOpsTest checked against the CPU backend), made
// by tools/kernels/attention_baseline.sh. Build and run on the GPU machine (nvcc there: /usr/local/cuda-13.0/bin):
//   bash tools/kernels/attention_baseline.sh HEAD /tmp/attention_baseline.cu
//   nvcc -O3 -arch=sm_90 -I/tmp -o /tmp/attention_bench tools/kernels/attention_bench.cu && /tmp/attention_bench
// With --sweep: only the current kernels, over head counts, head sizes and sequence lengths (see sweep()).
// TFLOP/s by fsdp4j's convention (docs/plan.md): causal forward 4 * heads * head_dim * (T + 1) / 2 per token,
// backward 2.5 times that (here split into its dq and dk/dv kernels, each counted against that whole).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#include "../../src/main/resources/kernels/attention_tc.cu"
#include "../../src/main/resources/kernels/attention.cu"
#include "attention_baseline.cu" // tools/kernels/attention_baseline.sh writes it

#define CHECK(x) do { cudaError_t err_ = (x); if (err_ != cudaSuccess) { \
    std::printf("%s failed: %s\n", #x, cudaGetErrorString(err_)); std::exit(1); } } while (0)

typedef void (*Forward)(bf16_t*, float*, const bf16_t*, const int*, int, int, int, int, int, int, float);
typedef void (*Dq)(bf16_t*, const bf16_t*, const bf16_t*, const float*, const float*, const int*, int, int, int, int,
                   int, int, float);
typedef void (*Dkdv)(bf16_t*, const bf16_t*, const bf16_t*, const float*, const float*, const int*, int, int, int, int,
                     int, int, float, float*, int);
typedef void (*DkdvSum)(bf16_t*, const float*, int, int, int, int, int, int);

struct Kernels { const char* name; Forward fwd; int fwdRows, fwdShared; Dq dq; Dkdv dkdv; DkdvSum sum;
                 Forward (*fwdFor)(int HS); };

/** The current file's forward for a head size (one kernel each). */
static Forward currentForward(int HS) {
    switch (HS) {
        case 32: return attention_tc_forward_hs32_bf16;
        case 64: return attention_tc_forward_hs64_bf16;
        case 80: return attention_tc_forward_hs80_bf16;
        case 96: return attention_tc_forward_hs96_bf16;
        default: return attention_tc_forward_hs128_bf16;
    }
}

static unsigned short to_bf16(float f) { unsigned int u; std::memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return (unsigned short) (u >> 16); }
static float from_bf16(unsigned short h) { unsigned int u = (unsigned int) h << 16; float f; std::memcpy(&f, &u, 4); return f; }

static float timeMs(void (*launch)(void*), void* arg) {
    for (int w = 0; w < 3; w++) launch(arg);
    cudaEvent_t a, z; cudaEventCreate(&a); cudaEventCreate(&z);
    cudaEventRecord(a);
    const int reps = 20;
    for (int r = 0; r < reps; r++) launch(arg);
    cudaEventRecord(z); CHECK(cudaEventSynchronize(z));
    float ms; cudaEventElapsedTime(&ms, a, z);
    cudaEventDestroy(a); cudaEventDestroy(z);
    return ms / reps;
}

struct Run {
    const Kernels* k; int B, T, NH, NKV, HS, window, splits; float scale;
    bf16_t *qkv, *out, *dOut, *dQkv; float *lse, *delta, *partial; int* starts;
};

static void launchFwd(void* p) {
    Run& r = *(Run*) p;
    dim3 grid((r.T + r.k->fwdRows - 1) / r.k->fwdRows, r.NH, r.B);
    Forward f = r.k->fwdFor ? r.k->fwdFor(r.HS) : r.k->fwd;
    f<<<grid, 128, r.k->fwdShared * (r.HS + 8)>>>(r.out, r.lse, r.qkv, r.starts, r.B, r.T, r.NH, r.NKV, r.HS, r.window, r.scale);
}
static void launchDq(void* p) {
    Run& r = *(Run*) p;
    r.k->dq<<<dim3((r.T + 63) / 64, r.NH, r.B), 128, 768 * (r.HS + 8)>>>(r.dQkv, r.dOut, r.qkv, r.lse, r.delta, r.starts,
            r.B, r.T, r.NH, r.NKV, r.HS, r.window, r.scale);
}
static void launchDkdv(void* p) {
    Run& r = *(Run*) p;
    r.k->dkdv<<<dim3((r.T + 63) / 64, r.NKV * r.splits, r.B), 128, 768 * (r.HS + 8) + 1024>>>(r.dQkv, r.dOut, r.qkv,
            r.lse, r.delta, r.starts, r.B, r.T, r.NH, r.NKV, r.HS, r.window, r.scale, r.splits > 1 ? r.partial : nullptr, r.splits);
    if (r.splits > 1) {
        const long long n = (long long) r.B * r.T * r.NKV * r.HS;
        r.k->sum<<<(unsigned) ((n + 255) / 256), 256>>>(r.dQkv, r.partial, r.B, r.T, r.NH, r.NKV, r.HS, r.splits);
    }
}

static std::vector<unsigned short> fetch(const bf16_t* p, size_t n) {
    std::vector<unsigned short> h(n);
    CHECK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
    return h;
}

static void worst(const std::vector<unsigned short>& a, const std::vector<unsigned short>& b, double& diff, double& scale) {
    diff = 0; scale = 0;
    for (size_t i = 0; i < a.size(); i++) {
        const double x = from_bf16(a[i]), y = from_bf16(b[i]), d = std::fabs(x - y);
        if (!(d <= diff)) diff = std::isnan(d) ? INFINITY : d;
        scale = std::fmax(scale, std::fabs(y));
    }
}

/** dk/dv's split of each key head's query-head group, as CudaBackend.dkdvSplits chooses it. */
static int dkdvSplits(int B, int T, int NH, int NKV) {
    const int group = NH / NKV;
    for (int c = 1; c < group; c++) {
        if (group % c == 0 && (long long) ((T + 63) / 64) * NKV * B * c >= 1024) return c;
    }
    return group;
}

/**
 * --sweep: the current kernels' times and rates over head counts, head sizes and sequence lengths (batch 1,
 * causal, random inputs): the measurements behind fsdp4j plan's attention rates (docs/plan.md). One line each:
 * HS NH NKV T forward_ms dq_ms dkdv_ms (dk/dv with its split sum) forward_tflops backward_tflops.
 */
static int sweep(const Kernels& k) {
    std::printf("sweep HS NH NKV T forward_ms dq_ms dkdv_ms forward_tflops backward_tflops\n");
    for (int HS : {64, 128}) {
        for (int NH : {4, 8, 12, 14, 16, 24, 28, 32, 40, 64}) {
            const int NKV = NH <= 16 ? 2 : 4;
            for (int T : {512, 1024, 2048, 4096, 8192}) {
                const int B = 1, W = (NH + 2 * NKV) * HS, splits = dkdvSplits(B, T, NH, NKV);
                const size_t nqkv = (size_t) B * T * W, nout = (size_t) B * T * NH * HS, nlse = (size_t) B * NH * T;
                std::vector<unsigned short> h(nqkv);
                srand(11);
                for (auto& v : h) v = to_bf16((rand() / (float) RAND_MAX) * 4 - 2);
                Run run = {&k, B, T, NH, NKV, HS, 0, splits, 1.0f / std::sqrt((float) HS)};
                CHECK(cudaMalloc(&run.qkv, nqkv * 2)); CHECK(cudaMalloc(&run.out, nout * 2));
                CHECK(cudaMalloc(&run.dOut, nout * 2)); CHECK(cudaMalloc(&run.dQkv, nqkv * 2));
                CHECK(cudaMalloc(&run.lse, nlse * 4)); CHECK(cudaMalloc(&run.delta, nlse * 4));
                CHECK(cudaMalloc(&run.partial, (size_t) splits * B * T * 2 * NKV * HS * 4));
                run.starts = nullptr;
                CHECK(cudaMemcpy(run.qkv, h.data(), nqkv * 2, cudaMemcpyHostToDevice));
                CHECK(cudaMemcpy(run.dOut, h.data(), nout * 2, cudaMemcpyHostToDevice)); // any values in range
                launchFwd(&run);
                attention_backward_delta_bf16<<<(unsigned) ((nlse + 7) / 8), 256>>>(run.delta, run.dOut, run.out, B, T, NH, HS);
                CHECK(cudaGetLastError());
                CHECK(cudaDeviceSynchronize());
                const float fMs = timeMs(launchFwd, &run), qMs = timeMs(launchDq, &run), kMs = timeMs(launchDkdv, &run);
                const double fwdFlops = 4.0 * NH * HS * (double) T * (T + 1) / 2 * B;
                std::printf("sweep %d %d %d %d %.4f %.4f %.4f %.1f %.1f\n", HS, NH, NKV, T, fMs, qMs, kMs,
                            fwdFlops / fMs / 1e9, 2.5 * fwdFlops / (qMs + kMs) / 1e9);
                cudaFree(run.qkv); cudaFree(run.out); cudaFree(run.dOut); cudaFree(run.dQkv); cudaFree(run.lse);
                cudaFree(run.delta); cudaFree(run.partial);
            }
        }
    }
    return 0;
}

int main(int argc, char** argv) {
    Kernels current = {"current", nullptr, 128, 768, attention_tc_backward_dq_bf16, attention_tc_backward_dkdv_bf16,
                       attention_tc_dkdv_sum_bf16, currentForward};
    Kernels base = {"baseline", nullptr, BASELINE_FORWARD_ROWS, BASELINE_FORWARD_SHARED,
                    baseline::baseline_attention_tc_backward_dq_bf16, baseline::baseline_attention_tc_backward_dkdv_bf16,
                    baseline::baseline_attention_tc_dkdv_sum_bf16, baseline::forward};
    const Kernels* all[] = {&base, &current};
    for (int hs : {32, 64, 80, 96, 128}) {
        CHECK(cudaFuncSetAttribute((const void*) currentForward(hs), cudaFuncAttributeMaxDynamicSharedMemorySize, 768 * 136));
        CHECK(cudaFuncSetAttribute((const void*) baseline::forward(hs), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   BASELINE_FORWARD_SHARED * 136));
    }
    for (const Kernels* k : all) {
        if (k->fwd) CHECK(cudaFuncSetAttribute((const void*) k->fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, k->fwdShared * 136));
        CHECK(cudaFuncSetAttribute((const void*) k->dq, cudaFuncAttributeMaxDynamicSharedMemorySize, 768 * 136));
        CHECK(cudaFuncSetAttribute((const void*) k->dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, 768 * 136 + 1024));
    }
    if (argc > 1 && std::strcmp(argv[1], "--sweep") == 0) {
        return sweep(current);
    }
    struct Shape { const char* name; int B, NH, NKV, HS, T, window; bool packed; };
    Shape shapes[] = {
        {"qwen2.5-7b", 1, 28, 4, 128, 2048, 0, false}, {"qwen2.5-1.5b", 1, 12, 2, 128, 2048, 0, false},
        {"qwen2.5-7b", 1, 28, 4, 128, 4096, 0, false}, {"qwen2.5-0.5b", 1, 14, 2, 64, 2048, 0, false},
        {"7b window 300", 2, 28, 4, 128, 1000, 300, false}, {"7b packed", 2, 28, 4, 128, 1000, 0, true},
        {"hs 96 packed window", 2, 8, 2, 96, 777, 200, true}, {"hs 64 odd T", 2, 6, 3, 64, 333, 0, false},
        {"hs 80 packed", 2, 4, 4, 80, 500, 0, true}, {"hs 32 window", 2, 4, 1, 32, 300, 64, false},
    };
    std::printf("%-20s %5s %3s %-9s %22s %22s %22s   max |current - baseline| / max |baseline|: out, dq, dk, dv\n",
                "shape", "T", "HS", "kernels", "forward ms (TFLOP/s)", "dq ms (TFLOP/s)", "dk/dv ms (TFLOP/s)");
    for (const Shape& s : shapes) {
        const int B = s.B, W = (s.NH + 2 * s.NKV) * s.HS;
        const size_t nqkv = (size_t) B * s.T * W, nout = (size_t) B * s.T * s.NH * s.HS, nlse = (size_t) B * s.NH * s.T;
        std::vector<unsigned short> hqkv(nqkv), hdo(nout);
        srand(11);
        for (auto& v : hqkv) v = to_bf16((rand() / (float) RAND_MAX) * 4 - 2);
        for (auto& v : hdo) v = to_bf16((rand() / (float) RAND_MAX) * 2 - 1);
        std::vector<int> hstarts((size_t) B * s.T);
        for (int b = 0; b < B; b++) {
            int start = 0;
            for (int q = 0; q < s.T; q++) {
                if (s.packed && (q == 123 + b || q == 400 || q == 401 || q == 450 + 7 * b)) start = q;
                hstarts[(size_t) b * s.T + q] = start;
            }
        }
        const int group = s.NH / s.NKV;
        int splits = group;
        for (int c = 1; c < group; c++) {
            if (group % c == 0 && (long long) ((s.T + 63) / 64) * s.NKV * B * c >= 1024) { splits = c; break; }
        }
        Run run = {nullptr, B, s.T, s.NH, s.NKV, s.HS, s.window, splits, 1.0f / std::sqrt((float) s.HS)};
        CHECK(cudaMalloc(&run.qkv, nqkv * 2)); CHECK(cudaMalloc(&run.out, nout * 2)); CHECK(cudaMalloc(&run.dOut, nout * 2));
        CHECK(cudaMalloc(&run.dQkv, nqkv * 2)); CHECK(cudaMalloc(&run.lse, nlse * 4)); CHECK(cudaMalloc(&run.delta, nlse * 4));
        CHECK(cudaMalloc(&run.partial, (size_t) splits * B * s.T * 2 * s.NKV * s.HS * 4));
        CHECK(cudaMemcpy(run.qkv, hqkv.data(), nqkv * 2, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(run.dOut, hdo.data(), nout * 2, cudaMemcpyHostToDevice));
        run.starts = nullptr;
        if (s.packed) {
            CHECK(cudaMalloc(&run.starts, hstarts.size() * 4));
            CHECK(cudaMemcpy(run.starts, hstarts.data(), hstarts.size() * 4, cudaMemcpyHostToDevice));
        }
        const double fwdFlops = 4.0 * s.NH * s.HS * (double) s.T * (s.T + 1) / 2 * B, bwdFlops = 2.5 * fwdFlops;
        std::vector<unsigned short> refOut, refDqkv;
        for (const Kernels* k : all) {
            run.k = k;
            CHECK(cudaMemset(run.out, 0xff, nout * 2));
            launchFwd(&run);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            auto out = fetch(run.out, nout);
            // the backward of both on the baseline's forward outputs (the same inputs for both)
            run.k = &base;
            launchFwd(&run);
            attention_backward_delta_bf16<<<(unsigned) ((nlse + 7) / 8), 256>>>(run.delta, run.dOut, run.out, B, s.T, s.NH, s.HS);
            run.k = k;
            CHECK(cudaMemset(run.dQkv, 0xff, nqkv * 2));
            launchDq(&run);
            launchDkdv(&run);
            CHECK(cudaGetLastError());
            CHECK(cudaDeviceSynchronize());
            auto dqkv = fetch(run.dQkv, nqkv);
            const float fMs = timeMs(launchFwd, &run), qMs = timeMs(launchDq, &run), kMs = timeMs(launchDkdv, &run);
            if (k == &base) { refOut = out; refDqkv = dqkv; }
            double dOutDiff, outScale;
            worst(out, refOut, dOutDiff, outScale);
            // split dQkv's columns: q, k, v
            std::vector<unsigned short> parts[3][2];
            for (size_t row = 0; row < (size_t) B * s.T; row++)
                for (int c = 0; c < W; c++) {
                    const int part = c < s.NH * s.HS ? 0 : c < (s.NH + s.NKV) * s.HS ? 1 : 2;
                    parts[part][0].push_back(dqkv[row * W + c]);
                    parts[part][1].push_back(refDqkv[row * W + c]);
                }
            double rel[3];
            for (int part = 0; part < 3; part++) {
                double d, sc;
                worst(parts[part][0], parts[part][1], d, sc);
                rel[part] = d / sc;
            }
            std::printf("%-20s %5d %3d %-9s %9.4f (%6.1f)      %9.4f (%6.1f)      %9.4f (%6.1f)      %.2g, %.2g, %.2g, %.2g\n",
                        s.name, s.T, s.HS, k->name, fMs, fwdFlops / fMs / 1e9, qMs, bwdFlops / qMs / 1e9, kMs,
                        bwdFlops / kMs / 1e9, dOutDiff / outScale, rel[0], rel[1], rel[2]);
        }
        cudaFree(run.qkv); cudaFree(run.out); cudaFree(run.dOut); cudaFree(run.dQkv); cudaFree(run.lse);
        cudaFree(run.delta); cudaFree(run.partial); if (run.starts) cudaFree(run.starts);
    }
    return 0;
}
