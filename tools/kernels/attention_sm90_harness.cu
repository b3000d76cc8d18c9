// Checks and times attention_sm90.cu's Hopper forward (wgmma, TMA, warp-specialised) against attention_tc.cu's
// forward (mma.sync; checked against the CPU backend by CudaOpsTest) and, on small shapes, against a float64 CPU
// reference: out and lse for causal grouped-query attention (28 query / 4 key heads), head sizes 128 and 64, an even
// and an uneven T, with and without packed documents and a window; then times both at Qwen2.5-7B's shapes.
// Build (here or on the device machine; no libcuda needed at link time: the tensor map encoder comes through the
// runtime's driver entry point):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cudart static -o attention_sm90_harness \
//       tools/kernels/attention_sm90_harness.cu
// Run on an H100 or H200: ./attention_sm90_harness [--no-time | --small | --profile [T [B]] | --time-backward | --splits
// | --fused | --fused-time | --fused-docs | --fused-batch]. Exit status 0 when every check passes. --profile: one dk/dv and one dq call at B x T
// (default B 16384 / T, T 8192) for a profiler (ncu); --time-backward: the backward's timings alone; --splits: dk/dv at
// each split count of the group and dq, at the models' heads and 2048-16384 tokens; --fused: the one-kernel backward
// (attention_sm90_backward_fused_hs128_bf16) checked against the mma.sync kernels, then timed beside the two Hopper
// kernels; --fused-time: timed only; --fused-docs: both timed over packed documents of 512 to 4096 tokens;
// --fused-batch: both timed at 1 to 4 sequences of 4096 to 16384 tokens, 1 and 7 splits.
// TFLOP/s: causal forward 4 * B * NH * T * T * HS / 2 over the measured time.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <chrono>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
#include "../../src/main/resources/kernels/attention_tc.cu"
#include "../../src/main/resources/kernels/attention.cu" // the backward's delta
#include "../../src/main/resources/kernels/attention_sm90.cu"

