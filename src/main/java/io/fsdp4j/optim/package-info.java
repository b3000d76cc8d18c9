/**
 * AdamW with PyTorch's semantics on each rank's master shards, weight decay chosen by a rule on parameter shape,
 * and the learning-rate schedule (linear warmup, then constant, cosine or linear decay). What it updates is a
 * {@link io.fsdp4j.optim.TrainableShard} (fp32 master and gradient shards, on the device or in host memory); the
 * engine ({@code fsdp}) provides them, and this package imports nothing of it.
 *
 * <p>May use: comm, data, tokenizer, model, hf, backend, cuda, report, config, tensor, safetensors; not fsdp or
 * checkpoint (which use it), never job, the loop or the tools.
 */
package io.fsdp4j.optim;
