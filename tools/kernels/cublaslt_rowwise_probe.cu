// Whether this GPU's cuBLASLt takes fp8 products with a scale per row of A and per column of B
// (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, torchao's rowwise recipe) in fsdp4j's three "TN" layouts, and how they
// compare with one scale per tensor: each product checked against float64 on the host (random fp8 operands, random
// scales), then timed at Qwen2.5-7B's gate|up shape (the least of 5 rounds of 10 calls), both modes.
// On the GPU machine: nvcc -O2 -o /tmp/rowwise tools/kernels/cublaslt_rowwise_probe.cu -I$INC -L$L -l:libcublasLt.so.13
// (INC and L: the folders of cublasLt.h and libcublasLt.so.13), then LD_LIBRARY_PATH=$L /tmp/rowwise.
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>

static cublasLtHandle_t handle;
static void* workspace; static const size_t WS = 32u << 20;

static void* dmalloc(size_t n) { void* p; cudaMalloc(&p, n); cudaMemset(p, 0, n); return p; }

struct Case { const char* name; cudaDataType a, b, d; bool fast; };

// D (m x n, column-major) = diag(sa) (A^T B) diag(sb) with A stored k x m, B stored k x n (both K-major), or one scale each
static cublasStatus_t matmul(const Case& c, bool rowwise, int m, int n, int k, void* A, void* B, void* D, float* sa,
                             float* sb, int reps, float* ms) {
    cublasLtMatmulDesc_t d; cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    int32_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, 4);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &nn, 4);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, 8);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, 8);
    if (rowwise) {
        int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, 4);
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, 4);
    }
    int8_t fast = c.fast ? 1 : 0; cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, 1);
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatrixLayoutCreate(&la, c.a, k, m, k); cublasLtMatrixLayoutCreate(&lb, c.b, k, n, k);
    cublasLtMatrixLayoutCreate(&ld, c.d, m, n, m);
    cublasLtMatmulPreference_t p; cublasLtMatmulPreferenceCreate(&p);
    uint64_t wsb = WS; cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, 8);
    cublasLtMatmulHeuristicResult_t r; int cnt = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle, d, la, lb, ld, ld, p, 1, &r, &cnt);
    if (s == 0 && cnt == 0) s = CUBLAS_STATUS_NOT_SUPPORTED;
    float alpha = 1.f, beta = 0.f;
    if (s == 0) s = cublasLtMatmul(handle, d, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &r.algo, workspace, WS, 0);
    if (s == 0 && reps > 0) {
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1); *ms = 1e30f;
        for (int round = 0; round < 5; round++) {
            cudaEventRecord(e0);
            for (int i = 0; i < reps; i++) cublasLtMatmul(handle, d, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &r.algo, workspace, WS, 0);
            cudaEventRecord(e1); cudaEventSynchronize(e1); float x; cudaEventElapsedTime(&x, e0, e1);
            if (x / reps < *ms) *ms = x / reps;
        }
    }
    cudaDeviceSynchronize();
    cublasLtMatmulPreferenceDestroy(p); cublasLtMatrixLayoutDestroy(la); cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld); cublasLtMatmulDescDestroy(d);
    return s;
}

static float fp8ToFloat(uint8_t v, cudaDataType t) {
    if (t == CUDA_R_8F_E4M3) { __nv_fp8_e4m3 x; x.__x = v; return float(x); }
    __nv_fp8_e5m2 x; x.__x = v; return float(x);
}

static uint8_t randomFp8(cudaDataType t) {
    float f = (rand() / (float)RAND_MAX - 0.5f) * 8.f;
    if (t == CUDA_R_8F_E4M3) return __nv_fp8_e4m3(f).__x;
    return __nv_fp8_e5m2(f).__x;
}

static float bf16ToFloat(uint16_t v) { uint32_t u = (uint32_t)v << 16; float f; memcpy(&f, &u, 4); return f; }

