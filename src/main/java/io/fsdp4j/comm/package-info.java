/**
 * What one rank calls to work with the others: {@link io.fsdp4j.comm.ProcessGroup} (all-gather, reduce-scatter,
 * all-reduce, broadcast, barrier), the 2-D {@link io.fsdp4j.comm.DeviceMesh} (replicas x shard group), a rank's
 * {@link io.fsdp4j.comm.RankContext} (its backend and its three groups), the {@link io.fsdp4j.comm.CollectiveWatchdog}
 * (collectives that do not finish in time) and {@link io.fsdp4j.comm.AbortableBarrier} (a meeting that, once aborted,
 * refuses every current and later wait). Implementations beneath: {@code inprocess} (ranks that are threads of one
 * process), {@code tcp} (CPU ranks of several processes), {@code nccl} (GPUs). Sums are taken in rank order, so every
 * member gets the same bits; a rank that fails aborts every group, so no rank waits forever.
 *
 * <p>May use: backend, cuda, tensor, config. Knows nothing of how a job starts ({@code job}) or trains.
 */
package io.fsdp4j.comm;
