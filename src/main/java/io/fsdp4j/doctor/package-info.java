/**
 * {@code fsdp4j doctor}: what fsdp4j finds on one machine and will use (JDK, native libraries with their paths and
 * versions, driver, GPUs with their memory and the processes holding it, NVLink topology, NCCL), a short GPU health
 * test ({@link io.fsdp4j.doctor.GpuHealth}: a bf16 matrix product checked and timed, device memory bandwidth, an
 * all-reduce across the local GPUs), and a verdict with its reason ({@link io.fsdp4j.doctor.Doctor}). Without a GPU
 * it says why none was found and judges the machine for the CPU backend.
 *
 * <p>May use: plan, job, the engine (fsdp, checkpoint, optim), comm, data, tokenizer, model, hf, backend, cuda,
 * report, config, tensor, safetensors; not preflight (which uses it); used by preflight, the loop and cli.
 */
package io.fsdp4j.doctor;
