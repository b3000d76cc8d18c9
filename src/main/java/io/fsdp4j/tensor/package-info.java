/**
 * Tensors: a dtype, a row-major shape and an offset into {@link io.fsdp4j.tensor.Storage} that a backend owns.
 * Views share storage. bf16 and fp16 conversions round to nearest even, as the hardware does
 * ({@link io.fsdp4j.tensor.Half}). {@link io.fsdp4j.tensor.Nf4}: bitsandbytes' 4-bit NormalFloat (QLoRA's frozen base),
 * its codes packed two a byte in I32 words. {@link io.fsdp4j.tensor.Fp8}: the e4m3 and e5m2 formats of fp8 training,
 * rounded as PTX's saturating conversion, and torchao's per-tensor scale.
 *
 * <p>May use: nothing of fsdp4j but the root's classes; used by every package.
 */
package io.fsdp4j.tensor;
