/**
 * Collectives of GPUs through NCCL, on their own streams ordered against compute by events, each handed to the
 * process's {@link io.fsdp4j.comm.CollectiveWatchdog}. May use: comm, backend, cuda, tensor.
 */
package io.fsdp4j.comm.nccl;
