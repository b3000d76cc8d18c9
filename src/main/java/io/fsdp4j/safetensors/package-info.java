/**
 * Reading and writing the safetensors checkpoint format: single files ({@link io.fsdp4j.safetensors.SafetensorsFile},
 * {@link io.fsdp4j.safetensors.SafetensorsWriter}) and Hugging Face model directories, sharded or not
 * ({@link io.fsdp4j.safetensors.SafetensorsDirectory}).
 */
package io.fsdp4j.safetensors;
