// Which cuBLASLt fp8 descriptor settings a GPU accepts: each variant's heuristic status and count, and the matmul status.
// On the GPU machine: nvcc -o /tmp/probe tools/kernels/cublaslt_fp8_probe.cu -I/usr/local/cuda-13.0/include -L$L -l:libcublasLt.so.13 -lcudart
// (L: the folder of libcublasLt.so.13), then LD_LIBRARY_PATH=$L /tmp/probe. Variant 3 puts one scale 4 bytes after the other.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
static void* dmalloc(size_t n) { void* p; cudaMalloc(&p, n); cudaMemset(p, 0, n); return p; }
int main() {
  cublasLtHandle_t h; cublasLtCreate(&h);
  printf("cublasLt version %zu\n", cublasLtGetVersion());
  int m = 4608, n = 2048, k = 3584;
  char* A = (char*)dmalloc((size_t)m * k); char* B = (char*)dmalloc((size_t)k * n); char* D = (char*)dmalloc((size_t)m * n * 2);
  float one = 1.f; float* s = (float*)dmalloc(64); cudaMemcpy(s, &one, 4, cudaMemcpyHostToDevice); cudaMemcpy(s + 1, &one, 4, cudaMemcpyHostToDevice);
  cudaMemcpy(s + 4, &one, 4, cudaMemcpyHostToDevice);
  size_t ws = 32u << 20; void* work = dmalloc(ws);
  for (int v = 0; v < 8; v++) {
    cublasLtMatmulDesc_t d; cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    int32_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N; int32_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, 4);
    cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &nn, 4);
    if (v != 1) cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 4);
    float* as = s; float* bs = (v == 3) ? s + 1 : s + 4; // v3: a scale 4 bytes after the other
    if (v != 2) { cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &as, 8);
                  cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bs, 8); }
    int8_t fast = 1; if (v != 4) cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, 1);
    cudaDataType bt = (v == 6) ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    cublasLtMatrixLayout_t la, lb, ld; cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, bt, k, n, k); cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m);
    cublasLtMatmulPreference_t p; cublasLtMatmulPreferenceCreate(&p);
    uint64_t wsb = ws; cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, 8);
    if (v != 5) { uint32_t al = 256; cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, 4);
      cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, 4);
      cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, 4);
      cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, 4); }
    if (v == 7) { int64_t al = 256; // the alignment given as 8 bytes
      cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, 8); }
    cublasLtMatmulHeuristicResult_t r; int cnt = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, d, la, lb, ld, ld, p, 1, &r, &cnt);
    float alpha = 1.f, beta = 0.f; cublasStatus_t ms = CUBLAS_STATUS_NOT_SUPPORTED;
    if (hs == 0 && cnt > 0) ms = cublasLtMatmul(h, d, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &r.algo, work, ws, 0);
    cudaError_t ce = cudaDeviceSynchronize();
    printf("variant %d: heuristic %d count %d matmul %d cuda %d\n", v, hs, cnt, ms, ce);
  }
  return 0;
}
