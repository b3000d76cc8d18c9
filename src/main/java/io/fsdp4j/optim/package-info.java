/**
 * AdamW with PyTorch's semantics on each rank's master shards, weight decay chosen by a rule on parameter shape,
 * and the learning-rate schedule (linear warmup, then constant, cosine or linear decay).
 *
 * <p>May use: fsdp, comm, data, tokenizer, model, hf, backend, cuda, report, config, tensor, safetensors; not
 * checkpoint (which uses it), never job, the loop or the tools.
 */
package io.fsdp4j.optim;
