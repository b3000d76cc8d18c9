/**
 * The CPU backend's kernels: matrix products ({@link io.fsdp4j.backend.cpu.CpuMatmul}, vectorised where the Vector
 * API pays), attention and its generation cache ({@link io.fsdp4j.backend.cpu.CpuAttention}), SwiGLU, GELU, GeGLU,
 * the soft cap and the float exp that SwiGLU and attention share ({@link io.fsdp4j.backend.cpu.CpuActivations},
 * {@code Exp}: the same bits in a vector lane as in scalar code), the norms ({@link io.fsdp4j.backend.cpu.CpuNorms}),
 * token and rotary embeddings ({@link io.fsdp4j.backend.cpu.CpuEmbeddings}), cross-entropy
 * ({@link io.fsdp4j.backend.cpu.CpuLoss}), AdamW ({@link io.fsdp4j.backend.cpu.CpuAdamW}),
 * memory scopes whose arrays later allocations reuse ({@link io.fsdp4j.backend.cpu.CpuMemory}), and the fork-join
 * splitting ({@link io.fsdp4j.backend.cpu.Parallel}) that gives each output element one thread and a fixed order of
 * additions, so that results are bit-identical from run to run. {@code backend.CpuBackend} is their one caller.
 *
 * <p>May use: backend (its shapes, such as {@code AttentionShape}), report, config, tensor, safetensors.
 */
package io.fsdp4j.backend.cpu;
