// attention_sm90.cu: the bf16 causal attention of attention_tc.cu (the forward; the backward's dk, dv and dq, below) on
// Hopper's own instructions (sm_90a only: compile with --gpu-architecture=sm_90a): warpgroup matrix products
// (wgmma.mma_async, m64nNk16 bf16 -> fp32) from shared-memory tiles in the 128-byte swizzled layout, filled by the bulk
// tensor copy engine (TMA, cp.async.bulk.tensor) through a tensor map of qkv, completing on mbarriers;
// warp-specialised: one producer thread streams 128-key (K, V) tiles into a three-stage ring while two consumer
// warpgroups, each owning 64 of the block's 128 query rows, compute S = Q K^T (both operands from shared memory), the
// online softmax in registers, and O += P V (P from registers, V from shared memory, transposed by the descriptor);
// registers move from the producer warpgroup to the consumers (setmaxnreg). Each consumer issues tile j + 1's scores
// and tile j's P V together and computes tile j + 1's softmax while P V runs (flash-attention 3's intra-warpgroup
// overlap); the two consumers also overlap each other's products and softmax. Same semantics and outputs as
// attention_tc_forward_hsH_bf16 (read attention_tc.cu's and attention.cu's headers): out (N, NH * HS) bf16, lse (B, NH,
// T) fp32 natural log, causal, grouped-query heads, any T (tails zero-filled by the copy engine and masked), packed
// documents (docStart), sliding window; probabilities enter the tensor cores rounded to bf16, accumulation is fp32.
//
// attention_sm90_forward_hsH_bf16 for H in {64, 128} (const sm90_tensor_map qkvMap, bf16* out, float* lse,
//                            const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale)
//     qkvMap: a CUtensorMap (128 bytes, passed by value) of qkv made by cuTensorMapEncodeTiled: bf16, rank 3, sizes
//     {W, T, B} (W = (NH + 2 * NKV) * HS), strides {2 * W, 2 * W * T} bytes, box {64, 128, 1}, element strides
//     {1, 1, 1}, no interleave, CU_TENSOR_MAP_SWIZZLE_128B, out-of-bounds elements zero (FLOAT_OOB_FILL_NONE).
//     grid = (ceil(T / 128), NH, B), block = 384 (warpgroups 0 and 1: the consumers; 2: the producer),
//     dynamic shared = SM90_SHARED(HS, 3) = 1024 + 256 * HS + 3 * 512 * HS + 64 bytes (HS = 128: 230464; HS = 64:
//     115776):
//     cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes) once per function.
// attention_sm90_backward_dkdv_hsH_bf16 for H in {64, 128} (const sm90_tensor_map kvMap, const sm90_tensor_map qMap,
//                            const sm90_tensor_map oMap, then attention_tc_backward_dkdv_bf16's arguments without
//                            dOut and qkv: bf16* dQkv, const float* lse, const float* delta, const int* docStart,
//                            int B, int T, int NH, int NKV, int HS, int window, float scale, float* partial,
//                            int splits)
//     dk and dv as attention_tc_backward_dkdv_bf16 computes them (the same arithmetic in the same order: equal to the
//     bit on an H200), the splits' fp32 sums into partial for attention_tc_dkdv_sum_bf16 as there. kvMap: qkvMap
//     above; qMap: the same tensor with boxes {64, 64, 1}; oMap: dOut as bf16 {NH * HS, T, B}, strides
//     {2 * NH * HS, 2 * NH * HS * T}, boxes {64, 64, 1}, the same swizzle. grid = (ceil(T / 128), NKV * splits, B),
//     block = 384, dynamic shared = SM90_DKDV_SHARED(HS, 3) = 1024 + 512 * HS + 768 * HS + 1536 + 64 bytes (HS = 128:
//     166464; HS = 64: 84544). The producer warp stages each step's 64 lse and delta values in shared memory beside
//     Q and dOut: read from L2 by the consumers after each product's wait, they stalled every step (the kernel ran
//     1.75x slower at T = 8192 on an H100, 2026-11-26).
// attention_sm90_backward_dq_hsH_bf16 for H in {64, 128} (const sm90_tensor_map qkvMap, const sm90_tensor_map oMap,
//                            bf16* dQkv, const float* lse, const float* delta, const int* docStart, int B, int T,
//                            int NH, int NKV, int HS, int window, float scale)
//     dq as attention_tc_backward_dq_bf16 computes it (the same arithmetic in the same order: equal to the bit on an
//     H100, tools/kernels/attention_sm90_harness.cu), into dQkv's query columns. qkvMap: the forward's; oMap: dOut as
//     bf16 {NH * HS, T, B}, strides {2 * NH * HS, 2 * NH * HS * T}, boxes {64, 128, 1}, the same swizzle.
//     grid = (ceil(T / 128), NH, B), block = 384, dynamic shared = SM90_DQ_SHARED(HS, 2) = 1024 + 512 * HS +
//     1024 * HS + 64 bytes (HS = 128: 197696; HS = 64: 99392).
#include "common.cuh" // bf16 as bits, NEG_INF, FULL_MASK

#define SM90_BM 128     // query rows a block: two consumer warpgroups of 64
#define SM90_BN 128     // keys a streamed tile
#define SM90_THREADS 384 // warpgroups 0 and 1: consumers; 2: the producer (one thread)
#define SM90_LOG2E 1.4426950408889634f
#define SM90_LN2 0.6931471805599453f

/** A CUtensorMap's 128 opaque bytes (the driver's CUtensorMap, without its header). */
struct __align__(64) sm90_tensor_map {
    unsigned long long words[16];
};

__device__ __forceinline__ unsigned int sm90_smem(const void* p) {
    unsigned int a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

__device__ __forceinline__ float sm90_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ unsigned int sm90_pack_bf16(float lo, float hi) {
    unsigned int r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// ---- mbarriers and the copy engine ----

__device__ __forceinline__ void sm90_mbar_init(unsigned int bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}

/** One arrival that also announces bytes the copy engine will deliver to this phase. */
__device__ __forceinline__ void sm90_mbar_expect(unsigned int bar, unsigned int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void sm90_mbar_arrive(unsigned int bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

/** Waits until the phase of the given parity (0 for the first, 1 for the second, ...) has completed. */
__device__ __forceinline__ void sm90_mbar_wait(unsigned int bar, unsigned int parity) {
    unsigned int done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}

/** The box of map at (c0, c1, c2) into shared memory at dst, completing on bar. */
__device__ __forceinline__ void sm90_tma_load(unsigned int dst, const sm90_tensor_map* map, int c0, int c1, int c2,
                                              unsigned int bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4}], [%5];"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}

// ---- warpgroup matrix products ----

/**
 * A shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte offsets (PTX ISA,
 * "Matrix Descriptor Format"). The tiles here are blocks of 64 bf16 columns (128-byte rows, 8-row atoms of 1024
 * bytes at 1024-byte aligned addresses), as the copy engine writes them with CU_TENSOR_MAP_SWIZZLE_128B.
 */
__device__ __forceinline__ unsigned long long sm90_desc(unsigned int addr, unsigned int lead, unsigned int stride) {
    return (unsigned long long) ((addr & 0x3FFFF) >> 4) | ((unsigned long long) (lead >> 4) << 16)
            | ((unsigned long long) (stride >> 4) << 32) | (1ull << 62);
}

/**
 * The descriptor of the operand bytes further on: desc(addr + bytes) for addresses of the same block (the start
 * address field, addr / 16, does not overflow below 256 KB). One add, where sm90_desc's masks and shifts took four
 * instructions a product and held back their issue.
 */
__device__ __forceinline__ unsigned long long sm90_desc_plus(unsigned long long desc, unsigned int bytes) {
    return desc + (bytes >> 4);
}

__device__ __forceinline__ void sm90_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void sm90_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void sm90_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}

/** Keeps the compiler from moving accesses to registers an asynchronous product owns across this point. */
template <int R>
__device__ __forceinline__ void sm90_fence_regs(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i]) :: "memory");
}

// The products (generated by tools/kernels/attention_sm90_wgmma.py). Accumulator layout (PTX ISA, wgmma m64nNk16
// D): warp w of the warpgroup holds rows 16 w + g and 16 w + g + 8 (g = lane / 4, t = lane % 4); d[4 i + e] is at
// column 8 i + 2 t + (e & 1) of row 16 w + g + 8 (e >> 1). The A operand in registers has mma.sync's m16n8k16
// layout per warp, so two adjacent 8-column accumulator blocks, packed to bf16, are the A of the next product.
// ---- generated by tools/kernels/attention_sm90_wgmma.py: begin
/** d (64 x 128 fp32) = (scaleD ? d : 0) + A (64 x 16, shared, K-major) * B (128 x 16, shared, K-major). */
__device__ __forceinline__ void sm90_wgmma_ss_n128(float (&d)[64], unsigned long long a, unsigned long long b,
                                                   int scaleD) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
                 ", %64, %65, p, 1, 1, 0, 0; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                   "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
                   "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
                   "+f"(d[63])
                 : "l"(a), "l"(b), "r"(scaleD));
}

