/**
 * The compute backend: the sealed {@link io.fsdp4j.backend.Backend} interface of forward/backward op pairs, and
 * {@link io.fsdp4j.backend.CpuBackend}, the plain-Java reference every other backend is tested against.
 * {@link io.fsdp4j.backend.CudaBackend}'s attention runs on fsdp4j's kernels or cuDNN's, shape by shape
 * ({@link io.fsdp4j.backend.CudaAttention}, {@code attention.kernel}).
 *
 * <p>Conventions, stated once: outputs come first in an op's arguments; a backward op writes the gradients of its
 * activation inputs and accumulates ({@code +=}) into parameter gradients. Shape letters: B batch, T sequence,
 * N = B*T rows, C model width, F MLP width, V vocabulary, NH query heads, NKV key/value heads, HS head size.
 * The CPU kernels in {@code backend.cpu} split work so that each output element is computed by one thread in a
 * fixed order: results are bit-identical from run to run.
 *
 * <p>{@link io.fsdp4j.backend.CudaBackend} drives one GPU; its ops stand beside it by concern, package-private:
 * {@code CudaMemory} and {@code CudaHostMemory} (device memory and its scopes; page-locked host memory and its copies),
 * {@code CudaLinear} (cuBLASLt, its fp8 products too), {@code CudaNorms}, {@code CudaElementwise}, {@code CudaAdamW},
 * all launching through {@code CudaLaunches}, and {@code CudaAttentionKernels} (attention on fsdp4j's kernels: the
 * simple, the tiled and Hopper's families). The fp8 linear products' rule of shapes and the CPU backend's emulation
 * of them: {@code Fp8Products}; the casts a forward recomputed for its backward keeps for it:
 * {@link io.fsdp4j.backend.Fp8Casts}.
 *
 * <p>May use: cuda (for {@link io.fsdp4j.backend.CudaBackend}), backend.cpu, report, config, tensor, safetensors;
 * used by every package above it.
 */
package io.fsdp4j.backend;
