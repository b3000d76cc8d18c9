package io.fsdp4j.tensor;

/**
 * Tensor storage in the memory of a GPU.
 *
 * @param address device pointer to the first element
 * @param capacity elements
 * @param device the GPU's index
 */
public record DeviceStorage(long address, long capacity, DType dtype, int device) implements Storage {
}
