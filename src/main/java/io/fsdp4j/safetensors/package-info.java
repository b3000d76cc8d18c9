/**
 * Reading and writing the safetensors checkpoint format: single files ({@link io.fsdp4j.safetensors.SafetensorsFile},
 * {@link io.fsdp4j.safetensors.SafetensorsWriter}) and Hugging Face model directories, sharded or not
 * ({@link io.fsdp4j.safetensors.SafetensorsDirectory}).
 *
 * <p>May use: tensor (and the root's classes); used by every package above it.
 */
package io.fsdp4j.safetensors;
