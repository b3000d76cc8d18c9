/**
 * Tensors: a dtype, a row-major shape and an offset into {@link io.fsdp4j.tensor.Storage} that a backend owns.
 * Views share storage. bf16 and fp16 conversions round to nearest even, as the hardware does
 * ({@link io.fsdp4j.tensor.Half}).
 */
package io.fsdp4j.tensor;
