/**
 * Training: one loop, from a config to a summary. Read in this order:
 * <ul>
 *   <li>{@link io.fsdp4j.train.TrainStep}, the step function: count the labelled positions of the global batch,
 *       forward and backward each micro-batch, clip by the global norm, update (skipped on every rank when the loss or
 *       the norm is not finite).</li>
 *   <li>{@link io.fsdp4j.train.TrainingLoop}, the training loop of one rank, top to bottom: the state
 *       ({@link io.fsdp4j.checkpoint.TrainState}: model, optimizer, schedule, data order, step, tokens seen) built or
 *       loaded from a checkpoint, then each step and its cadence as named steps: profile, report, divergence
 *       ({@code train.max_bad_steps}), a stop asked for ({@link io.fsdp4j.train.StopRequest}), checkpoint, evaluate
 *       ({@link io.fsdp4j.train.Evaluator}s at their own cadence). It ends alike on every rank.</li>
 *   <li>{@link io.fsdp4j.train.TrainingJob}, the job-level run: a loop on each rank of this process, and what the
 *       job does beside the steps (checkpoint plan, resume, evaluators, profiling, stopping), collected into one
 *       result. {@link io.fsdp4j.train.JobSetup} is how a config becomes this process's ranks of a job (layout, mesh,
 *       policy, the ranks started).</li>
 *   <li>{@link io.fsdp4j.train.Training}, {@code fsdp4j train}: the config resolved ({@link
 *       io.fsdp4j.train.TrainingInputs}), its checkpoint directory locked and its outputs test-written before the
 *       first step, the checkpoint to resume from chosen, the job run with what the config asks beside the steps (the
 *       {@link io.fsdp4j.train.Demo} preset's evaluation and export, or a {@code run.dir}'s export), each step reported
 *       ({@link io.fsdp4j.train.RunReport}), and a summary.</li>
 *   <li>Beside them: {@link io.fsdp4j.train.Benchmark} ({@code fsdp4j bench}) and
 *       {@link io.fsdp4j.train.CollectiveBandwidth}.</li>
 * </ul>
 *
 * <p>May use: job, preflight (job start checks), the engine (fsdp, checkpoint, optim), comm, model, hf, data, eval,
 * backend and cuda (the device's peak memory and timeline of a profiled step), report, config, tensor. Used only by
 * the commands ({@code cli}).
 */
package io.fsdp4j.train;
