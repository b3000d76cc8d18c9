/**
 * Sharded checkpoints of a run's state ({@link io.fsdp4j.checkpoint.TrainState}: the sharded model, the optimizer,
 * the schedule and data order, the step and the tokens seen): saved by every rank of the first replica at once
 * ({@link io.fsdp4j.checkpoint.Checkpoints#save}), resumed exactly ({@link io.fsdp4j.checkpoint.Checkpoints#load}:
 * parameters, AdamW moments, step; the data order is a function of the step), loadable onto any number of ranks or
 * another strategy, and exportable to a Hugging Face model directory. No pickle, nothing executable: safetensors and
 * JSON.
 * Tensors in the shard files carry the model's parameter names, and the index maps each name to its shards
 * ({@link io.fsdp4j.checkpoint.ShardFormat}); checkpoints of the earlier layout (one tensor a unit) still load.
 *
 * <p>May use: fsdp, optim, comm, data, tokenizer, model, hf, backend, cuda, report, config, tensor, safetensors;
 * never job, the loop or the tools (which use it).
 */
package io.fsdp4j.checkpoint;
