package io.fsdp4j.tensor;

import java.util.Arrays;

/**
 * A dense row-major view of {@link Storage}: a dtype, a shape and an element offset. Views share storage;
 * a tensor never owns more than its storage. Which backend computes on it is decided by its storage.
 */
public final class Tensor {
    private final DType dtype;
    private final int[] shape;
    private final Storage storage;
    private final long offset;
    private final long numel;

    public Tensor(DType dtype, int[] shape, Storage storage, long offset) {
        this.dtype = dtype;
        this.shape = shape.clone();
        this.storage = storage;
        this.offset = offset;
        this.numel = product(shape);
        if (offset < 0 || offset + numel > storage.capacity()) {
            throw new IllegalArgumentException("view " + Arrays.toString(shape) + " at " + offset
                    + " exceeds storage of " + storage.capacity() + " elements");
        }
    }

    public static long product(int[] shape) {
        long n = 1;
        for (int d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("negative dimension in " + Arrays.toString(shape));
            }
            n *= d;
        }
        return n;
    }

    public DType dtype() {
        return dtype;
    }

    public int[] shape() {
        return shape.clone();
    }

    public int dim(int i) {
        return shape[i < 0 ? shape.length + i : i];
    }

    public int rank() {
        return shape.length;
    }

    public long numel() {
        return numel;
    }

    public Storage storage() {
        return storage;
    }

    /** Offset of the first element in the storage, in elements. */
    public long offset() {
        return offset;
    }

    /** A contiguous sub-range of this tensor's elements, seen with a new shape. */
    public Tensor view(long elementOffset, int... newShape) {
        long n = product(newShape);
        if (elementOffset < 0 || elementOffset + n > numel) {
            throw new IllegalArgumentException("view of " + Arrays.toString(newShape) + " at " + elementOffset
                    + " exceeds tensor of " + numel + " elements");
        }
        return new Tensor(dtype, newShape, storage, offset + elementOffset);
    }

    /** The same elements with another shape of equal size. */
    public Tensor reshape(int... newShape) {
        if (product(newShape) != numel) {
            throw new IllegalArgumentException("cannot reshape " + Arrays.toString(shape) + " to "
                    + Arrays.toString(newShape));
        }
        return new Tensor(dtype, newShape, storage, offset);
    }

    @Override
    public String toString() {
        return "Tensor(" + dtype + Arrays.toString(shape) + ")";
    }
}
