/**
 * Preflight: before the first step of a job of several processes, every process states the facts its run depends
 * on ({@link io.fsdp4j.preflight.NodeFacts}: fsdp4j and JDK versions, native library versions on the CUDA
 * backend, the model's config and a fingerprint of its weights, the datasets' fingerprints, the effective config
 * without its per-node keys), publishes them through the job's rendezvous store and reads everyone's
 * ({@link io.fsdp4j.preflight.Preflight}). {@link io.fsdp4j.preflight.Comparison} then finds the facts on which a
 * node differs from the others, the same way on every node, so every node stops with the same one-line message
 * naming what differs and where. On the CUDA backend each node also runs a quick GPU health test; a node that fails
 * it, or lags far behind the others, stops the job too, or, with {@code dist.exclude_unhealthy}, is left out of it
 * ({@link io.fsdp4j.preflight.LeavingOut}): the other nodes form a smaller job through
 * {@link io.fsdp4j.job.JobStart}.
 *
 * <p>Fingerprints ({@link io.fsdp4j.preflight.Fingerprints}) never read a whole file: a file's fingerprint is its
 * size and a SHA-256 of windows of its content at fixed offsets (its first and last bytes included), and a
 * safetensors file's adds its whole header (tensor names, types, shapes and offsets). A 15 GB model is
 * fingerprinted in well under a second from a warm page cache.
 *
 * <p>May use: doctor, plan, job, the engine (fsdp, checkpoint, optim), comm, data, tokenizer, model, hf, backend,
 * cuda, report, config, tensor, safetensors; used by the loop and cli.
 */
package io.fsdp4j.preflight;