int main() {
    cublasLtCreate(&handle);
    printf("cublasLt version %zu\n", cublasLtGetVersion());
    workspace = dmalloc(WS);
    Case cases[] = {{"forward e4m3 x e4m3 -> bf16, fast", CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16BF, true},
                    {"dgrad e4m3 x e5m2 -> bf16", CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_16BF, false},
                    {"wgrad e4m3 x e5m2 -> f32", CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_32F, false}};
    int m = 256, n = 192, k = 512;
    for (const Case& c : cases) {
        std::vector<uint8_t> a((size_t)k * m), b((size_t)k * n);
        std::vector<float> sa(m), sb(n);
        for (auto& v : a) v = randomFp8(c.a);
        for (auto& v : b) v = randomFp8(c.b);
        for (auto& v : sa) v = 0.25f + rand() / (float)RAND_MAX;
        for (auto& v : sb) v = 0.25f + rand() / (float)RAND_MAX;
        void* A = dmalloc(a.size()); void* B = dmalloc(b.size()); void* D = dmalloc((size_t)m * n * 4);
        float* SA = (float*)dmalloc(m * 4); float* SB = (float*)dmalloc(n * 4);
        cudaMemcpy(A, a.data(), a.size(), cudaMemcpyHostToDevice); cudaMemcpy(B, b.data(), b.size(), cudaMemcpyHostToDevice);
        cudaMemcpy(SA, sa.data(), m * 4, cudaMemcpyHostToDevice); cudaMemcpy(SB, sb.data(), n * 4, cudaMemcpyHostToDevice);
        float ms;
        cublasStatus_t s = matmul(c, true, m, n, k, A, B, D, SA, SB, 0, &ms);
        double worst = 0;
        if (s == 0) {
            size_t bytes = c.d == CUDA_R_32F ? 4 : 2;
            std::vector<uint8_t> out((size_t)m * n * bytes);
            cudaMemcpy(out.data(), D, out.size(), cudaMemcpyDeviceToHost);
            for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) {
                double ref = 0, mag = 0;
                for (int p = 0; p < k; p++) {
                    double x = (double)fp8ToFloat(a[(size_t)i * k + p], c.a) * fp8ToFloat(b[(size_t)j * k + p], c.b);
                    ref += x; mag += fabs(x);
                }
                ref *= (double)sa[i] * sb[j]; mag *= (double)sa[i] * sb[j];
                float got;
                if (bytes == 4) memcpy(&got, &out[((size_t)j * m + i) * 4], 4);
                else { uint16_t h; memcpy(&h, &out[((size_t)j * m + i) * 2], 2); got = bf16ToFloat(h); }
                double err = fabs(got - ref) / (mag + 1e-30);
                if (err > worst) worst = err;
            }
        }
        printf("%-36s rowwise: status %d, worst error / sum of |terms| %.2e\n", c.name, s, worst);
        cudaFree(A); cudaFree(B); cudaFree(D); cudaFree(SA); cudaFree(SB);
    }
    // rates at gate|up's shape, 2048 tokens: forward (m 37888, n 2048, k 3584), both modes
    int M = 37888, N = 2048, K = 3584;
    void* A = dmalloc((size_t)M * K); void* B = dmalloc((size_t)N * K); void* D = dmalloc((size_t)M * N * 4);
    float* SA = (float*)dmalloc((size_t)M * 4); float* SB = (float*)dmalloc((size_t)N * 4);
    std::vector<float> ones(M, 1.f);
    cudaMemcpy(SA, ones.data(), (size_t)M * 4, cudaMemcpyHostToDevice); cudaMemcpy(SB, ones.data(), (size_t)N * 4, cudaMemcpyHostToDevice);
    for (const Case& c : cases) {
        float tensor = -1, row = -1;
        cublasStatus_t s1 = matmul(c, false, M, N, K, A, B, D, SA, SB, 10, &tensor);
        cublasStatus_t s2 = matmul(c, true, M, N, K, A, B, D, SA, SB, 10, &row);
        printf("%-36s m %d n %d k %d: per tensor %.4f ms (status %d), per row %.4f ms (status %d)\n", c.name, M, N, K,
               tensor, s1, row, s2);
    }
    return 0;
}
