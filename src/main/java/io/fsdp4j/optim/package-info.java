/**
 * AdamW with PyTorch's semantics on each rank's master shards, weight decay chosen by a rule on parameter shape,
 * and the learning-rate schedule (linear warmup, then constant, cosine or linear decay).
 */
package io.fsdp4j.optim;
