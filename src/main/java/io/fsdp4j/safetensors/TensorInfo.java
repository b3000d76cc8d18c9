package io.fsdp4j.safetensors;

import io.fsdp4j.tensor.DType;
import java.util.Arrays;
import java.util.Objects;
import java.util.Optional;

/**
 * One tensor's entry in a safetensors header.
 *
 * @param name  the tensor's name
 * @param dtype the safetensors dtype name, e.g. {@code "BF16"}
 * @param shape the dimensions (empty for a scalar); the accessor returns a copy
 * @param begin the first byte of the data, relative to the first byte after the header
 * @param end   one past the last byte of the data, relative to the first byte after the header
 */
public record TensorInfo(String name, String dtype, long[] shape, long begin, long end) {
    public TensorInfo {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(dtype, "dtype");
        shape = shape.clone();
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("negative dimension in shape " + Messages.shape(shape));
            }
        }
        if (begin < 0 || end < begin) {
            throw new IllegalArgumentException("bad data offsets [" + begin + ", " + end + "]");
        }
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    /** The number of dimensions. */
    public int rank() {
        return shape.length;
    }

    /** The size of dimension {@code i}. */
    public long dim(int i) {
        return shape[i];
    }

    /** The number of elements: the product of the shape (1 for a scalar). */
    public long numel() {
        long n = 1;
        for (long d : shape) {
            n = Math.multiplyExact(n, d);
        }
        return n;
    }

    /** The number of data bytes, {@code end - begin}. */
    public long byteSize() {
        return end - begin;
    }

    /** The fsdp4j {@link DType} of the same name, if there is one (F32, BF16, F16, I32). */
    public Optional<DType> knownDType() {
        for (DType t : DType.values()) {
            if (t.safetensorsName().equals(dtype)) {
                return Optional.of(t);
            }
        }
        return Optional.empty();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorInfo t
                && name.equals(t.name)
                && dtype.equals(t.dtype)
                && Arrays.equals(shape, t.shape)
                && begin == t.begin
                && end == t.end;
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, dtype, Arrays.hashCode(shape), begin, end);
    }

    @Override
    public String toString() {
        return "TensorInfo[" + name + " " + dtype + " " + Messages.shape(shape) + " @" + begin + ".." + end + "]";
    }
}
