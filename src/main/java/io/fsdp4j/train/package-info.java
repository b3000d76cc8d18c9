/**
 * The training loop. {@link io.fsdp4j.train.Trainer#step} reads top to bottom: count the labelled positions of the
 * global batch, forward and backward each micro-batch, clip by the global norm, update. {@link
 * io.fsdp4j.train.TrainingRun} runs it on every rank; {@link io.fsdp4j.train.Training} is {@code fsdp4j train}:
 * config in, metrics and a summary out.
 */
package io.fsdp4j.train;