/** d (64 x 64 fp32) = (scaleD ? d : 0) + A (64 x 16, shared, K-major) * B (64 x 16, shared, K-major). */
__device__ __forceinline__ void sm90_wgmma_ss_n64(float (&d)[32], unsigned long long a, unsigned long long b,
                                                  int scaleD) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
                 ", %32, %33, p, 1, 1, 0, 0; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(scaleD));
}

/** d (64 x 128 fp32) += A (64 x 16 bf16, registers) * B (16 x 128, shared, MN-major: transposed). */
__device__ __forceinline__ void sm90_wgmma_rs_n128(float (&d)[64], const unsigned int* a, unsigned long long b) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, 1; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                   "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
                   "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
                   "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

/** d (64 x 64 fp32) += A (64 x 16 bf16, registers) * B (16 x 64, shared, MN-major: transposed). */
__device__ __forceinline__ void sm90_wgmma_rs_n64(float (&d)[32], const unsigned int* a, unsigned long long b) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

/** d (64 x 64 fp32) = (scaleD ? d : 0) + A (64 x 16 bf16, registers) * B (64 x 16, shared, K-major). */
__device__ __forceinline__ void sm90_wgmma_rsk_n64(float (&d)[32], const unsigned int* a, unsigned long long b,
                                                   int scaleD) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, 0; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scaleD));
}

/**
 * d (64 x 64 fp32) = (scaleD ? d : 0) + A (64 x 16, shared, MN-major: transposed) * B (16 x 64, shared, MN-major:
 * transposed).
 */
__device__ __forceinline__ void sm90_wgmma_ss_tt_n64(float (&d)[32], unsigned long long a, unsigned long long b,
                                                     int scaleD) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
                 ", %32, %33, p, 1, 1, 1, 1; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(scaleD));
}

/** d (64 x 64 fp32) = A (64 x 16, shared, MN-major: transposed) * B (16 x 64, shared, MN-major: transposed). */
__device__ __forceinline__ void sm90_wgmma_ss_tt_n64_first(float (&d)[32], unsigned long long a, unsigned long long b) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, 0, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
                 ", %32, %33, p, 1, 1, 1, 1; }"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]),
                   "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]),
                   "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]),
                   "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]),
                   "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
                 : "l"(a), "l"(b));
}
// ---- generated by tools/kernels/attention_sm90_wgmma.py: end

/**
 * The block's (query tile, head, batch row) with the longest blocks first across the grid (causal: a query tile's
 * work grows with its index), so that the GPU's last wave holds the short ones: attention_tc.cu's tc_block_order.
 */
__device__ __forceinline__ void sm90_block_order(int& tile, int& h, int& b) {
    const int linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const int others = gridDim.y * gridDim.z, rank = linear / others, rest = linear % others;
    tile = gridDim.x - 1 - rank;
    h = rest % gridDim.y;
    b = rest / gridDim.y;
}

/** The first key query q (< T) may see: the window's start, or its document's start if later (attention_tc.cu). */
__device__ __forceinline__ int sm90_first_key(const int* starts, int q, int window) {
    const int lo = window > 0 ? q - window + 1 : 0;
    return starts ? max(lo, starts[q]) : lo;
}

/** Whether every query in [qFirst, qLast] sees every key in [kFirst, kLast] (attention_tc.cu's tc_unmasked). */
__device__ __forceinline__ bool sm90_unmasked(const int* starts, int window, int kFirst, int kLast, int qFirst,
                                              int qLast, int T) {
    return qLast < T && kLast <= qFirst && (window <= 0 || qLast - window + 1 <= kFirst)
            && (starts == nullptr || starts[qLast] <= kFirst);
}

/**
 * Thread 0 sets up a block's barriers, then the block waits for them: once (one arrival, with the bytes of the
 * tiles brought once), and per stage a full barrier (one arrival, with the stage's bytes) and an empty one (eight
 * arrivals: one a consumer warp).
 */
