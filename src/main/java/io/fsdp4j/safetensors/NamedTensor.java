package io.fsdp4j.safetensors;

import io.fsdp4j.tensor.DType;
import java.util.Objects;

/**
 * A tensor to write with {@link SafetensorsWriter}: a name, the dtype to store it as, a shape and its
 * row-major values, given either as floats ({@code values}) or, for {@link DType#I32} only, as ints
 * ({@code ints}); exactly one of the two is non-null. The value arrays are not copied.
 *
 * @param name   the tensor's name (not {@code __metadata__})
 * @param dtype  the dtype to store the values as
 * @param shape  the dimensions (empty for a scalar); the accessor returns a copy
 * @param values the values as floats, or null when {@code ints} is given
 * @param ints   the values as ints for an I32 tensor, or null when {@code values} is given
 */
public record NamedTensor(String name, DType dtype, long[] shape, float[] values, int[] ints) {
    public NamedTensor {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(dtype, "dtype");
        shape = shape.clone();
        if (name.equals(SafetensorsHeader.METADATA_KEY)) {
            throw new IllegalArgumentException("a tensor cannot be named " + SafetensorsHeader.METADATA_KEY);
        }
        if ((values == null) == (ints == null)) {
            throw new IllegalArgumentException("tensor '" + name + "': give exactly one of float values and int values");
        }
        if (ints != null && dtype != DType.I32) {
            throw new IllegalArgumentException("tensor '" + name + "': int values can only be stored as I32, not "
                    + dtype);
        }
        long numel = 1;
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("tensor '" + name + "': negative dimension in shape "
                        + Messages.shape(shape));
            }
            numel = Math.multiplyExact(numel, d);
        }
        int length = values != null ? values.length : ints.length;
        if (numel != length) {
            throw new IllegalArgumentException("tensor '" + name + "': shape " + Messages.shape(shape) + " has " + numel
                    + " elements but " + length + " values were given");
        }
    }

    /** A tensor from float values, stored as {@code dtype} (F32, BF16 and F16 round to nearest even). */
    public NamedTensor(String name, DType dtype, long[] shape, float[] values) {
        this(name, dtype, shape, Objects.requireNonNull(values, "values"), null);
    }

    /** A tensor from float values, stored as {@code dtype}. */
    public static NamedTensor of(String name, DType dtype, long[] shape, float[] values) {
        return new NamedTensor(name, dtype, shape, values);
    }

    /** An I32 tensor from int values. */
    public static NamedTensor ofInts(String name, long[] shape, int[] values) {
        return new NamedTensor(name, DType.I32, shape, null, Objects.requireNonNull(values, "values"));
    }

    @Override
    public long[] shape() {
        return shape.clone();
    }

    /** The number of elements. */
    public int numel() {
        return values != null ? values.length : ints.length;
    }

    /** The number of bytes the data takes in the file. */
    long byteSize() {
        return (long) numel() * dtype.bytes();
    }
}
