package io.fsdp4j.backend;

/**
 * A tensor's amax on the GPU kept in a store ({@link Fp8Casts}) for a later fp8 cast of that tensor, so that the cast
 * needs no amax pass of its own: a slot (a float's bits, zeroed before) in the memory of the store's caller, filled by
 * the first pass or kernel that computes it (a forward product's cast of its input, for the backward's transposed
 * cast; a kernel that writes the tensor and maxes its output's magnitudes on the way, such as SwiGLU's), known from
 * then on. The same value as an amax pass over the tensor: the largest magnitude of the same bf16 elements.
 */
final class Fp8Amax {
    private final long address;
    private boolean known;

    Fp8Amax(long address) {
        this.address = address;
    }

    /** The slot's device address. */
    long address() {
        return address;
    }

    /** Whether the slot holds the tensor's amax. */
    boolean known() {
        return known;
    }

    /** The amax has been computed into the slot (by kernels queued on the stream before any cast that reads it). */
    void computed() {
        known = true;
    }
}
