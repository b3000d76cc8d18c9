/**
 * The training loop. {@link io.fsdp4j.train.Trainer#step} reads top to bottom: count the labelled positions of the
 * global batch, forward and backward each micro-batch, clip by the global norm, update (skipped on every rank when the
 * loss or the norm is not finite). {@link io.fsdp4j.train.TrainingRun} runs it on every rank and ends it alike on
 * every rank: completed, diverged ({@code train.max_bad_steps} skipped steps in a row) or stopped on request
 * ({@link io.fsdp4j.train.StopRequest}: SIGTERM, SIGINT, a dead launcher). {@link io.fsdp4j.train.Training} is
 * {@code fsdp4j train}: config in, metrics and a summary out, its checkpoint directory locked and its outputs
 * test-written before the first step.
 *
 * <p>May use: eval, and every package below the loop (plan, doctor, preflight, job, fsdp, checkpoint, optim, comm,
 * data, tokenizer, model, hf, backend, cuda, report, config, tensor, safetensors); used only by cli.
 */
package io.fsdp4j.train;
