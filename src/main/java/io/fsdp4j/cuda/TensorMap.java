package io.fsdp4j.cuda;

import static io.fsdp4j.cuda.Native.INT;
import static io.fsdp4j.cuda.Native.LONG;
import static io.fsdp4j.cuda.Native.PTR;
import static io.fsdp4j.cuda.Native.lazy;

import io.fsdp4j.cuda.NativeLibraries.Library;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Tensor maps (CUtensorMap, 128 bytes) for the bulk tensor copy engine of sm_90 and later, made by the driver's
 * {@code cuTensorMapEncodeTiled} and passed to a kernel by value ({@link Kernel.ByValue}, a {@code
 * __grid_constant__} parameter). Encoding is host work only (no GPU call), cheap enough to do at each launch.
 */
public final class TensorMap {
    private static final MethodHandle cuTensorMapEncodeTiled = lazy(Library.DRIVER, "cuTensorMapEncodeTiled", INT,
            PTR, INT, INT, LONG, PTR, PTR, PTR, PTR, INT, INT, INT, INT);
    private static final int BFLOAT16 = 9, INTERLEAVE_NONE = 0, SWIZZLE_128B = 3, L2_PROMOTION_256B = 3, OOB_ZERO = 0;
    /** A CUtensorMap's size and alignment. */
    public static final int BYTES = 128, ALIGNMENT = 64;

    private TensorMap() {}

    /**
     * A rank-3 bf16 map with the 128-byte swizzle, elements outside the tensor read as zeros: {@code sizes} in elements
     * (innermost first), {@code strides} of dimensions 1 and 2 in bytes (multiples of 16), boxes of {@code box}
     * elements (box[0] * 2 <= 128 bytes). The map is allocated in {@code arena}.
     */
    public static Kernel.ByValue bf16Swizzled(Arena arena, long address, long[] sizes, long[] strides, int[] box) {
        if (sizes.length != 3 || strides.length != 2 || box.length != 3) {
            throw new IllegalArgumentException("a rank-3 map needs 3 sizes, 2 strides and 3 box sizes");
        }
        MemorySegment map = arena.allocate(BYTES, ALIGNMENT);
        MemorySegment dims = arena.allocateFrom(ValueLayout.JAVA_LONG, sizes);
        MemorySegment byteStrides = arena.allocateFrom(ValueLayout.JAVA_LONG, strides);
        MemorySegment boxDims = arena.allocateFrom(ValueLayout.JAVA_INT, box);
        MemorySegment elementStrides = arena.allocateFrom(ValueLayout.JAVA_INT, 1, 1, 1);
        try {
            Cuda.checkDriver("cuTensorMapEncodeTiled", (int) cuTensorMapEncodeTiled.invokeExact(map, BFLOAT16, 3,
                    address, dims, byteStrides, boxDims, elementStrides, INTERLEAVE_NONE, SWIZZLE_128B,
                    L2_PROMOTION_256B, OOB_ZERO));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
        return new Kernel.ByValue(map);
    }
}
