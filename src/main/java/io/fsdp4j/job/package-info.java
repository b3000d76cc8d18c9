/**
 * How a process joins a job and how a node starts its processes. {@link io.fsdp4j.job.JobLayout} (where this process
 * stands, from dist.* or torchrun-style or Slurm variables), {@link io.fsdp4j.job.JobStart} (the one place a process
 * joins: rendezvous, start checks, its world), {@link io.fsdp4j.job.JobRendezvous} over the token-protected
 * {@link io.fsdp4j.job.RendezvousServer} ({@link io.fsdp4j.job.JobToken}), {@link io.fsdp4j.job.JobWatch} (failures
 * heard through the store), {@link io.fsdp4j.job.JobProgress} (each process's progress in the store, naming the ones a
 * hung job waits for), {@link io.fsdp4j.job.Launcher} ({@code fsdp4j launch}), and the worlds that host a process's
 * ranks ({@link io.fsdp4j.job.LocalRanks}): {@link io.fsdp4j.job.InProcessWorld} (threads: CPU ranks, or CUDA ranks
 * sharing one GPU), {@link io.fsdp4j.job.TcpWorld} (CPU ranks of several processes), {@link io.fsdp4j.job.NcclWorld}
 * (GPUs), each run by {@link io.fsdp4j.job.RankThreads}, which aborts the world when a rank fails.
 *
 * <p>May use: comm, backend, cuda, config, report, tensor. Used by the training loop and the commands, never by the
 * engine ({@code fsdp}, {@code checkpoint}, {@code optim}), which sees only {@code comm}.
 */
package io.fsdp4j.job;
