/**
 * Ranks and their collectives: {@link io.fsdp4j.dist.ProcessGroup} (all-gather, reduce-scatter, all-reduce,
 * broadcast, barrier), the 2-D {@link io.fsdp4j.dist.DeviceMesh} (replicas x shard group), and the worlds that
 * host a process's ranks ({@link io.fsdp4j.dist.LocalRanks}): threads with in-process collectives
 * ({@link io.fsdp4j.dist.InProcessWorld}: CPU ranks, or CUDA ranks sharing one GPU with {@code dist.share_gpu}, whose
 * collectives are device copies, {@link io.fsdp4j.dist.InProcessGpuMember}), CPU ranks of a job of several processes over TCP
 * ({@link io.fsdp4j.dist.TcpWorld}), GPUs through NCCL ({@link io.fsdp4j.dist.NcclWorld}). Sums are taken in rank
 * order, so every member gets the same bits. A rank that fails aborts every group, so no rank waits forever; a
 * collective that times out names its group.
 *
 * <p>Jobs of several processes: {@link io.fsdp4j.dist.JobLayout} (where this process stands, from dist.* or
 * torchrun-style or Slurm variables), {@link io.fsdp4j.dist.JobStart} (the one place a process joins: rendezvous,
 * start checks, its world), {@link io.fsdp4j.dist.JobRendezvous} over the token-protected
 * {@link io.fsdp4j.dist.RendezvousServer}, {@link io.fsdp4j.dist.JobWatch} (failures heard through the store),
 * {@link io.fsdp4j.dist.CollectiveWatchdog} (NCCL collectives that do not finish in time),
 * {@link io.fsdp4j.dist.JobProgress} (each process's progress in the store, naming the ones a hung job waits for),
 * {@link io.fsdp4j.dist.Launcher} ({@code fsdp4j launch}), and {@link io.fsdp4j.dist.CollectiveBandwidth}
 * ({@code fsdp4j nccl-test}).
 */
package io.fsdp4j.dist;