#define CHECK(x) do { cudaError_t err_ = (x); if (err_ != cudaSuccess) { \
    std::printf("%s failed: %s\n", #x, cudaGetErrorString(err_)); std::exit(1); } } while (0)

typedef CUresult (*EncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static EncodeTiled encodeTiled;

typedef void (*Sm90Forward)(const sm90_tensor_map, bf16_t*, float*, const int*, int, int, int, int, int, int, float);

// a variant beside the file's own kernels (the pipelined ones, 3 stages), to compare: a tile's scores, softmax and
// P V in turn, 2 stages (measured on an H200, 2026-11-25: 428 TFLOP/s at T = 2048 against the file's 477)
#define HARNESS_VARIANT(NAME, H, PIPE, STAGES)                                                                      \
    __global__ void __launch_bounds__(SM90_THREADS, 1) NAME(const __grid_constant__ sm90_tensor_map qkvMap,         \
            bf16_t* out, float* lse, const int* docStart, int B, int T, int NH, int NKV, int HS, int window,        \
            float scale) {                                                                                          \
        sm90_forward<H, PIPE, STAGES>(&qkvMap, out, lse, docStart, T, NH, NKV, window, scale);                      \
    }
HARNESS_VARIANT(plain2_hs128, 128, false, 2)
HARNESS_VARIANT(plain2_hs64, 64, false, 2)

struct Variant { const char* name; Sm90Forward hs128, hs64; int stages128, stages64; };
static const Variant variants[] = {
    {"sm90", attention_sm90_forward_hs128_bf16, attention_sm90_forward_hs64_bf16, 3, 3},
    {"plain2", plain2_hs128, plain2_hs64, 2, 2},
};
static const int VARIANTS = sizeof(variants) / sizeof(variants[0]);
static const Variant* variant = &variants[0];
typedef void (*TcForward)(bf16_t*, float*, const bf16_t*, const int*, int, int, int, int, int, int, float);

static unsigned short to_bf16(float f) { unsigned int u; std::memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return (unsigned short) (u >> 16); }
static float from_bf16(unsigned short h) { unsigned int u = (unsigned int) h << 16; float f; std::memcpy(&f, &u, 4); return f; }

static size_t sm90Shared(int HS, int stages) { return SM90_SHARED(HS, stages); }

struct Case {
    int B, T, NH, NKV, HS, window; bool docs;
    int docLen = 0; // docs: documents of docLen tokens (0: of 1 to 700, at random)
    bf16_t* qkv; int* starts; bf16_t *outA, *outB; float *lseA, *lseB;
    sm90_tensor_map map; std::vector<unsigned short> hQkv; std::vector<int> hStarts;
};

static unsigned long long rng = 0x9E3779B97F4A7C15ull;
static float uniform() { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return (float) ((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }

static void setup(Case& c) {
    const int W = (c.NH + 2 * c.NKV) * c.HS;
    const size_t n = (size_t) c.B * c.T * W;
    c.hQkv.resize(n);
    for (size_t i = 0; i < n; i++) {
        const bool isQ = (int) (i % W) < c.NH * c.HS;
        c.hQkv[i] = to_bf16(uniform() * (isQ ? 6.0f : 1.0f)); // peaked softmax rows: masks matter
    }
    CHECK(cudaMalloc(&c.qkv, n * 2));
    CHECK(cudaMemcpy(c.qkv, c.hQkv.data(), n * 2, cudaMemcpyHostToDevice));
    c.starts = nullptr;
    if (c.docs) {
        c.hStarts.resize((size_t) c.B * c.T);
        for (int b = 0; b < c.B; b++) {
            int start = 0, next = 0;
            for (int t = 0; t < c.T; t++) {
                if (t == next) {
                    start = t;
                    next = t + (c.docLen > 0 ? c.docLen : 1 + (int) ((uniform() + 1.0f) * 350.0f));
                }
                c.hStarts[(size_t) b * c.T + t] = start;
            }
        }
        CHECK(cudaMalloc(&c.starts, c.hStarts.size() * 4));
        CHECK(cudaMemcpy(c.starts, c.hStarts.data(), c.hStarts.size() * 4, cudaMemcpyHostToDevice));
    }
    const size_t no = (size_t) c.B * c.T * c.NH * c.HS, nl = (size_t) c.B * c.NH * c.T;
    CHECK(cudaMalloc(&c.outA, no * 2)); CHECK(cudaMalloc(&c.outB, no * 2));
    CHECK(cudaMalloc(&c.lseA, nl * 4)); CHECK(cudaMalloc(&c.lseB, nl * 4));
    CHECK(cudaMemset(c.outA, 0xff, no * 2)); CHECK(cudaMemset(c.outB, 0xff, no * 2)); // NaN until written
    CHECK(cudaMemset(c.lseA, 0xff, nl * 4)); CHECK(cudaMemset(c.lseB, 0xff, nl * 4));
    const cuuint64_t dims[3] = {(cuuint64_t) W, (cuuint64_t) c.T, (cuuint64_t) c.B};
    const cuuint64_t strides[2] = {(cuuint64_t) W * 2, (cuuint64_t) W * 2 * c.T};
    const cuuint32_t box[3] = {64, 128, 1}, elem[3] = {1, 1, 1};
    CUresult r = encodeTiled(reinterpret_cast<CUtensorMap*>(&c.map), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, c.qkv, dims,
                             strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { std::printf("cuTensorMapEncodeTiled failed: %d\n", (int) r); std::exit(1); }
}

static void release(Case& c) {
    cudaFree(c.qkv); cudaFree(c.starts); cudaFree(c.outA); cudaFree(c.outB); cudaFree(c.lseA); cudaFree(c.lseB);
}

static TcForward tcFor(int HS) { return HS == 64 ? attention_tc_forward_hs64_bf16 : attention_tc_forward_hs128_bf16; }

static void launchSm90(Case& c) {
    const float scale = 1.0f / std::sqrt((float) c.HS);
    Sm90Forward f = c.HS == 64 ? variant->hs64 : variant->hs128;
    const int stages = c.HS == 64 ? variant->stages64 : variant->stages128;
    f<<<dim3((c.T + 127) / 128, c.NH, c.B), SM90_THREADS, sm90Shared(c.HS, stages)>>>(c.map, c.outA, c.lseA,
            c.starts, c.B, c.T, c.NH, c.NKV, c.HS, c.window, scale);
}
static void launchTc(Case& c) {
    const float scale = 1.0f / std::sqrt((float) c.HS);
    tcFor(c.HS)<<<dim3((c.T + 127) / 128, c.NH, c.B), 128, 768 * (c.HS + 8)>>>(c.outB, c.lseB, c.qkv, c.starts, c.B,
            c.T, c.NH, c.NKV, c.HS, c.window, scale);
}

/** Waits for the device, giving up (exit 3) after 20 s: a pipeline that deadlocks must not hang the machine. */
static void finish(const char* what) {
    CHECK(cudaGetLastError());
    const auto start = std::chrono::steady_clock::now();
    cudaError_t e;
    while ((e = cudaStreamQuery(0)) == cudaErrorNotReady) {
        if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
            std::printf("HANG in %s: no completion after 20 s\n", what);
            std::fflush(stdout);
            std::_Exit(3);
        }
    }
    if (e != cudaSuccess) { std::printf("%s failed: %s\n", what, cudaGetErrorString(e)); std::exit(1); }
}

/** float64 reference of out and lse for batch row b, head h, query q (attention.cu's semantics). */
static void reference(const Case& c, int b, int h, int q, double* o, double* lse) {
    const int W = (c.NH + 2 * c.NKV) * c.HS, kvh = h / (c.NH / c.NKV);
    const double scale = 1.0 / std::sqrt((double) c.HS);
    int lo = c.window > 0 ? q - c.window + 1 : 0;
    if (c.docs) lo = std::max(lo, c.hStarts[(size_t) b * c.T + q]);
    lo = std::max(lo, 0);
    const unsigned short* row = &c.hQkv[((size_t) b * c.T + q) * W + h * c.HS];
    std::vector<double> s(q + 1);
    double mx = -INFINITY;
    for (int k = lo; k <= q; k++) {
        const unsigned short* kr = &c.hQkv[((size_t) b * c.T + k) * W + (c.NH + kvh) * c.HS];
        double d = 0;
        for (int e = 0; e < c.HS; e++) d += (double) from_bf16(row[e]) * from_bf16(kr[e]);
        s[k] = d * scale;
        mx = std::max(mx, s[k]);
    }
    double sum = 0;
    for (int e = 0; e < c.HS; e++) o[e] = 0;
    for (int k = lo; k <= q; k++) {
        const double p = std::exp(s[k] - mx);
        sum += p;
        const unsigned short* vr = &c.hQkv[((size_t) b * c.T + k) * W + (c.NH + c.NKV + kvh) * c.HS];
        for (int e = 0; e < c.HS; e++) o[e] += p * from_bf16(vr[e]);
    }
    for (int e = 0; e < c.HS; e++) o[e] /= sum;
    *lse = mx + std::log(sum);
}

static int failures = 0;

static void check(Case& c, bool cpu) {
    const size_t no0 = (size_t) c.B * c.T * c.NH * c.HS, nl0 = (size_t) c.B * c.NH * c.T;
    CHECK(cudaMemset(c.outA, 0xff, no0 * 2)); // NaN until written
    CHECK(cudaMemset(c.lseA, 0xff, nl0 * 4));
    launchSm90(c); finish("attention_sm90_forward");
    launchTc(c); finish("attention_tc_forward");
    const size_t no = (size_t) c.B * c.T * c.NH * c.HS, nl = (size_t) c.B * c.NH * c.T;
    std::vector<unsigned short> oa(no), ob(no);
    std::vector<float> la(nl), lb(nl);
    CHECK(cudaMemcpy(oa.data(), c.outA, no * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(ob.data(), c.outB, no * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(la.data(), c.lseA, nl * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(lb.data(), c.lseB, nl * 4, cudaMemcpyDeviceToHost));
    double dOut = 0, dLse = 0;
    size_t worst = 0;
    for (size_t i = 0; i < no; i++) {
        const double d = std::fabs((double) from_bf16(oa[i]) - from_bf16(ob[i]));
        if (!(d <= dOut)) { dOut = std::isnan(d) ? INFINITY : d; worst = i; }
    }
    for (size_t i = 0; i < nl; i++) {
        const double d = std::fabs((double) la[i] - lb[i]);
        if (!(d <= dLse)) dLse = std::isnan(d) ? INFINITY : d;
    }
    // against float64 on sampled rows: each kernel's own error, so that a shared mistake shows too
    double eA = 0, eB = 0, eLA = 0, eLB = 0;
    if (cpu) {
        std::vector<double> o(c.HS);
        for (int b = 0; b < c.B; b++)
            for (int h = 0; h < c.NH; h += 3)
                for (int q = 0; q < c.T; q += (q < 300 ? 7 : 61)) {
                    double l;
                    reference(c, b, h, q, o.data(), &l);
                    const size_t at = ((size_t) b * c.T + q) * c.NH * c.HS + (size_t) h * c.HS;
                    for (int e = 0; e < c.HS; e++) {
                        eA = std::max(eA, std::fabs(o[e] - from_bf16(oa[at + e])));
                        eB = std::max(eB, std::fabs(o[e] - from_bf16(ob[at + e])));
                    }
                    const size_t li = ((size_t) b * c.NH + h) * c.T + q;
                    eLA = std::max(eLA, std::fabs(l - la[li]));
                    eLB = std::max(eLB, std::fabs(l - lb[li]));
                }
    }
    const bool ok = dOut <= 2e-2 && dLse <= 2e-3 && (!cpu || (eA <= 2.5e-2 && eLA <= 2e-3));
    if (!ok) failures++;
    std::printf("%s %s HS=%d B=%d T=%d NH=%d NKV=%d window=%d docs=%d: |out sm90 - tc| %.3g (at %zu: row %zu col %zu), "
                "|lse sm90 - tc| %.3g", ok ? "PASS" : "FAIL", variant->name, c.HS, c.B, c.T, c.NH, c.NKV, c.window, c.docs ? 1 : 0,
                dOut, worst, worst / c.HS / c.NH % c.T, worst % (c.NH * c.HS), dLse);
    if (cpu) std::printf("; vs float64: out sm90 %.3g tc %.3g, lse sm90 %.3g tc %.3g", eA, eB, eLA, eLB);
    std::printf("\n");
    std::fflush(stdout);
}

// ---- the backward's dk and dv (attention_sm90_backward_dkdv_*) against attention_tc_backward_dkdv_bf16 ----

struct Bwd {
    Case* c; int splits; bf16_t *dOut, *dA, *dB; float *delta, *partial;
    sm90_tensor_map qMap, oMap, oMap128; // Q and dOut in 64-row boxes (dk/dv's), dOut in 128-row boxes (dq's)
};

static void encode(sm90_tensor_map* map, void* base, long long width, int T, int B, int rows) {
    const cuuint64_t dims[3] = {(cuuint64_t) width, (cuuint64_t) T, (cuuint64_t) B};
    const cuuint64_t strides[2] = {(cuuint64_t) width * 2, (cuuint64_t) width * 2 * T};
    const cuuint32_t box[3] = {64, (cuuint32_t) rows, 1}, elem[3] = {1, 1, 1};
    CUresult r = encodeTiled(reinterpret_cast<CUtensorMap*>(map), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims,
                             strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { std::printf("cuTensorMapEncodeTiled failed: %d\n", (int) r); std::exit(1); }
}

/** The forward's out and lse (attention_tc), a random dOut, delta; the maps of Q and dOut. */
static void setupBwd(Bwd& w) {
    Case& c = *w.c;
    const size_t no = (size_t) c.B * c.T * c.NH * c.HS, nq = (size_t) c.B * c.T * (c.NH + 2 * c.NKV) * c.HS;
    launchTc(c); finish("attention_tc_forward");
    std::vector<unsigned short> h(no);
    for (size_t i = 0; i < no; i++) h[i] = to_bf16(uniform());
    CHECK(cudaMalloc(&w.dOut, no * 2)); CHECK(cudaMemcpy(w.dOut, h.data(), no * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&w.dA, nq * 2)); CHECK(cudaMalloc(&w.dB, nq * 2));
    CHECK(cudaMemset(w.dA, 0, nq * 2)); CHECK(cudaMemset(w.dB, 0, nq * 2));
    CHECK(cudaMalloc(&w.delta, (size_t) c.B * c.NH * c.T * 4));
    CHECK(cudaMalloc(&w.partial, (size_t) c.NH / c.NKV * c.B * c.T * 2 * c.NKV * c.HS * 4));
    attention_backward_delta_bf16<<<(c.B * c.T * c.NH + 7) / 8, 256>>>(w.delta, w.dOut, c.outB, c.B, c.T, c.NH, c.HS);
    finish("attention_backward_delta_bf16");
    encode(&w.qMap, c.qkv, (long long) (c.NH + 2 * c.NKV) * c.HS, c.T, c.B, 64);
    encode(&w.oMap, w.dOut, (long long) c.NH * c.HS, c.T, c.B, 64);
    encode(&w.oMap128, w.dOut, (long long) c.NH * c.HS, c.T, c.B, 128);
}

static void releaseBwd(Bwd& w) { cudaFree(w.dOut); cudaFree(w.dA); cudaFree(w.dB); cudaFree(w.delta); cudaFree(w.partial); }

static void sumSplits(Bwd& w, bf16_t* dQkv) {
    Case& c = *w.c;
    if (w.splits > 1) {
        const long long n = (long long) c.B * c.T * c.NKV * c.HS;
        attention_tc_dkdv_sum_bf16<<<(unsigned) ((n + 255) / 256), 256>>>(dQkv, w.partial, c.B, c.T, c.NH, c.NKV, c.HS,
                                                                          w.splits);
    }
}

static void launchDkdvTc(Bwd& w) {
    Case& c = *w.c;
    attention_tc_backward_dkdv_bf16<<<dim3((c.T + 63) / 64, c.NKV * w.splits, c.B), 128, 768 * (c.HS + 8) + 1024>>>(
            w.dA, w.dOut, c.qkv, c.lseB, w.delta, c.starts, c.B, c.T, c.NH, c.NKV, c.HS, c.window,
            1.0f / std::sqrt((float) c.HS), w.splits > 1 ? w.partial : nullptr, w.splits);
    sumSplits(w, w.dA);
}

static void launchDkdvSm90(Bwd& w) {
    Case& c = *w.c;
    auto f = c.HS == 64 ? attention_sm90_backward_dkdv_hs64_bf16 : attention_sm90_backward_dkdv_hs128_bf16;
    f<<<dim3((c.T + 127) / 128, c.NKV * w.splits, c.B), SM90_THREADS, SM90_DKDV_SHARED(c.HS, 3)>>>(c.map, w.qMap,
            w.oMap, w.dB, c.lseB, w.delta, c.starts, c.B, c.T, c.NH, c.NKV, c.HS, c.window,
            1.0f / std::sqrt((float) c.HS), w.splits > 1 ? w.partial : nullptr, w.splits);
    sumSplits(w, w.dB);
}

/**
 * Compares the dk/dv columns (queryColumns false) or the dq columns (true) of w.dA (the mma.sync kernels') and w.dB
 * (Hopper's): the largest difference, the largest reference magnitude, where, and how many elements differ in bits.
 */
struct Diff { double diff, ref; size_t worst, unequal; int W; };
static Diff compareColumns(Bwd& w, bool queryColumns) {
    Case& c = *w.c;
    const int W = (c.NH + 2 * c.NKV) * c.HS;
    const size_t nq = (size_t) c.B * c.T * W;
    std::vector<unsigned short> a(nq), bb(nq);
    CHECK(cudaMemcpy(a.data(), w.dA, nq * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(bb.data(), w.dB, nq * 2, cudaMemcpyDeviceToHost));
    Diff d{0, 0, 0, 0, W};
    for (size_t i = 0; i < nq; i++) {
        if (((int) (i % W) < c.NH * c.HS) != queryColumns) continue;
        const double x = from_bf16(a[i]), y = from_bf16(bb[i]), e = std::fabs(x - y);
        if (a[i] != bb[i]) d.unequal++;
        if (!(e <= d.diff)) { d.diff = std::isnan(e) ? INFINITY : e; d.worst = i; }
        d.ref = std::max(d.ref, std::fabs(x));
    }
    return d;
}

static void checkDkdv(Case& c, int splits) {
    Bwd w{&c, splits};
    setupBwd(w);
    launchDkdvTc(w); finish("attention_tc_backward_dkdv_bf16");
    launchDkdvSm90(w); finish("attention_sm90_backward_dkdv");
    const Diff d = compareColumns(w, false);
    const bool ok = d.diff <= 1e-2 * d.ref;
    if (!ok) failures++;
    std::printf("%s dkdv HS=%d B=%d T=%d NH=%d NKV=%d window=%d docs=%d splits=%d: |dk,dv sm90 - tc| %.3g of %.3g "
                "(at row %zu col %zu), %zu elements not bit-equal\n", ok ? "PASS" : "FAIL", c.HS, c.B, c.T, c.NH, c.NKV,
                c.window, c.docs ? 1 : 0, splits, d.diff, d.ref, d.worst / d.W, d.worst % d.W, d.unequal);
    std::fflush(stdout);
    releaseBwd(w);
}

// ---- the backward's dq (attention_sm90_backward_dq_*) against attention_tc_backward_dq_bf16 ----

static void launchDqTc(Bwd& w) {
    Case& c = *w.c;
    attention_tc_backward_dq_bf16<<<dim3((c.T + 63) / 64, c.NH, c.B), 128, 768 * (c.HS + 8)>>>(
            w.dA, w.dOut, c.qkv, c.lseB, w.delta, c.starts, c.B, c.T, c.NH, c.NKV, c.HS, c.window,
            1.0f / std::sqrt((float) c.HS));
}

static void launchDqSm90(Bwd& w) {
    Case& c = *w.c;
    auto f = c.HS == 64 ? attention_sm90_backward_dq_hs64_bf16 : attention_sm90_backward_dq_hs128_bf16;
    f<<<dim3((c.T + 127) / 128, c.NH, c.B), SM90_THREADS, SM90_DQ_SHARED(c.HS, 2)>>>(c.map, w.oMap128, w.dB, c.lseB,
            w.delta, c.starts, c.B, c.T, c.NH, c.NKV, c.HS, c.window, 1.0f / std::sqrt((float) c.HS));
}

static void checkDq(Case& c) {
    Bwd w{&c, 1};
    setupBwd(w);
    launchDqTc(w); finish("attention_tc_backward_dq_bf16");
    launchDqSm90(w); finish("attention_sm90_backward_dq");
    const Diff d = compareColumns(w, true);
    const bool ok = d.diff <= 1e-2 * d.ref;
    if (!ok) failures++;
    std::printf("%s dq HS=%d B=%d T=%d NH=%d NKV=%d window=%d docs=%d: |dq sm90 - tc| %.3g of %.3g (at row %zu col "
                "%zu), %zu elements not bit-equal\n", ok ? "PASS" : "FAIL", c.HS, c.B, c.T, c.NH, c.NKV, c.window,
                c.docs ? 1 : 0, d.diff, d.ref, d.worst / d.W, d.worst % d.W, d.unequal);
    std::fflush(stdout);
    releaseBwd(w);
}

static float timeMs(void (*launch)(Case&), Case& c) {
    for (int w = 0; w < 3; w++) launch(c);
    finish("warm-up");
    cudaEvent_t a, z; cudaEventCreate(&a); cudaEventCreate(&z);
    const int reps = 20;
    cudaEventRecord(a);
    for (int r = 0; r < reps; r++) launch(c);
    cudaEventRecord(z); CHECK(cudaEventSynchronize(z));
    float ms; cudaEventElapsedTime(&ms, a, z);
    cudaEventDestroy(a); cudaEventDestroy(z);
    return ms / reps;
}

static float timeBwd(void (*launch)(Bwd&), Bwd& w) {
    for (int i = 0; i < 3; i++) launch(w);
    finish("warm-up");
    cudaEvent_t a, z; cudaEventCreate(&a); cudaEventCreate(&z);
    cudaEventRecord(a);
    for (int r = 0; r < 20; r++) launch(w);
    cudaEventRecord(z); CHECK(cudaEventSynchronize(z));
    float ms; cudaEventElapsedTime(&ms, a, z);
    return ms / 20;
}

// ---- dk, dv and dq in one kernel (attention_sm90_backward_fused_hs128_bf16) against the mma.sync kernels ----

static float* dqSums = nullptr;
static size_t dqSumsBytes = 0;

static void launchFused(Bwd& w) {
    Case& c = *w.c;
    const size_t bytes = (size_t) c.B * c.NH * ((c.T + 63) / 64) * 128 * 64 * 4;
    if (bytes > dqSumsBytes) { cudaFree(dqSums); CHECK(cudaMalloc(&dqSums, bytes)); dqSumsBytes = bytes; }
    CHECK(cudaMemsetAsync(dqSums, 0, bytes));
    attention_sm90_backward_fused_hs128_bf16<<<dim3((c.T + 127) / 128, c.NKV * w.splits, c.B), SM90_THREADS,
            SM90_FUSED_SHARED(128, 2)>>>(c.map, w.qMap, w.oMap, w.dB, c.lseB, w.delta, c.starts, c.B, c.T, c.NH, c.NKV,
            c.HS, c.window, 1.0f / std::sqrt((float) c.HS), w.splits > 1 ? w.partial : nullptr, w.splits, dqSums);
    sumSplits(w, w.dB);
    const long long n = (long long) c.B * c.T * c.NH * 64;
    attention_sm90_dq_from_sums_bf16<<<(unsigned) ((n + 255) / 256), 256>>>(w.dB, dqSums, c.B, c.T, c.NH, c.NKV);
}

static void launchTwoKernels(Bwd& w) { launchDkdvSm90(w); launchDqSm90(w); }

static void checkFused(Case& c, int splits) {
    Bwd w{&c, splits};
    setupBwd(w);
    launchDkdvTc(w); finish("attention_tc_backward_dkdv_bf16");
    launchDqTc(w); finish("attention_tc_backward_dq_bf16");
    launchFused(w); finish("attention_sm90_backward_fused");
    const Diff kv = compareColumns(w, false), q = compareColumns(w, true);
    const bool ok = kv.unequal == 0 && kv.diff == 0 && q.diff <= 1e-2 * q.ref; // dk, dv: the dk/dv kernel's bits
    if (!ok) failures++;
    std::printf("%s fused HS=%d B=%d T=%d NH=%d NKV=%d window=%d docs=%d splits=%d: dk,dv %zu elements not bit-equal "
                "(|diff| %.3g of %.3g); |dq fused - tc| %.3g of %.3g (at row %zu col %zu), %zu not bit-equal\n",
                ok ? "PASS" : "FAIL", c.HS, c.B, c.T, c.NH, c.NKV, c.window, c.docs ? 1 : 0, splits, kv.unequal,
                kv.diff, kv.ref, q.diff, q.ref, q.worst / q.W, q.worst % q.W, q.unequal);
    std::fflush(stdout);
    releaseBwd(w);
}

/** The fused kernel beside the two Hopper kernels (dk/dv, then dq), alternating, three rounds each. */
static void timeFused(int B, int T, int NH, int NKV, int splits, int window = 0, int docLen = 0) {
    Case c{B, T, NH, NKV, 128, window, docLen > 0};
    c.docLen = docLen;
    setup(c);
    Bwd w{&c, splits};
    setupBwd(w);
    const double flop = 2.5 * 4.0 * B * c.NH * (double) T * T * 128 / 2;
    float two[3], fused[3];
    for (int r = 0; r < 3; r++) { two[r] = timeBwd(launchTwoKernels, w); fused[r] = timeBwd(launchFused, w); }
    std::sort(two, two + 3); std::sort(fused, fused + 3);
    std::printf("TIME backward HS=128 B=%d T=%d NH=%d NKV=%d window=%d docs of %d splits=%d: two kernels %.3f ms (%.3f-%.3f, %.0f "
                "TFLOP/s), fused %.3f ms (%.3f-%.3f, %.0f), speed-up %.3fx\n", B, T, NH, NKV, window, docLen, splits, two[1], two[0],
                two[2], flop / two[1] / 1e9, fused[1], fused[0], fused[2], flop / fused[1] / 1e9, two[1] / fused[1]);
    std::fflush(stdout);
    releaseBwd(w);
    release(c);
}

/** dk/dv time at one shape and split count; TFLOP/s counted against the whole backward (2.5 x the forward's). */
static void timeDkdv(int B, int T, int HS, int splits) {
    Case c{B, T, 28, 4, HS, 0, false};
    setup(c);
    Bwd w{&c, splits};
    setupBwd(w);
    const double flop = 2.5 * 4.0 * B * c.NH * (double) T * T * HS / 2;
    const float tc = timeBwd(launchDkdvTc, w), s90 = timeBwd(launchDkdvSm90, w);
    std::printf("TIME dkdv HS=%d B=%d T=%d NH=28 NKV=4 causal splits=%d: tc %.3f ms (%.0f TFLOP/s of the backward's "
                "count), sm90 %.3f ms (%.0f), speed-up %.2fx\n", HS, B, T, splits, tc, flop / tc / 1e9, s90,
                flop / s90 / 1e9, tc / s90);
    std::fflush(stdout);
    releaseBwd(w);
    release(c);
}

/** dq time at one shape; TFLOP/s counted against the whole backward (2.5 x the forward's), as timeDkdv's. */
static void timeDq(int B, int T, int HS) {
    Case c{B, T, 28, 4, HS, 0, false};
    setup(c);
    Bwd w{&c, 1};
    setupBwd(w);
    const double flop = 2.5 * 4.0 * B * c.NH * (double) T * T * HS / 2;
    const float tc = timeBwd(launchDqTc, w), s90 = timeBwd(launchDqSm90, w);
    std::printf("TIME dq HS=%d B=%d T=%d NH=28 NKV=4 causal: tc %.3f ms (%.0f TFLOP/s of the backward's count), sm90 "
                "%.3f ms (%.0f), speed-up %.2fx\n", HS, B, T, tc, flop / tc / 1e9, s90, flop / s90 / 1e9, tc / s90);
    std::fflush(stdout);
    releaseBwd(w);
    release(c);
}

static void timeCase(int B, int T, int HS, bool docs) {
    Case c{B, T, 28, 4, HS, 0, docs};
    setup(c);
    const double flop = 4.0 * B * c.NH * (double) T * T * HS / 2;
    const float msTc = timeMs(launchTc, c);
    std::printf("TIME HS=%d B=%d T=%d NH=28 NKV=4 causal docs=%d: tc %.3f ms %.0f TFLOP/s", HS, B, T, docs ? 1 : 0,
                msTc, flop / msTc / 1e9);
    for (int v = 0; v < VARIANTS; v++) {
        variant = &variants[v];
        const float ms = timeMs(launchSm90, c);
        std::printf("; %s %.3f ms %.0f TFLOP/s (%.2fx)", variant->name, ms, flop / ms / 1e9, msTc / ms);
    }
    variant = &variants[0];
    std::printf("\n");
    std::fflush(stdout);
    release(c);
}

/**
 * dk/dv (with the splits' sum) and dq of one sequence of T tokens over NH query and NKV key heads at head size 128,
 * for every split of the group, so that the split rule can be chosen by measurement.
 */
static void timeSplits(int T, int NH, int NKV) {
    Case c{1, T, NH, NKV, 128, 0, false};
    setup(c);
    const double flop = 2.5 * 4.0 * NH * (double) T * T * 128 / 2;
    Bwd q{&c, 1};
    setupBwd(q);
    const float dq = timeBwd(launchDqSm90, q);
    releaseBwd(q);
    for (int splits = 1; splits <= NH / NKV; splits++) {
        if ((NH / NKV) % splits != 0) continue;
        Bwd w{&c, splits};
        setupBwd(w);
        const float kv = timeBwd(launchDkdvSm90, w);
        std::printf("SPLITS T=%d NH=%d NKV=%d splits=%d blocks=%d: dkdv %.3f ms, dq %.3f ms, backward %.3f ms (%.0f "
                    "TFLOP/s)\n", T, NH, NKV, splits, (T + 127) / 128 * NKV * splits, kv, dq, kv + dq,
                    flop / (kv + dq) / 1e9);
        std::fflush(stdout);
        releaseBwd(w);
    }
    release(c);
}

/** The backward's kernels at Qwen2.5-7B's heads (and head size 64), each beside attention_tc.cu's. */
static void timeBackward() {
    timeDkdv(8, 2048, 128, 1);
    timeDkdv(1, 2048, 128, 7);
    timeDkdv(2, 8192, 128, 1);
    timeDkdv(1, 16384, 128, 1);
    timeDkdv(8, 2048, 64, 1);
    timeDkdv(1, 16384, 64, 1);
    timeDq(8, 2048, 128);
    timeDq(2, 8192, 128);
    timeDq(1, 16384, 128);
    timeDq(8, 2048, 64);
}

int main(int argc, char** argv) {
    const bool small = argc > 1 && std::strcmp(argv[1], "--small") == 0; // the float64-checked shapes only
    const bool time = !small && !(argc > 1 && std::strcmp(argv[1], "--no-time") == 0);
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void**) &encodeTiled, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !encodeTiled) { std::printf("no cuTensorMapEncodeTiled\n"); return 1; }
    for (int v = 0; v < VARIANTS; v++) {
        CHECK(cudaFuncSetAttribute(variants[v].hs128, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int) sm90Shared(128, variants[v].stages128)));
        CHECK(cudaFuncSetAttribute(variants[v].hs64, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int) sm90Shared(64, variants[v].stages64)));
    }
    CHECK(cudaFuncSetAttribute(attention_tc_forward_hs128_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, 768 * 136));
    CHECK(cudaFuncSetAttribute(attention_tc_forward_hs64_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, 768 * 72));
    CHECK(cudaFuncSetAttribute(attention_tc_backward_dkdv_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, 768 * 136 + 1024));
    CHECK(cudaFuncSetAttribute(attention_sm90_backward_dkdv_hs128_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               SM90_DKDV_SHARED(128, 3)));
    CHECK(cudaFuncSetAttribute(attention_sm90_backward_dkdv_hs64_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               SM90_DKDV_SHARED(64, 3)));
    CHECK(cudaFuncSetAttribute(attention_tc_backward_dq_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize, 768 * 136));
    CHECK(cudaFuncSetAttribute(attention_sm90_backward_dq_hs128_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               SM90_DQ_SHARED(128, 2)));
    CHECK(cudaFuncSetAttribute(attention_sm90_backward_dq_hs64_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               SM90_DQ_SHARED(64, 2)));
    CHECK(cudaFuncSetAttribute(attention_sm90_backward_fused_hs128_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               SM90_FUSED_SHARED(128, 2)));
    const bool fusedTimeOnly = argc > 1 && std::strcmp(argv[1], "--fused-time") == 0;
    if (argc > 1 && std::strcmp(argv[1], "--fused-batch") == 0) { // by batch and split count, both forms
        timeFused(1, 4096, 28, 4, 1); timeFused(1, 4096, 28, 4, 7);
        timeFused(1, 8192, 28, 4, 1); timeFused(1, 8192, 28, 4, 7);
        timeFused(2, 4096, 28, 4, 1); timeFused(4, 4096, 28, 4, 7);
        timeFused(2, 8192, 28, 4, 7); timeFused(2, 16384, 28, 4, 1);
        timeFused(4, 4096, 12, 2, 1); timeFused(1, 16384, 28, 4, 7);
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--fused-docs") == 0) { // packed documents of one length, both forms
        for (int d : {4096, 2048, 1024, 512}) timeFused(1, 16384, 28, 4, 1, 0, d);
        for (int d : {4096, 2048, 1024}) timeFused(1, 16384, 32, 8, 1, 0, d);
        timeFused(2, 8192, 28, 4, 1, 0, 2048);
        timeFused(4, 4096, 28, 4, 1, 0, 2048);
        return 0;
    }
    if (fusedTimeOnly || argc > 1 && std::strcmp(argv[1], "--fused") == 0) { // the one-kernel backward
        struct { int B, T, window; bool docs; } fc[] = {{1, 300, 0, false}, {1, 333, 100, true}, {2, 70, 0, true},
            {3, 1, 0, false}, {2, 2048, 0, false}, {2, 1000, 257, false}, {1, 4100, 1000, true}, {2, 1000, 0, true}};
        for (auto& k : fc) {
            if (fusedTimeOnly) break;
            Case c{k.B, k.T, 28, 4, 128, k.window, k.docs};
            setup(c);
            checkFused(c, 1);
            checkFused(c, 7);
            release(c);
        }
        if (failures == 0) {
            timeFused(8, 2048, 28, 4, 1);
            timeFused(1, 2048, 28, 4, 7);
            timeFused(4, 4096, 28, 4, 1);
            timeFused(4, 4096, 32, 8, 1);
            timeFused(2, 8192, 28, 4, 1);
            timeFused(2, 8192, 32, 8, 1);
            timeFused(2, 8192, 12, 2, 1);
            timeFused(1, 16384, 28, 4, 1);
            timeFused(1, 16384, 32, 8, 1);
            timeFused(1, 16384, 12, 2, 1);
            timeFused(1, 16384, 32, 8, 1, 4096);
            timeFused(1, 8192, 32, 8, 1, 4096);
        }
        std::printf("%s: %d failing checks\n", failures ? "FAIL" : "PASS", failures);
        return failures ? 2 : 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--profile") == 0) { // one dk/dv and one dq call at B x T = 16384, for ncu
        const int T = argc > 2 ? std::atoi(argv[2]) : 8192; // --profile [T [B]]: B 16384 / T unless given
        Case c{argc > 3 ? std::atoi(argv[3]) : std::max(1, 16384 / T), T, 28, 4, 128, 0, false};
        setup(c);
        Bwd w{&c, 1};
        setupBwd(w);
        launchDkdvSm90(w); launchDqSm90(w); finish("profiled calls");
        releaseBwd(w);
        release(c);
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--splits") == 0) { // dk/dv's split counts at the models' heads
        const int shapes[][2] = {{28, 4}, {12, 2}, {32, 8}, {14, 2}};
        for (int T : {2048, 4096, 8192, 16384})
            for (auto& h : shapes) timeSplits(T, h[0], h[1]);
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "--time-backward") == 0) { // the backward's timings only, to compare builds
        timeBackward();
        return 0;
    }
    const int hs[2] = {128, 64};
    for (int i = 0; i < 2; i++) {
        struct { int B, T, window; bool docs, cpu; } cases[] = {
            {1, 300, 0, false, true}, {1, 300, 0, true, true}, {1, 333, 100, true, true}, {2, 70, 0, true, true},
            {3, 1, 0, false, true},
            {2, 2048, 0, false, false}, {2, 1000, 0, false, false}, {2, 2048, 0, true, false},
            {2, 1000, 0, true, false}, {2, 1000, 257, false, false}, {1, 4100, 1000, true, false}};
        for (auto& k : cases) {
            if (small && !k.cpu) continue;
            Case c{k.B, k.T, 28, 4, hs[i], k.window, k.docs};
            setup(c);
            for (int v = 0; v < VARIANTS; v++) {
                variant = &variants[v];
                check(c, k.cpu);
            }
            variant = &variants[0];
            if (!k.cpu || k.T == 333 || k.T == 70) {
                checkDkdv(c, 1);
                checkDkdv(c, 7);
            }
            checkDq(c);
            release(c);
        }
    }
    if (time) {
        timeCase(8, 2048, 128, false);
        timeCase(2, 8192, 128, false);
        timeCase(4, 4096, 128, false);
        timeCase(8, 2048, 128, true);
        timeCase(8, 2048, 64, false);
        timeCase(2, 8192, 64, false);
        timeBackward();
    }
    std::printf("%s: %d failing checks\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 2 : 0;
}
