/**
 * Ranks and their collectives: {@link io.fsdp4j.dist.ProcessGroup} (all-gather, reduce-scatter, all-reduce,
 * broadcast, barrier), the 2-D {@link io.fsdp4j.dist.DeviceMesh} (replicas x shard group), and the in-process
 * implementation where ranks are threads. Sums are taken in rank order, so every member gets the same bits. A rank
 * that fails aborts every group, so no rank waits forever; a collective that times out names its group.
 */
package io.fsdp4j.dist;