template <int STAGES>
__device__ __forceinline__ void sm90_init_barriers(unsigned int once, unsigned int barFull, unsigned int barEmpty) {
    if (threadIdx.x == 0) {
        sm90_mbar_init(once, 1);
        for (int s = 0; s < STAGES; s++) {
            sm90_mbar_init(barFull + 8 * s, 1);
            sm90_mbar_init(barEmpty + 8 * s, 8); // one arrival a consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
}

/** Where a block keeps its tiles and barriers (shared-memory addresses), and what its consumers share. */
struct sm90_block {
    unsigned int sQ, sKV, barQ, barFull, barEmpty;
    const int* starts;
    int q0, h, b, kStart, qLast, T, NH, window;
    float scale;
};

/** Issues S = Q K^T for this warpgroup's 64 rows against a 128-key tile (both operands in shared memory). */
template <int HS>
__device__ __forceinline__ void sm90_issue_scores(float (&sc)[SM90_BN / 2], unsigned int sQ, unsigned int sK, int wg) {
    const unsigned long long qa = sm90_desc(sQ + wg * 64 * 128, 16, 1024), kb = sm90_desc(sK, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) { // 16 columns a step: 32 bytes inside a 128-byte swizzled row
        sm90_wgmma_ss_n128(sc, sm90_desc_plus(qa, (kk >> 2) * SM90_BM * 128 + (kk & 3) * 32),
                           sm90_desc_plus(kb, (kk >> 2) * SM90_BN * 128 + (kk & 3) * 32), kk > 0);
    }
}

/**
 * Issues acc (64 x HS) += A B over ROWS of B's rows, 16 a step: A as bf16 fragments in registers (4 a step), B at b
 * (rows of HS columns, 128-byte swizzle, 2048 bytes a step, its 64-column blocks block bytes apart) transposed by its
 * descriptor. O += P V in the forward, dv += P^T dOut and dk += dS^T Q in dk/dv, dq += dS K in dq.
 */
template <int HS, int ROWS>
__device__ __forceinline__ void sm90_issue_rs(float (&acc)[HS / 2], const unsigned int* a, unsigned int b,
                                              unsigned int block) {
    const unsigned long long b0 = sm90_desc(b, block, 1024);
#pragma unroll
    for (int j = 0; j < ROWS / 16; j++) {
        const unsigned long long bj = sm90_desc_plus(b0, j * 2048);
        if constexpr (HS == 128) sm90_wgmma_rs_n128(acc, a + 4 * j, bj);
        else sm90_wgmma_rs_n64(acc, a + 4 * j, bj);
    }
}

/**
 * Loads this warp's A fragments (wgmma's register operand: mma.sync's m16n8k16 layout) of the first 16 R columns of a
 * 64-row operand tile in shared memory (K-major, 128-byte swizzle, 64-column blocks block bytes apart): the
 * warpgroup's rows 16 wl .. 16 wl + 15, 16 columns a step, one ldmatrix.x4 each (lanes 8 m .. 8 m + 7 address matrix
 * m's rows: m = 0 and 1 the rows' first 8 columns, 2 and 3 the next 8).
 */
template <int R>
__device__ __forceinline__ void sm90_load_a_fragments(unsigned int (&f)[R][4], unsigned int tile, unsigned int block,
                                                      int wl, int lane) {
    const int m = lane >> 3, row = 16 * wl + (lane & 7) + 8 * (m & 1);
#pragma unroll
    for (int kk = 0; kk < R; kk++) {
        const int chunk = 2 * (kk & 3) + (m >> 1); // the 16-byte chunk of the 128-byte row, before the swizzle
        const unsigned int addr = tile + (kk >> 2) * block + row * 128 + ((chunk ^ (row & 7)) << 4);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(f[kk][0]), "=r"(f[kk][1]), "=r"(f[kk][2]), "=r"(f[kk][3]) : "r"(addr) : "memory");
    }
}

/**
 * Issues acc (64 x 64) = A B^T as one group of products over HS columns (the backward's score products: S^T and dP^T
 * in dk/dv, S and dP in dq): A's and B's 64 rows at a and b (K-major, 128-byte swizzle), each operand's 64-column
 * blocks aBlock and bBlock bytes apart. With R > 0, A's first 16 R columns come from registers instead, af
 * (sm90_load_a_fragments): those products read only B from shared memory, which both operands of these m64n64
 * products together use up at the tensor cores' rate (128 bytes a cycle).
 */
template <int HS, int R = 0>
__device__ __forceinline__ void sm90_issue_scores_n64(float (&acc)[32], unsigned int a, unsigned int aBlock,
                                                      unsigned int b, unsigned int bBlock,
                                                      const unsigned int (*af)[4] = nullptr) {
    const unsigned long long a0 = sm90_desc(a, 16, 1024), b0 = sm90_desc(b, 16, 1024);
#pragma unroll
    for (int kk = 0; kk < HS / 16; kk++) {
        const unsigned long long bk = sm90_desc_plus(b0, (kk >> 2) * bBlock + (kk & 3) * 32);
        if (kk < R) sm90_wgmma_rsk_n64(acc, af[kk], bk, kk > 0); // 16 columns a step: 32 bytes of a 128-byte row
        else sm90_wgmma_ss_n64(acc, sm90_desc_plus(a0, (kk >> 2) * aBlock + (kk & 3) * 32), bk, kk > 0);
    }
    sm90_wgmma_commit();
}

/**
 * The online softmax of one tile of scores (raw q.k, in place: becomes the unnormalised probabilities): masks the
 * keys the rows may not see (only where the warp's 16 rows need it), updates the running maxima m (log2 units) and
 * this thread's part of the row sums l, and returns in alpha the factors that rescale the rows' earlier outputs.
 */
__device__ __forceinline__ void sm90_softmax(float (&sc)[SM90_BN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                             const int* starts, int window, int k0, int qWarp, int T, float sl2) {
    constexpr int BN = SM90_BN;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (!sm90_unmasked(starts, window, k0, k0 + BN - 1, qWarp, qWarp + 15, T)) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int q = qWarp + 8 * r + g;
            const int first = q < T ? sm90_first_key(starts, q, window) : 0;
#pragma unroll
            for (int i = 0; i < BN / 8; i++)
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    const int k = k0 + 8 * i + 2 * t + c;
                    if (!(q < T && k <= q && k >= first)) sc[4 * i + 2 * r + c] = NEG_INF;
                }
        }
    }
    float mSafe[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float mx = NEG_INF;
#pragma unroll
        for (int i = 0; i < BN / 8; i++) mx = fmaxf(mx, fmaxf(sc[4 * i + 2 * r], sc[4 * i + 2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
        const float mNew = fmaxf(m[r], mx * sl2);
        mSafe[r] = mNew == NEG_INF ? 0.0f : mNew;
        alpha[r] = sm90_exp2(m[r] - mSafe[r]);
        m[r] = mNew;
    }
    float ps[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < BN / 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            sc[4 * i + e] = sm90_exp2(fmaf(sc[4 * i + e], sl2, -mSafe[e >> 1]));
            ps[e >> 1] += sc[4 * i + e];
        }
    l[0] = l[0] * alpha[0] + ps[0]; // each thread keeps its own part of the row sums; the quad adds them at the end
    l[1] = l[1] * alpha[1] + ps[1];
}

template <int R>
__device__ __forceinline__ void sm90_rescale(float (&o)[R], const float (&alpha)[2]) {
#pragma unroll
    for (int i = 0; i < R / 4; i++) {
        o[4 * i] *= alpha[0];
        o[4 * i + 1] *= alpha[0];
        o[4 * i + 2] *= alpha[1];
        o[4 * i + 3] *= alpha[1];
    }
}

/** The probabilities as bf16 A fragments: two adjacent 8-key accumulator blocks make one 16-key step. */
__device__ __forceinline__ void sm90_pack_p(unsigned int (&p)[SM90_BN / 4], const float (&sc)[SM90_BN / 2]) {
#pragma unroll
    for (int j = 0; j < SM90_BN / 16; j++) {
        p[4 * j] = sm90_pack_bf16(sc[8 * j], sc[8 * j + 1]);
        p[4 * j + 1] = sm90_pack_bf16(sc[8 * j + 2], sc[8 * j + 3]);
        p[4 * j + 2] = sm90_pack_bf16(sc[8 * j + 4], sc[8 * j + 5]);
        p[4 * j + 3] = sm90_pack_bf16(sc[8 * j + 6], sc[8 * j + 7]);
    }
}

/**
 * A consumer warpgroup of sm90_forward: its 64 query rows (this thread's: qWarp + g and qWarp + g + 8)
 * against every streamed (K, V) tile. PIPE: the products of tile j + 1's scores and of tile j's P V run while the
 * warpgroup computes tile j + 1's softmax (flash-attention 3's intra-warpgroup overlap; a stage is released one tile
 * later); otherwise each tile's scores, softmax and P V in turn. Every tile runs through the products, also where
 * none of the warpgroup's rows sees a key (masked to zero probabilities; rare: the rows past T, a document's or
 * window's first tile): a branch around the products would make ptxas serialise them (C7520).
 * Flash-attention 3's ping-pong on top (the two consumers taking turns at issuing their products, through two named
 * barriers) measured slower on an H200 (2026-11-25, tools/kernels/attention_sm90_harness.cu, Qwen2.5-7B's shapes):
 * 460 against 477 TFLOP/s at T = 2048, 555 against 633 at T = 8192; the consumers interleave well enough unordered.
 */
template <int HS, bool PIPE, int STAGES>
__device__ __forceinline__ void sm90_consume(const sm90_block& k, bf16_t* out, float* lse) {
    constexpr int BN = SM90_BN;
    constexpr unsigned int KV_BYTES = BN * HS * 2;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wg = __shfl_sync(0xffffffffu, warp >> 2, 0), wl = warp & 3, g = lane >> 2, t = lane & 3; // wg: warp-uniform
    const int T = k.T, qWarp = k.q0 + 64 * wg + 16 * wl;
    const float sl2 = k.scale * SM90_LOG2E;
    float o[HS / 2];
#pragma unroll
    for (int i = 0; i < HS / 2; i++) o[i] = 0.0f;
    float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f}, alpha[2];
    float sc[BN / 2];
    unsigned int p[BN / 4];
    sm90_mbar_wait(k.barQ, 0);
    if (!PIPE) {
        for (int it = 0, k0 = k.kStart; k0 <= k.qLast; it++, k0 += BN) {
            const int s = it % STAGES;
            const unsigned int sK = k.sKV + s * 2 * KV_BYTES, sV = sK + KV_BYTES;
            sm90_mbar_wait(k.barFull + 8 * s, (it / STAGES) & 1);
            sm90_fence_regs(sc);
            sm90_wgmma_fence();
            sm90_issue_scores<HS>(sc, k.sQ, sK, wg);
            sm90_wgmma_commit();
            sm90_wgmma_wait<0>();
            sm90_fence_regs(sc);
            sm90_softmax(sc, m, l, alpha, k.starts, k.window, k0, qWarp, T, sl2);
            sm90_rescale(o, alpha);
            sm90_pack_p(p, sc);
            sm90_fence_regs(o);
            sm90_wgmma_fence();
            sm90_issue_rs<HS, SM90_BN>(o, p, sV, SM90_BN * 128);
            sm90_wgmma_commit();
            sm90_wgmma_wait<0>();
            sm90_fence_regs(o);
            __syncwarp();
            if (lane == 0) sm90_mbar_arrive(k.barEmpty + 8 * s); // this warp is done with the stage
        }
    } else {
        for (int it = 0, k0 = k.kStart; k0 <= k.qLast; it++, k0 += BN) {
            const int s = it % STAGES, prev = (it + STAGES - 1) % STAGES;
            const unsigned int sK = k.sKV + s * 2 * KV_BYTES;
            sm90_mbar_wait(k.barFull + 8 * s, (it / STAGES) & 1);
            sm90_fence_regs(sc);
            sm90_fence_regs(o);
            sm90_wgmma_fence();
            sm90_issue_scores<HS>(sc, k.sQ, sK, wg);
            sm90_wgmma_commit();
            if (it > 0) sm90_issue_rs<HS, SM90_BN>(o, p, k.sKV + prev * 2 * KV_BYTES + KV_BYTES, SM90_BN * 128);
            sm90_wgmma_commit();
            sm90_wgmma_wait<1>(); // the scores (the older group) are in; P V may still run
            sm90_fence_regs(sc);
            sm90_softmax(sc, m, l, alpha, k.starts, k.window, k0, qWarp, T, sl2);
            sm90_wgmma_wait<0>();
            sm90_fence_regs(o);
            if (it > 0) {
                __syncwarp();
                if (lane == 0) sm90_mbar_arrive(k.barEmpty + 8 * prev);
            }
            sm90_rescale(o, alpha);
            sm90_pack_p(p, sc);
        }
        const int last = (((k.qLast - k.kStart) / BN) % STAGES);
        sm90_fence_regs(o);
        sm90_wgmma_fence();
        sm90_issue_rs<HS, SM90_BN>(o, p, k.sKV + last * 2 * KV_BYTES + KV_BYTES, SM90_BN * 128);
        sm90_wgmma_commit();
        sm90_wgmma_wait<0>();
        sm90_fence_regs(o);
        // the last stage is not released: nothing waits for it
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float sum = l[r];
        sum += __shfl_xor_sync(FULL_MASK, sum, 1);
        sum += __shfl_xor_sync(FULL_MASK, sum, 2);
        const int q = qWarp + 8 * r + g;
        if (q >= T) continue;
        const float inv = 1.0f / sum;
        bf16_t* dst = out + ((long long) k.b * T + q) * k.NH * HS + k.h * HS + 2 * t;
#pragma unroll
        for (int i = 0; i < HS / 8; i++) {
            *reinterpret_cast<unsigned int*>(dst + 8 * i) =
                    sm90_pack_bf16(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
        }
        if (t == 0) lse[((long long) k.b * k.NH + k.h) * T + q] = (m[r] + log2f(sum)) * SM90_LN2;
    }
}

/** Dynamic shared memory of sm90_forward<HS, ., STAGES>: alignment slack, Q, the (K, V) ring, the barriers. */
#define SM90_SHARED(HS, STAGES) (1024 + 2 * SM90_BM * (HS) + (STAGES) * 4 * SM90_BN * (HS) + 64)

template <int HS, bool PIPE, int STAGES>
__device__ __forceinline__ void sm90_forward(const sm90_tensor_map* map, bf16_t* out, float* lse, const int* docStart,
                                             int T, int NH, int NKV, int window, float scale) {
    constexpr int BM = SM90_BM, BN = SM90_BN;
    constexpr int CB = HS / 64; // 64-column blocks of a row (128 bytes each)
    constexpr unsigned int Q_BYTES = BM * HS * 2, KV_BYTES = BN * HS * 2;
    extern __shared__ __align__(1024) unsigned char sm90_smem_raw[];
    sm90_block k;
    // tiles at 1024-byte aligned addresses (the swizzle's atoms): Q, then STAGES x (K, V), then the barriers
    k.sQ = (sm90_smem(sm90_smem_raw) + 1023) & ~1023u;
    k.sKV = k.sQ + Q_BYTES;
    k.barQ = k.sKV + STAGES * 2 * KV_BYTES;
    k.barFull = k.barQ + 8;
    k.barEmpty = k.barFull + 8 * STAGES;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int tile;
    sm90_block_order(tile, k.h, k.b);
    k.q0 = tile * BM;
    k.T = T;
    k.NH = NH;
    k.window = window;
    k.scale = scale;
    k.starts = docStart ? docStart + (long long) k.b * T : nullptr;
    k.qLast = min(k.q0 + BM - 1, T - 1);
    k.kStart = max(0, sm90_first_key(k.starts, k.q0, window)) & ~(BN - 1); // first keys never decrease
    sm90_init_barriers<STAGES>(k.barQ, k.barFull, k.barEmpty);
    if (warp >= 8) { // the producer warpgroup: one thread issues every copy; its registers go to the consumers
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
        if (warp == 8 && lane == 0) {
            const int kvh = k.h / (NH / NKV);
            sm90_mbar_expect(k.barQ, Q_BYTES);
#pragma unroll
            for (int c = 0; c < CB; c++) sm90_tma_load(k.sQ + c * BM * 128, map, k.h * HS + 64 * c, k.q0, k.b, k.barQ);
            for (int it = 0, k0 = k.kStart; k0 <= k.qLast; it++, k0 += BN) {
                const int s = it % STAGES, n = it / STAGES;
                if (n > 0) sm90_mbar_wait(k.barEmpty + 8 * s, (n - 1) & 1);
                const unsigned int sK = k.sKV + s * 2 * KV_BYTES, sV = sK + KV_BYTES, full = k.barFull + 8 * s;
                sm90_mbar_expect(full, 2 * KV_BYTES);
#pragma unroll
                for (int c = 0; c < CB; c++) {
                    sm90_tma_load(sK + c * BN * 128, map, (NH + kvh) * HS + 64 * c, k0, k.b, full);
                    sm90_tma_load(sV + c * BN * 128, map, (NH + NKV + kvh) * HS + 64 * c, k0, k.b, full);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
        sm90_consume<HS, PIPE, STAGES>(k, out, lse);
    }
}

#define HOPPER_FORWARD_KERNEL(H, PIPE, STAGES)                                                                      \
    extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1) attention_sm90_forward_hs##H##_bf16(              \
            const __grid_constant__ sm90_tensor_map qkvMap, bf16_t* out, float* lse, const int* docStart, int B,    \
            int T, int NH, int NKV, int HS, int window, float scale) {                                              \
        sm90_forward<H, PIPE, STAGES>(&qkvMap, out, lse, docStart, T, NH, NKV, window, scale);                      \
    }
HOPPER_FORWARD_KERNEL(64, true, 3)
HOPPER_FORWARD_KERNEL(128, true, 3)

// ---- the backward's dk and dv ----

/** The last query that may see a key in [.., kLast] of a packed sequence (attention_tc.cu's tc_doc_last_query). */
__device__ __forceinline__ int sm90_doc_last_query(const int* starts, int kLast, int T) {
    int lo = kLast, hi = T - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (starts[mid] <= kLast) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/**
 * Dynamic shared memory of sm90_backward_dkdv<HS, STAGES, false>: slack, K and V (128 keys), (Q, dOut) stages, each
 * stage's 64 queries' lse and delta (512 bytes), barriers.
 */
#define SM90_DKDV_SHARED(HS, STAGES) (1024 + 4 * SM90_BN * (HS) + (STAGES) * (4 * 64 * (HS) + 512) + 64)

/**
 * Dynamic shared memory of sm90_backward_dkdv<HS, STAGES, true> (dq too): SM90_DKDV_SHARED's, two dS^T tiles (128
 * keys x 64 queries, bf16), four dq tiles (64 x 64 fp32) and twelve barriers more.
 */
#define SM90_FUSED_SHARED(HS, STAGES) (1024 + 4 * SM90_BN * (HS) + (STAGES) * (4 * 64 * (HS) + 512) + 64 + 2 * SM90_BN * 64 * 2 + 4 * 64 * 64 * 4 + 96)

__device__ __forceinline__ void sm90_fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/** This warp's lanes are done with their shared-memory writes; lane 0 arrives at bar for the warp. */
__device__ __forceinline__ void sm90_warp_arrive(unsigned int bar) {
    __syncwarp();
    if ((threadIdx.x & 31) == 0) sm90_mbar_arrive(bar);
}

/**
 * Issues dq (64 x 64 fp32) = dS (64 queries x 128 keys: the dS^T tile at sDS, transposed) K (128 keys x this
 * warpgroup's 64 columns at sKw), both operands transposed by their descriptors.
 */
__device__ __forceinline__ void sm90_fused_dq_product(float (&dq)[32], unsigned int sDS, unsigned int sKw) {
    const unsigned long long a0 = sm90_desc(sDS, 8192, 1024), b0 = sm90_desc(sKw, SM90_BN * 128, 1024);
#pragma unroll
    for (int j = 0; j < SM90_BN / 16; j++) { // 16 keys a step: 2048 bytes of dS^T and of K
        const unsigned long long a = sm90_desc_plus(a0, j * 2048), b = sm90_desc_plus(b0, j * 2048);
        if (j == 0) sm90_wgmma_ss_tt_n64_first(dq, a, b); // written, not read: dq holds nothing between steps
        else sm90_wgmma_ss_tt_n64(dq, a, b, 1);
    }
    sm90_wgmma_commit();
}

/**
 * Where element (row, col) of the 64-query tile at q0 of head h lies in the fused backward's dq sums: (B, NH,
 * ceil(T / 64), 2, 64 x 64) fp32, each tile's two halves of the columns as one warpgroup stages them (rows of 64, the
 * 8-column groups XOR-swizzled by the row mod 8: no bank conflicts in the staging stores).
 */
__device__ __forceinline__ long long sm90_fused_dq_at(int b, int h, int NH, int qTiles, int q0, int row, int col) {
    return ((((long long) b * NH + h) * qTiles + q0 / 64) * 2 + (col >> 6)) * 4096 + row * 64
            + ((((col & 63) >> 3) ^ (row & 7)) << 3) + (col & 7);
}

/**
 * Stages this warpgroup's dq tile for the adding thread: waits until its buffer is free, writes it (the sums'
 * layout, sm90_fused_dq_at) and arrives at its full barrier.
 */
__device__ __forceinline__ void sm90_fused_stage_dq(const float (&dq)[32], unsigned int sDQ, unsigned int free,
                                                    unsigned int freeParity, unsigned int full) {
    const int lane = threadIdx.x & 31, wl = (threadIdx.x >> 5) & 3, g = lane >> 2, t = lane & 3;
    sm90_mbar_wait(free, freeParity);
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const unsigned int row = 16 * wl + g + 8 * r;
            const unsigned int addr = sDQ + row * 256 + ((i ^ (row & 7)) << 5) + 8 * t;
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(addr), "f"(dq[4 * i + 2 * r]),
                         "f"(dq[4 * i + 2 * r + 1]) : "memory");
        }
    sm90_fence_proxy_async();
    sm90_warp_arrive(full);
}

/**
 * dk and dv of 128 keys (two consumer warpgroups of 64) of one key head, over the query heads of its group (or of
 * a split of it) and the query tiles of 64 that see these keys: per (head, tile), S^T = K Q^T and dP^T = V dOut^T
 * (operands from shared memory, but for K's first 64 columns, read into registers), P^T from the saved
 * lse, dv += P^T dOut (issued as soon as P^T is packed), dS^T = P^T (dP^T - delta) scale while dv's products run, then
 * dk += dS^T Q (P^T and dS^T from registers, dOut and Q transposed by their descriptors). The same arithmetic as
 * attention_tc.cu's tc_backward_dkdv (P and dS rounded to bf16), and the same outputs and partial sums.
 *
 * The two consumer warpgroups taking turns at issuing their products (named barriers) measured 1.07x at head size 64
 * before K's columns were read into registers there, 0.98x after (B 8 x 2048, an H100, 2026-11-27), and 0.93-1.05x at
 * head size 128: not done.
 *
 * With DQ (head size 128) the kernel is the whole backward, as flash-attention 3's: each step also stores its dS^T
 * (bf16, this warpgroup's 64 keys) in shared memory (two tiles, by step parity); in the next step, once the other
 * warpgroup's half is there, each warpgroup multiplies the tile by K for 64 of the head's 128 columns and stages the
 * 64 x 64 fp32 result, which a thread of the producer warpgroup adds into dqSums (sm90_fused_dq_at's layout, zero
 * before the call) with the copy engine (cp.reduce.async.bulk) while the consumers go on;
 * attention_sm90_dq_from_sums_bf16 writes dq from the sums. Five products a step instead of the two kernels' seven:
 * 1.02-1.08x at 4096 tokens, 1.04-1.10x at 8192 and 16384, 0.94x at B 8 x 2048 (the sums' zeroing and reading; an
 * H200, 2026-11-27, docs/benchmarks.md); on an H100 1.03-1.11x for one sequence, 0.59-0.98x for 2-4 sequences of
 * 4096-8192 tokens. The products' cost is not what is left: without the additions the kernel took 6.4 ms at 16384
 * tokens (28 / 4 heads), with them 9.3-9.5; added from the registers (red.global.add.v2.f32) or by two warps of the
 * producer warpgroup (red.global.add.v4.f32), 10.6-12.4. dk and dv are equal to the bit to DQ false's; dq's additions
 * land in no fixed order.
 */
template <int HS, int STAGES, bool DQ = false>
__device__ __forceinline__ void sm90_backward_dkdv(const sm90_tensor_map* kvMap, const sm90_tensor_map* qMap,
                                                   const sm90_tensor_map* oMap, bf16_t* dQkv, const float* lse,
                                                   const float* delta, const int* docStart, int T, int NH, int NKV,
                                                   int window, float scale, float* partial, int splits,
                                                   float* dqSums = nullptr) {
    static_assert(!DQ || HS == 128, "dq in the dk/dv kernel: head size 128");
    constexpr int BK = SM90_BN, BQ = 64, CB = HS / 64;
    constexpr unsigned int KV_BYTES = BK * HS * 2, QO_BYTES = BQ * HS * 2;
    constexpr unsigned int DS_BYTES = BK * BQ * 2, DQ_BYTES = BQ * 64 * 4; // DQ's dS^T and dq tiles
    extern __shared__ __align__(1024) unsigned char sm90_smem_raw[];
    const unsigned int sK = (sm90_smem(sm90_smem_raw) + 1023) & ~1023u, sV = sK + KV_BYTES;
    const unsigned int sQO = sV + KV_BYTES; // STAGES x (Q, dOut)
    // DQ: two dS^T tiles (by step parity) and 2 x 2 dq tiles ([warpgroup][buffer])
    const unsigned int sDS = sQO + STAGES * 2 * QO_BYTES, sDQ = sDS + 2 * DS_BYTES;
    const unsigned int sLD = sDS + (DQ ? 2 * DS_BYTES + 4 * DQ_BYTES : 0); // STAGES x (64 lse, 64 delta) as fp32
    const unsigned int barKV = sLD + STAGES * 512, barFull = barKV + 8, barEmpty = barFull + 8 * STAGES;
    // DQ: barriers [warpgroup][tile], that warpgroup's half of dS^T is in, and [warpgroup][buffer], dq staged / free
    const unsigned int barDs = barEmpty + 8 * STAGES, barDqFull = barDs + 32, barDqFree = barDqFull + 32;
    float* const lseDelta = reinterpret_cast<float*>(sm90_smem_raw + (sLD - sm90_smem(sm90_smem_raw)));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z); // longest (first) tiles first
    const int others = gridDim.y * gridDim.z, tile = linear / others, y = (linear % others) % gridDim.y;
    const int b = (linear % others) / gridDim.y;
    const int k0 = tile * BK, kvh = y / splits, split = y % splits, group = NH / NKV;
    const int heads = group / splits, h0 = kvh * group + split * heads;
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    int qEnd = window > 0 ? min(T - 1, k0 + BK - 2 + window) : T - 1;
    if (starts) qEnd = min(qEnd, sm90_doc_last_query(starts, min(k0 + BK - 1, T - 1), T)); // later documents: none
    const int nq = (qEnd - k0) / BQ + 1, steps = heads * nq; // (query head, query tile) pairs, head-major
    if (DQ && threadIdx.x == 0) { // sm90_init_barriers' fence and __syncthreads cover these too
        for (int i = 0; i < 4; i++) {
            sm90_mbar_init(barDs + 8 * i, 4); // one arrival a warp of that warpgroup
            sm90_mbar_init(barDqFull + 8 * i, 4);
            sm90_mbar_init(barDqFree + 8 * i, 1); // the adding thread, once the copy engine has read the tile
        }
    }
    sm90_init_barriers<STAGES>(barKV, barFull, barEmpty);
    if (warp >= 8) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
        if (DQ && warp == 9 && lane == 0) { // adds each step's two dq tiles into the sums, in the steps' order
            const int qTiles = (T + BQ - 1) / BQ;
            for (int step = 0; step < steps; step++) {
                const int h = h0 + step / nq, q0 = k0 + (step % nq) * BQ, buf = step & 1;
                float* const at = dqSums + sm90_fused_dq_at(b, h, NH, qTiles, q0, 0, 0);
#pragma unroll
                for (int w = 0; w < 2; w++) {
                    sm90_mbar_wait(barDqFull + 8 * (2 * w + buf), (step >> 1) & 1);
                    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
                                 :: "l"(at + w * (BQ * 64)), "r"(sDQ + (2 * w + buf) * DQ_BYTES), "r"(DQ_BYTES)
                                 : "memory");
                }
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                if (step > 0) { // the step before's tiles have been read: their buffers are free
                    asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
#pragma unroll
                    for (int w = 0; w < 2; w++) sm90_mbar_arrive(barDqFree + 8 * (2 * w + (buf ^ 1)));
                }
            }
            asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
        }
        if (warp == 8) { // lane 0 drives the copy engine; the warp's lanes bring each step's lse and delta
            if (lane == 0) {
                sm90_mbar_expect(barKV, 2 * KV_BYTES);
#pragma unroll
                for (int c = 0; c < CB; c++) {
                    sm90_tma_load(sK + c * BK * 128, kvMap, (NH + kvh) * HS + 64 * c, k0, b, barKV);
                    sm90_tma_load(sV + c * BK * 128, kvMap, (NH + NKV + kvh) * HS + 64 * c, k0, b, barKV);
                }
            }
            for (int step = 0; step < steps; step++) {
                const int s = step % STAGES, n = step / STAGES;
                const int h = h0 + step / nq, q0 = k0 + (step % nq) * BQ;
                if (n > 0) sm90_mbar_wait(barEmpty + 8 * s, (n - 1) & 1);
                const long long row = ((long long) b * NH + h) * T;
#pragma unroll
                for (int r = 0; r < 2; r++) { // the consumers read them from shared memory, not from L2 after a wait
                    const int q = q0 + lane + 32 * r;
                    lseDelta[s * 128 + lane + 32 * r] = q < T ? lse[row + q] * SM90_LOG2E : 0.0f; // log2 units
                    lseDelta[s * 128 + 64 + lane + 32 * r] = q < T ? delta[row + q] : 0.0f;
                }
                __syncwarp(); // the lanes' writes before lane 0's arrival (release) below
                if (lane == 0) {
                    const unsigned int sQ = sQO + s * 2 * QO_BYTES, sO = sQ + QO_BYTES, full = barFull + 8 * s;
                    sm90_mbar_expect(full, 2 * QO_BYTES);
#pragma unroll
                    for (int c = 0; c < CB; c++) {
                        sm90_tma_load(sQ + c * BQ * 128, qMap, h * HS + 64 * c, q0, b, full);
                        sm90_tma_load(sO + c * BQ * 128, oMap, h * HS + 64 * c, q0, b, full);
                    }
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
        const int wg = __shfl_sync(0xffffffffu, warp >> 2, 0), wl = warp & 3, g = lane >> 2, t = lane & 3; // wg: warp-uniform
        const int kWarp = k0 + 64 * wg + 16 * wl; // this thread's keys: kWarp + g and kWarp + g + 8
        const float sl2 = scale * SM90_LOG2E;
        float dk[HS / 2], dv[HS / 2];
#pragma unroll
        for (int i = 0; i < HS / 2; i++) dk[i] = dv[i] = 0.0f;
        float st[BQ / 2], dp[BQ / 2];
        unsigned int pa[BQ / 4], sa[BQ / 4];
        [[maybe_unused]] float dq[DQ ? 32 : 1]; // DQ: this warpgroup's 64 of the step before's dq columns
        sm90_mbar_wait(barKV, 0);
        // K's first 64 columns are S^T's A operand from registers, so that S^T's products read only Q from shared
        // memory (all of K does not fit beside the accumulators at head size 128: ptxas serialises the products,
        // C7512). At head size 128 they are read once for the block: 1.05-1.11x (an H100, 2026-11-27). At head size 64
        // ptxas (nvcc 13.0) gets once-read fragments wrong: the PTX reads them before the loop and uses them in every
        // step, but the SASS puts the packed dS^T (dk's A operand) and a delta load into the same registers inside the
        // loop (R168-R183, cuobjdump), so every step after the first multiplied by those. Read again at each step
        // there (before S^T's products, after the last step's products have landed), they are right: 1.02x at B 8 x
        // 2048 and 1.05x at 16384 tokens against K from shared memory.
        constexpr int KR = 4;
        unsigned int kf[KR][4];
        if constexpr (HS == 128) sm90_load_a_fragments<KR>(kf, sK + wg * 64 * 128, BK * 128, wl, lane);
        // Each step in turn: S^T and dP^T as two groups of products, P^T's exponentials while dP^T's products run (the
        // mask after both, where a warp's tile needs one: a branch while dP^T runs makes ptxas serialise the products,
        // C7517), dS^T, then dv and dk. The overlap made the kernel 1.25x faster at T = 8192 and 1.6x at head size 64
        // (an H100, 2026-11-27). Issuing step j + 1's S^T and dP^T before step j's dv and dk (sm90_consume's PIPE)
        // keeps 224 accumulator and fragment registers live at once: at head size 128 ptxas then spills and
        // serialises the products (C7512).
        for (int step = 0; step < steps; step++) {
            const int s = step % STAGES;
            const int q0 = k0 + (step % nq) * BQ;
            const unsigned int sQ = sQO + s * 2 * QO_BYTES, sO = sQ + QO_BYTES;
            sm90_mbar_wait(barFull + 8 * s, (step / STAGES) & 1);
            sm90_fence_regs(st);
            sm90_fence_regs(dp);
            if constexpr (HS == 64) sm90_load_a_fragments<KR>(kf, sK + wg * 64 * 128, BK * 128, wl, lane);
            sm90_wgmma_fence();
            sm90_issue_scores_n64<HS, KR>(st, sK + wg * 64 * 128, BK * 128, sQ, BQ * 128, kf);
            sm90_issue_scores_n64<HS>(dp, sV + wg * 64 * 128, BK * 128, sO, BQ * 128);
            const bool whole = sm90_unmasked(starts, window, kWarp, kWarp + 15, q0, q0 + BQ - 1, T);
            const float* ld = lseDelta + s * 128; // this step's lse and delta, brought by the producer warp
            float2 L[BQ / 8], D[BQ / 8]; // read while the products run: after the waits they stalled the arithmetic
#pragma unroll
            for (int i = 0; i < BQ / 8; i++) L[i] = *reinterpret_cast<const float2*>(ld + 8 * i + 2 * t);
            sm90_wgmma_wait<1>(); // S^T is in: its probabilities are computed while dP^T runs
            sm90_fence_regs(st);
#pragma unroll
            for (int i = 0; i < BQ / 8; i++) { // this thread's two queries of each 8: lse in log2 units (0 past T)
                st[4 * i] = sm90_exp2(fmaf(st[4 * i], sl2, -L[i].x));
                st[4 * i + 1] = sm90_exp2(fmaf(st[4 * i + 1], sl2, -L[i].y));
                st[4 * i + 2] = sm90_exp2(fmaf(st[4 * i + 2], sl2, -L[i].x));
                st[4 * i + 3] = sm90_exp2(fmaf(st[4 * i + 3], sl2, -L[i].y));
            }
#pragma unroll
            for (int i = 0; i < BQ / 8; i++) D[i] = *reinterpret_cast<const float2*>(ld + 64 + 8 * i + 2 * t);
            sm90_wgmma_wait<0>();
            sm90_fence_regs(dp);
            if (!whole) { // the masked probabilities are zero (a branch while dP^T ran made ptxas serialise it, C7517)
#pragma unroll
                for (int i = 0; i < BQ / 8; i++)
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        const int q = q0 + 8 * i + 2 * t + c;
                        const int first = q < T ? sm90_first_key(starts, q, window) : 0;
#pragma unroll
                        for (int r = 0; r < 2; r++) {
                            const int key = kWarp + g + 8 * r, e = 4 * i + 2 * r + c;
                            if (!(q < T && key <= q && key >= first)) st[e] = 0.0f;
                        }
                    }
            }
#pragma unroll
            for (int j = 0; j < BQ / 16; j++) {
                pa[4 * j] = sm90_pack_bf16(st[8 * j], st[8 * j + 1]);
                pa[4 * j + 1] = sm90_pack_bf16(st[8 * j + 2], st[8 * j + 3]);
                pa[4 * j + 2] = sm90_pack_bf16(st[8 * j + 4], st[8 * j + 5]);
                pa[4 * j + 3] = sm90_pack_bf16(st[8 * j + 6], st[8 * j + 7]);
            }
            // dv's products run while dS^T is computed (dk's accumulation order unchanged: the same bits)
            sm90_fence_regs(dv);
            sm90_wgmma_fence();
            sm90_issue_rs<HS, BQ>(dv, pa, sQ + QO_BYTES, BQ * 128);
            sm90_wgmma_commit();
#pragma unroll
            for (int i = 0; i < BQ / 8; i++) { // delta of the same queries (0 past T)
                dp[4 * i] = st[4 * i] * (dp[4 * i] - D[i].x) * scale;
                dp[4 * i + 1] = st[4 * i + 1] * (dp[4 * i + 1] - D[i].y) * scale;
                dp[4 * i + 2] = st[4 * i + 2] * (dp[4 * i + 2] - D[i].x) * scale;
                dp[4 * i + 3] = st[4 * i + 3] * (dp[4 * i + 3] - D[i].y) * scale;
            }
#pragma unroll
            for (int j = 0; j < BQ / 16; j++) {
                sa[4 * j] = sm90_pack_bf16(dp[8 * j], dp[8 * j + 1]);
                sa[4 * j + 1] = sm90_pack_bf16(dp[8 * j + 2], dp[8 * j + 3]);
                sa[4 * j + 2] = sm90_pack_bf16(dp[8 * j + 4], dp[8 * j + 5]);
                sa[4 * j + 3] = sm90_pack_bf16(dp[8 * j + 6], dp[8 * j + 7]);
            }
            if constexpr (DQ) {
                // this step's half of dS^T (row = key: 128 bytes of 64 queries, 16-byte chunks XOR-swizzled by the
                // row), four 8 x 8 matrices a stmatrix: lanes 8 m .. 8 m + 7 address matrix m's rows (m & 1: keys + 8,
                // m >> 1: queries + 8), as sa holds them. The tile was last read two steps ago by both warpgroups' dq
                // products; the other warpgroup arrives at its barrier of the step before once its product has ended
                // (this one's ended in its step before), and by then its half of that step's dS^T is in, for this
                // step's dq.
                if (step > 0) sm90_mbar_wait(barDs + 8 * (2 * (1 - wg) + ((step - 1) & 1)), ((step - 1) >> 1) & 1);
                const int m = lane >> 3;
                const unsigned int key = 64 * wg + 16 * wl + 8 * (m & 1) + (lane & 7);
                const unsigned int row = sDS + (step & 1) * DS_BYTES + key * 128;
#pragma unroll
                for (int j = 0; j < BQ / 16; j++) {
                    const unsigned int addr = row + (((2 * j + (m >> 1)) ^ (lane & 7)) << 4);
                    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                                 :: "r"(addr), "r"(sa[4 * j]), "r"(sa[4 * j + 1]), "r"(sa[4 * j + 2]),
                                    "r"(sa[4 * j + 3]) : "memory");
                }
                sm90_fence_proxy_async(); // for the products' reads (the async proxy)
            }
            sm90_fence_regs(dk);
            sm90_wgmma_fence();
            sm90_issue_rs<HS, BQ>(dk, sa, sQ, BQ * 128);
            sm90_wgmma_commit();
            sm90_wgmma_wait<0>();
            sm90_fence_regs(dk);
            sm90_fence_regs(dv);
            __syncwarp();
            if (lane == 0) sm90_mbar_arrive(barEmpty + 8 * s);
            if constexpr (DQ) { // the step before's dq (issued with dk's products it measured 0.85x: C7519)
                if (step > 0) {
                    const int prev = step - 1, buf = prev & 1;
                    sm90_wgmma_fence();
                    sm90_fused_dq_product(dq, sDS + buf * DS_BYTES, sK + wg * BK * 128);
                    sm90_wgmma_wait<0>();
                    sm90_fence_regs(dq);
                    sm90_warp_arrive(barDs + 8 * (2 * wg + (step & 1))); // this half in, the step before's read
                    sm90_fused_stage_dq(dq, sDQ + (2 * wg + buf) * DQ_BYTES, barDqFree + 8 * (2 * wg + buf),
                                        ((prev >> 1) & 1) ^ 1, barDqFull + 8 * (2 * wg + buf));
                } else {
                    sm90_warp_arrive(barDs + 8 * (2 * wg + (step & 1)));
                }
            }
        }
        if constexpr (DQ) { // the last step's dq
            const int prev = steps - 1, buf = prev & 1;
            sm90_mbar_wait(barDs + 8 * (2 * (1 - wg) + buf), (prev >> 1) & 1);
            sm90_wgmma_fence();
            sm90_fused_dq_product(dq, sDS + buf * DS_BYTES, sK + wg * BK * 128);
            sm90_wgmma_wait<0>();
            sm90_fence_regs(dq);
            sm90_fused_stage_dq(dq, sDQ + (2 * wg + buf) * DQ_BYTES, barDqFree + 8 * (2 * wg + buf),
                                ((prev >> 1) & 1) ^ 1, barDqFull + 8 * (2 * wg + buf));
        }
        const int W = (NH + 2 * NKV) * HS;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int key = kWarp + g + 8 * r;
            if (key >= T) continue;
            if (splits > 1) {
                float* out = partial + (((long long) split * gridDim.z + b) * T + key) * (2 * NKV * HS) + 2 * t;
#pragma unroll
                for (int i = 0; i < HS / 8; i++) {
                    *reinterpret_cast<float2*>(out + kvh * HS + 8 * i) =
                            make_float2(dk[4 * i + 2 * r], dk[4 * i + 2 * r + 1]);
                    *reinterpret_cast<float2*>(out + (NKV + kvh) * HS + 8 * i) =
                            make_float2(dv[4 * i + 2 * r], dv[4 * i + 2 * r + 1]);
                }
            } else {
                bf16_t* out = dQkv + ((long long) b * T + key) * W + 2 * t;
#pragma unroll
                for (int i = 0; i < HS / 8; i++) {
                    *reinterpret_cast<unsigned int*>(out + (NH + kvh) * HS + 8 * i) =
                            sm90_pack_bf16(dk[4 * i + 2 * r], dk[4 * i + 2 * r + 1]);
                    *reinterpret_cast<unsigned int*>(out + (NH + NKV + kvh) * HS + 8 * i) =
                            sm90_pack_bf16(dv[4 * i + 2 * r], dv[4 * i + 2 * r + 1]);
                }
            }
        }
    }
}

