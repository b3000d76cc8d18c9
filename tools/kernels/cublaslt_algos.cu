// How far cuBLASLt's first heuristic choice is from the fastest of its candidates, for the products fsdp4j runs
// (CublasLt.linearForward / linearBackwardInput / linearBackwardWeight in bf16, CublasLt.fp8Matmul's three "TN"
// products in fp8) at Qwen2.5-7B's shapes: for each product, up to 16 candidates from cublasLtMatmulAlgoGetHeuristic,
// each timed (CUDA events, the least of 5 rounds of 10 calls after 3 untimed), printed as one line: the first
// candidate's time, the fastest's, its index and what it would save.
// On the GPU machine: nvcc -O2 -o /tmp/algos tools/kernels/cublaslt_algos.cu -I$INC -L$L -l:libcublasLt.so.13 -lcudart
// (INC and L: the folders of cublasLt.h and libcublasLt.so.13), then LD_LIBRARY_PATH=$L /tmp/algos [TOKENS...].
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("cuda %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

static void* dmalloc(size_t n) { void* p; CK(cudaMalloc(&p, n)); CK(cudaMemset(p, 0, n)); return p; }

struct Product {
    const char* name;
    bool transA, transB; int m, n, k, lda, ldb, ldd;
    cudaDataType aType, bType, dType;
    bool fp8, fast, bias; float beta;
};

static cublasLtHandle_t handle;
static void* workspace; static const size_t WS = 32u << 20;
static float* scales; // two ones, 16 bytes apart (fp8 scale pointers must be 16-byte aligned)

static float timeAlgo(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                      cublasLtMatrixLayout_t ld, const cublasLtMatmulAlgo_t* algo, void* A, void* B, void* D,
                      float beta) {
    float alpha = 1.f; cudaEvent_t s, e; cudaEventCreate(&s); cudaEventCreate(&e);
    for (int i = 0; i < 3; i++) {
        if (cublasLtMatmul(handle, d, &alpha, A, la, B, lb, &beta, D, ld, D, ld, algo, workspace, WS, 0) != 0) return -1;
    }
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        cudaEventRecord(s);
        for (int i = 0; i < 10; i++) cublasLtMatmul(handle, d, &alpha, A, la, B, lb, &beta, D, ld, D, ld, algo, workspace, WS, 0);
        cudaEventRecord(e); cudaEventSynchronize(e);
        float ms; cudaEventElapsedTime(&ms, s, e); if (ms / 10 < best) best = ms / 10;
    }
    cudaEventDestroy(s); cudaEventDestroy(e);
    return cudaGetLastError() == cudaSuccess ? best : -1;
}

static void run(const Product& p, void* A, void* B, void* D, void* bias) {
    cublasLtMatmulDesc_t d; cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    int32_t ta = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, 4);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, 4);
    int32_t epi = p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 4);
    if (p.bias) cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, 8);
    if (p.fp8) {
        float* as = scales; float* bs = scales + 4;
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &as, 8);
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bs, 8);
        int8_t fast = p.fast ? 1 : 0;
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, 1);
    }
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, p.aType, p.transA ? p.k : p.m, p.transA ? p.m : p.k, p.lda);
    cublasLtMatrixLayoutCreate(&lb, p.bType, p.transB ? p.n : p.k, p.transB ? p.k : p.n, p.ldb);
    cublasLtMatrixLayoutCreate(&ld, p.dType, p.m, p.n, p.ldd);
    cublasLtMatmulPreference_t pref; cublasLtMatmulPreferenceCreate(&pref);
    uint64_t wsb = WS; cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, 8);
    uint32_t al = 256;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, 4);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, 4);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, 4);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, 4);
    cublasLtMatmulHeuristicResult_t r[16]; int cnt = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(handle, d, la, lb, ld, ld, pref, 16, r, &cnt);
    if (hs != 0 || cnt == 0) { printf("%-34s heuristic %d count %d\n", p.name, hs, cnt); return; }
    float first = -1, best = 1e30f; int bestAt = -1;
    std::vector<float> t(cnt);
    for (int i = 0; i < cnt; i++) {
        t[i] = timeAlgo(d, la, lb, ld, &r[i].algo, A, B, D, p.beta);
        if (i == 0) first = t[i];
        if (t[i] > 0 && t[i] < best) { best = t[i]; bestAt = i; }
    }
    double flop = 2.0 * p.m * p.n * p.k;
    printf("%-34s m%6d n%6d k%6d candidates %2d first %.4f ms (%4.0f TFLOP/s) best #%d %.4f ms (%4.0f TFLOP/s) saves %5.1f%%  all:",
           p.name, p.m, p.n, p.k, cnt, first, flop / first / 1e9, bestAt, best, flop / best / 1e9, 100.0 * (first - best) / first);
    for (int i = 0; i < cnt; i++) printf(" %.4f", t[i]);
    printf("\n");
    fflush(stdout);
    cublasLtMatmulPreferenceDestroy(pref); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld); cublasLtMatmulDescDestroy(d);
}

int main(int argc, char** argv) {
    cublasLtCreate(&handle);
    printf("cublasLt version %zu\n", cublasLtGetVersion());
    workspace = dmalloc(WS);
    scales = (float*)dmalloc(64); float one = 1.f;
    CK(cudaMemcpy(scales, &one, 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(scales + 4, &one, 4, cudaMemcpyHostToDevice));
    std::vector<int> tokens;
    for (int i = 1; i < argc; i++) tokens.push_back(atoi(argv[i]));
    if (tokens.empty()) tokens = {2048, 8192};
    struct Linear { const char* name; int in, out; bool bias; };
    Linear linears[] = {{"qkv", 3584, 4608, true}, {"o", 3584, 3584, false}, {"gate_up", 3584, 37888, false},
                        {"down", 18944, 3584, false}};
    size_t maxBytes = (size_t)8192 * 37888 * 4;
    void* A = dmalloc(maxBytes); void* B = dmalloc(maxBytes); void* D = dmalloc(maxBytes); void* bias = dmalloc(37888 * 4);
    for (int N : tokens) {
        for (const Linear& L : linears) {
            char name[64];
            int o = L.out, in = L.in;
            // bf16 (CublasLt.linearForward, linearBackwardInput, linearBackwardWeight)
            snprintf(name, sizeof name, "N%d %s bf16 forward", N, L.name);
            run({name, true, false, o, N, in, in, in, o, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, false, false, L.bias, 0.f}, A, B, D, bias);
            snprintf(name, sizeof name, "N%d %s bf16 dgrad", N, L.name);
            run({name, false, false, in, N, o, in, o, in, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, false, false, false, 0.f}, A, B, D, bias);
            snprintf(name, sizeof name, "N%d %s bf16 wgrad f32", N, L.name);
            run({name, false, true, in, o, N, in, o, in, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, false, false, false, 0.f}, A, B, D, bias);
            // fp8 (CudaLinear.fp8LinearForward / fp8LinearBackward: every product TN)
            snprintf(name, sizeof name, "N%d %s fp8 forward", N, L.name);
            run({name, true, false, o, N, in, in, in, o, CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF, true, true, L.bias, 0.f}, A, B, D, bias);
            snprintf(name, sizeof name, "N%d %s fp8 dgrad", N, L.name);
            run({name, true, false, in, N, o, o, o, in, CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_16BF, true, false, false, 0.f}, A, B, D, bias);
            snprintf(name, sizeof name, "N%d %s fp8 wgrad f32", N, L.name);
            run({name, true, false, in, o, N, N, N, in, CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_32F, true, false, false, 0.f}, A, B, D, bias);
        }
    }
    return 0;
}
