/**
 * {@code fsdp4j plan}: predicted per-GPU memory and step time of each sharding strategy for a model on a cluster,
 * before any GPU is spent. The pieces follow the engine they predict:
 * <ul>
 *   <li>{@link io.fsdp4j.plan.ModelShape}: the units FSDP shards ({@code CausalLMs.layout}), with padding;</li>
 *   <li>{@link io.fsdp4j.plan.MemoryModel}: the buffers of a step, moment by moment, and what the caching
 *       allocator reserves for them;</li>
 *   <li>{@link io.fsdp4j.plan.ComputeModel}: each stage's FLOPs and bytes at the GPU's ceilings, scaled by constants
 *       taken from two measured 1-GPU steps (a large model and a small one);</li>
 *   <li>{@link io.fsdp4j.plan.Collective}: ring all-gather, reduce-scatter and all-reduce times from nccl-tests'
 *       bus bandwidth and NCCL's latency model, on NVLink inside a node and the network between nodes;</li>
 *   <li>{@link io.fsdp4j.plan.StepSimulator}: compute and communication streams replayed in the engine's order, so
 *       that what overlaps and what is exposed comes out of the schedule;</li>
 *   <li>{@link io.fsdp4j.plan.Planner}: every strategy and checkpointing mode, the recommendation, the scaling table.</li>
 * </ul>
 * Units: bytes, seconds, FLOPs; bandwidths in bytes per second inside, Gb/s only on the command line. The model,
 * its assumptions and its accuracy against measured runs: docs/plan.md.
 *
 * <p>May use: job, the engine (fsdp, checkpoint, optim), comm, data, tokenizer, model, hf, backend, cuda, report,
 * config, tensor, safetensors; not doctor or preflight (which use it); used by doctor, preflight, the loop and cli.
 */
package io.fsdp4j.plan;