#define HOPPER_DKDV_KERNEL(H)                                                                                        \
    extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1) attention_sm90_backward_dkdv_hs##H##_bf16(        \
            const __grid_constant__ sm90_tensor_map kvMap, const __grid_constant__ sm90_tensor_map qMap,             \
            const __grid_constant__ sm90_tensor_map oMap, bf16_t* dQkv, const float* lse, const float* delta,        \
            const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale, float* partial,     \
            int splits) {                                                                                            \
        sm90_backward_dkdv<H, 3>(&kvMap, &qMap, &oMap, dQkv, lse, delta, docStart, T, NH, NKV, window, scale,        \
                                 partial, splits);                                                                   \
    }
HOPPER_DKDV_KERNEL(64)
HOPPER_DKDV_KERNEL(128)

/**
 * dk, dv and dq in one kernel (head size 128): attention_sm90_backward_dkdv_hs128_bf16's arguments and grid, then
 * dqSums (fp32, B * NH * ceil(T / 64) * 64 * 128 values, zero); dynamic shared = SM90_FUSED_SHARED(128, 2). dq
 * follows from attention_sm90_dq_from_sums_bf16.
 */
extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1) attention_sm90_backward_fused_hs128_bf16(
        const __grid_constant__ sm90_tensor_map kvMap, const __grid_constant__ sm90_tensor_map qMap,
        const __grid_constant__ sm90_tensor_map oMap, bf16_t* dQkv, const float* lse, const float* delta,
        const int* docStart, int B, int T, int NH, int NKV, int HS, int window, float scale, float* partial,
        int splits, float* dqSums) {
    sm90_backward_dkdv<128, 2, true>(&kvMap, &qMap, &oMap, dQkv, lse, delta, docStart, T, NH, NKV, window, scale,
                                     partial, splits, dqSums);
}

