package io.fsdp4j.model;

import java.util.Arrays;

/**
 * One parameter inside a unit's flat buffer.
 *
 * @param name the parameter's name in Hugging Face checkpoints
 * @param offset first element in the unit's flat buffer
 * @param shape its shape in the checkpoint
 * @param kind what it is, for weight-decay rules and initialisation
 */
public record ParamSpec(String name, long offset, int[] shape, Kind kind) {

    public enum Kind { EMBEDDING, MATRIX, BIAS, NORM }

    public long numel() {
        long n = 1;
        for (int d : shape) {
            n *= d;
        }
        return n;
    }

    public long end() {
        return offset + numel();
    }

    /** Matrices (and embeddings) have two dimensions; biases and norm weights one. */
    public boolean isMatrix() {
        return shape.length >= 2;
    }

    @Override
    public String toString() {
        return name + Arrays.toString(shape) + "@" + offset;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ParamSpec p && p.name.equals(name) && p.offset == offset && Arrays.equals(p.shape, shape)
                && p.kind == kind;
    }

    @Override
    public int hashCode() {
        return name.hashCode() * 31 + Long.hashCode(offset);
    }
}
