/**
 * Fully sharded data parallelism, applied from outside the model: {@link io.fsdp4j.fsdp.FsdpModel#apply} makes
 * every unit of a {@link io.fsdp4j.model.CausalLM} a {@link io.fsdp4j.fsdp.ShardedUnit} holding this rank's shard in
 * a {@link io.fsdp4j.fsdp.ShardStorage}: fp32 master and gradient shards on the device ({@code DeviceShards}) or in
 * host memory ({@code HostShards}), or a frozen shard with no gradient: in the gather's precision on the device
 * ({@code FrozenShard}), or (a model that computes forwards only, offloaded) in fp32 in host memory
 * ({@code FrozenHostShard}). The unit's flat buffer is padded at its end to a multiple of the shard group's size, so
 * the layout is the same for any world size. Shards that train are what the optimizer updates
 * ({@link io.fsdp4j.optim.TrainableShard}); this package may import optim, never the other way.
 *
 * <p>LoRA ({@code lora.*}): the model lays each block out as its base parameters, then its adapters
 * ({@link io.fsdp4j.model.CausalLM#frozenNumel} says where the frozen part ends). The embeddings and the head are
 * frozen {@code ShardedUnit}s; each block is a {@link io.fsdp4j.fsdp.LoraUnit}: a frozen base shard and a training
 * adapter shard, gathered together into the block's one buffer. Only the adapters have masters, gradients (reduced
 * as any unit's) and optimizer state; the model's backward computes no gradient of the frozen base or head (a block's
 * gradient buffer is the adapters' own).
 * QLoRA ({@code lora.quantize: nf4}): a block's frozen base is an {@link io.fsdp4j.fsdp.Nf4Unit}, its linears' weights
 * held as NF4 as bitsandbytes stores them (packed codes and an fp32 absmax per 64 elements, sharded in whole blocks),
 * its norms and biases as a frozen shard; the gather moves the packed codes and dequantizes them into the block's
 * buffer ({@code Backend.dequantizeNf4}).
 *
 * <p>A step, per micro-batch: gather each unit just before its stage (in {@code fsdp.param_dtype}), free it after
 * (FULL_SHARD: after forward and again after backward; SHARD_GRAD_OP: after backward); accumulate full-size
 * gradients; after the last micro-batch, reduce-scatter each unit's gradients across the shard group (in
 * {@code fsdp.reduce_dtype}) and all-reduce them across replicas. Every strategy is a mesh: FULL_SHARD and
 * SHARD_GRAD_OP shard over all ranks, NO_SHARD over none (replicas only), the hybrids over {@code fsdp.shard_size}.
 *
 * <p>{@code fsdp.cpu_offload}: the master and gradient shards (and the optimizer's moments) live in host memory;
 * each unit's master shard is copied to the device a unit ahead of its gather and its reduced gradient shard copied
 * back, on the backend's copy streams ordered by events; the host waits once per step, then AdamW steps on the host
 * ({@link io.fsdp4j.optim.AdamW}). On CPU ranks the same path runs, with plain copies: offloaded training there is
 * bit for bit the training without offload.
 *
 * <p>Evaluation and generation take the forward alone ({@link io.fsdp4j.fsdp.ShardedForward}): each unit gathered
 * before its stage and freed after, nothing kept for a backward, the ranks of a shard group in lockstep.
 *
 * <p>May use: optim (the {@code TrainableShard} its shards are), comm, data, tokenizer, model, hf, backend, cuda,
 * report, config, tensor, safetensors; not checkpoint (which uses it), never job, the loop or the tools.
 */
package io.fsdp4j.fsdp;