/** dq from the fused backward's sums into dQkv's query columns as bf16 (head size 128): a thread per two values. */
extern "C" __global__ void attention_sm90_dq_from_sums_bf16(bf16_t* dQkv, const float* dqSums, int B, int T, int NH,
                                                           int NKV) {
    constexpr int HS = 128;
    const long long n = (long long) B * T * NH * (HS / 2);
    const long long idx = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    const int pair = (int) (idx % (HS / 2)), h = (int) (idx / (HS / 2) % NH);
    const long long bq = idx / (HS / 2) / NH;
    const int q = (int) (bq % T), b = (int) (bq / T);
    const float2 v = *reinterpret_cast<const float2*>(
            dqSums + sm90_fused_dq_at(b, h, NH, (T + 63) / 64, q & ~63, q & 63, 2 * pair));
    *reinterpret_cast<unsigned int*>(dQkv + bq * (NH + 2 * NKV) * HS + h * HS + 2 * pair) = sm90_pack_bf16(v.x, v.y);
}

// ---- the backward's dq ----

/** Dynamic shared memory of sm90_backward_dq<HS, STAGES>: slack, Q and dOut (128 rows), the (K, V) ring, barriers. */
#define SM90_DQ_SHARED(HS, STAGES) (1024 + 4 * SM90_BM * (HS) + (STAGES) * 4 * SM90_BN * (HS) + 64)

