/**
 * Collectives between ranks that are threads of one process: CPU tensors summed on the host, or CUDA ranks sharing
 * one GPU ({@code dist.share_gpu}) whose collectives are device copies and sums. May use: comm, backend, cuda, tensor.
 */
package io.fsdp4j.comm.inprocess;