/**
 * dq of 128 queries (two consumer warpgroups of 64) of one query head, against every (K, V) tile of 128 keys that
 * its rows see, streamed by the copy engine as the forward streams them: per tile, in two halves of 64 keys (the
 * accumulators of a whole tile's S and dP with dq's do not fit the registers), S = Q K^T and dP = dOut V^T (both
 * operands from shared memory), dS = P (dP - delta) scale with P from the saved lse, then dq += dS K (dS from
 * registers, K transposed by its descriptor). The arithmetic of attention_tc.cu's tc_backward_dq, in its order: dS
 * rounded to bf16, dq accumulated over the keys in order, 16 at a time. S and dP are two groups of products: P's
 * exponentials run while dP's products do, the mask after both (1.5x faster than one group, an H100, 2026-11-27).
 */
template <int HS, int STAGES>
__device__ __forceinline__ void sm90_backward_dq(const sm90_tensor_map* map, const sm90_tensor_map* oMap,
                                                 bf16_t* dQkv, const float* lse, const float* delta,
                                                 const int* docStart, int T, int NH, int NKV, int window,
                                                 float scale) {
    constexpr int BM = SM90_BM, BN = SM90_BN, CB = HS / 64;
    constexpr unsigned int Q_BYTES = BM * HS * 2, KV_BYTES = BN * HS * 2;
    extern __shared__ __align__(1024) unsigned char sm90_smem_raw[];
    const unsigned int sQ = (sm90_smem(sm90_smem_raw) + 1023) & ~1023u, sO = sQ + Q_BYTES;
    const unsigned int sKV = sO + Q_BYTES;
    const unsigned int barQ = sKV + STAGES * 2 * KV_BYTES, barFull = barQ + 8, barEmpty = barFull + 8 * STAGES;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int tile, h, b;
    sm90_block_order(tile, h, b);
    const int q0 = tile * BM, qLast = min(q0 + BM - 1, T - 1);
    const int* starts = docStart ? docStart + (long long) b * T : nullptr;
    const int kStart = max(0, sm90_first_key(starts, q0, window)) & ~(BN - 1); // first keys never decrease
    sm90_init_barriers<STAGES>(barQ, barFull, barEmpty);
    if (warp >= 8) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
        if (warp == 8 && lane == 0) {
            const int kvh = h / (NH / NKV);
            sm90_mbar_expect(barQ, 2 * Q_BYTES);
#pragma unroll
            for (int c = 0; c < CB; c++) {
                sm90_tma_load(sQ + c * BM * 128, map, h * HS + 64 * c, q0, b, barQ);
                sm90_tma_load(sO + c * BM * 128, oMap, h * HS + 64 * c, q0, b, barQ);
            }
            for (int it = 0, k0 = kStart; k0 <= qLast; it++, k0 += BN) {
                const int s = it % STAGES, n = it / STAGES;
                if (n > 0) sm90_mbar_wait(barEmpty + 8 * s, (n - 1) & 1);
                const unsigned int sK = sKV + s * 2 * KV_BYTES, sV = sK + KV_BYTES, full = barFull + 8 * s;
                sm90_mbar_expect(full, 2 * KV_BYTES);
#pragma unroll
                for (int c = 0; c < CB; c++) {
                    sm90_tma_load(sK + c * BN * 128, map, (NH + kvh) * HS + 64 * c, k0, b, full);
                    sm90_tma_load(sV + c * BN * 128, map, (NH + NKV + kvh) * HS + 64 * c, k0, b, full);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
        const int wg = __shfl_sync(0xffffffffu, warp >> 2, 0), wl = warp & 3, g = lane >> 2, t = lane & 3; // wg: warp-uniform
        const int qWarp = q0 + 64 * wg + 16 * wl; // this thread's rows: qWarp + g and qWarp + g + 8
        const float sl2 = scale * SM90_LOG2E;
        float rowL[2], rowD[2];
        int first[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int q = qWarp + 8 * r + g;
            const long long at = ((long long) b * NH + h) * T + q;
            rowL[r] = q < T ? lse[at] * SM90_LOG2E : 0.0f;
            rowD[r] = q < T ? delta[at] : 0.0f;
            first[r] = q < T ? sm90_first_key(starts, q, window) : 0;
        }
        float dq[HS / 2];
#pragma unroll
        for (int i = 0; i < HS / 2; i++) dq[i] = 0.0f;
        float sc[32], dp[32];
        unsigned int a[16];
        sm90_mbar_wait(barQ, 0);
        for (int it = 0, k0 = kStart; k0 <= qLast; it++, k0 += BN) {
            const int s = it % STAGES;
            const unsigned int sK = sKV + s * 2 * KV_BYTES, sV = sK + KV_BYTES;
            sm90_mbar_wait(barFull + 8 * s, (it / STAGES) & 1);
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const int kh = k0 + 64 * half;
                sm90_fence_regs(sc);
                sm90_fence_regs(dp);
                sm90_wgmma_fence();
                sm90_issue_scores_n64<HS>(sc, sQ + wg * 64 * 128, BM * 128, sK + half * 64 * 128, BN * 128);
                sm90_issue_scores_n64<HS>(dp, sO + wg * 64 * 128, BM * 128, sV + half * 64 * 128, BN * 128);
                const bool whole = sm90_unmasked(starts, window, kh, kh + 63, qWarp, qWarp + 15, T);
                sm90_wgmma_wait<1>(); // S is in: its probabilities are computed while dP runs
                sm90_fence_regs(sc);
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int e = 0; e < 4; e++) sc[4 * i + e] = sm90_exp2(fmaf(sc[4 * i + e], sl2, -rowL[e >> 1]));
                sm90_wgmma_wait<0>();
                sm90_fence_regs(dp);
                if (!whole) { // the masked probabilities are zero (outside the overlap: a branch there serialises it)
#pragma unroll
                    for (int i = 0; i < 8; i++)
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const int r = e >> 1, q = qWarp + 8 * r + g, key = kh + 8 * i + 2 * t + (e & 1);
                            if (!(q < T && key <= q && key >= first[r])) sc[4 * i + e] = 0.0f;
                        }
                }
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int e = 0; e < 4; e++) sc[4 * i + e] = sc[4 * i + e] * (dp[4 * i + e] - rowD[e >> 1]) * scale;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    a[4 * j] = sm90_pack_bf16(sc[8 * j], sc[8 * j + 1]);
                    a[4 * j + 1] = sm90_pack_bf16(sc[8 * j + 2], sc[8 * j + 3]);
                    a[4 * j + 2] = sm90_pack_bf16(sc[8 * j + 4], sc[8 * j + 5]);
                    a[4 * j + 3] = sm90_pack_bf16(sc[8 * j + 6], sc[8 * j + 7]);
                }
                sm90_fence_regs(dq);
                sm90_wgmma_fence();
                sm90_issue_rs<HS, 64>(dq, a, sK + half * 64 * 128, BN * 128); // this half's 64 keys of K
                sm90_wgmma_commit();
                // At head size 128 the first half's dq product runs on while the second half's S and dP are issued
                // (their exponentials wait for it): 4% faster at T = 8192 on an H100, 3% slower at head size 64.
                if (half == 1 || HS != 128) {
                    sm90_wgmma_wait<0>();
                    sm90_fence_regs(dq);
                }
            }
            __syncwarp();
            if (lane == 0) sm90_mbar_arrive(barEmpty + 8 * s); // this warp is done with the stage
        }
        const int W = (NH + 2 * NKV) * HS;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int q = qWarp + 8 * r + g;
            if (q >= T) continue;
            bf16_t* dst = dQkv + ((long long) b * T + q) * W + h * HS + 2 * t;
#pragma unroll
            for (int i = 0; i < HS / 8; i++) {
                *reinterpret_cast<unsigned int*>(dst + 8 * i) = sm90_pack_bf16(dq[4 * i + 2 * r], dq[4 * i + 2 * r + 1]);
            }
        }
    }
}

#define HOPPER_DQ_KERNEL(H)                                                                                          \
    extern "C" __global__ void __launch_bounds__(SM90_THREADS, 1) attention_sm90_backward_dq_hs##H##_bf16(          \
            const __grid_constant__ sm90_tensor_map qkvMap, const __grid_constant__ sm90_tensor_map oMap,            \
            bf16_t* dQkv, const float* lse, const float* delta, const int* docStart, int B, int T, int NH, int NKV,  \
            int HS, int window, float scale) {                                                                       \
        sm90_backward_dq<H, 2>(&qkvMap, &oMap, dQkv, lse, delta, docStart, T, NH, NKV, window, scale);               \
    }
HOPPER_DQ_KERNEL(64)
HOPPER_DQ_KERNEL(128)
