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
 * A {@code __global__} function of a {@link CudaModule}, launched with {@code cuLaunchKernel}. Arguments are
 * given in the kernel's order as Java values: {@code Long} (a device pointer or a 64-bit integer), a {@link
 * MemorySegment} (its address, as a pointer), {@code Integer}, {@code Float}, {@code Double}, {@code Short}
 * (e.g. bf16 bits), {@code Byte}, {@code Boolean} and {@link ByValue} (a struct passed by value, such as a
 * {@link TensorMap}). Each must match the C parameter's type exactly: an {@code int} parameter needs an {@code
 * Integer}, a pointer a {@code Long}.
 */
public final class Kernel {
    private static final Library DRV = Library.DRIVER;
    private static final MethodHandle cuLaunchKernel = lazy(DRV, "cuLaunchKernel", INT,
            LONG, INT, INT, INT, INT, INT, INT, INT, LONG, PTR, PTR);
    private static final MethodHandle cuFuncSetAttribute = lazy(DRV, "cuFuncSetAttribute", INT, LONG, INT, INT);
    private static final int MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

    /** Grid or block dimensions. */
    public record Dim3(int x, int y, int z) {
        public Dim3 {
            if (x < 1 || y < 1 || z < 1) {
                throw new IllegalArgumentException("launch dimensions must be positive: " + x + "x" + y + "x" + z);
            }
        }

        public static Dim3 of(int x) {
            return new Dim3(x, 1, 1);
        }

        public static Dim3 of(int x, int y) {
            return new Dim3(x, y, 1);
        }
    }

    /** A struct argument passed by value: its bytes, copied at the launch (a {@code __grid_constant__} CUtensorMap). */
    public record ByValue(MemorySegment bytes) {}

    private final String name;
    private final long handle;
    private final int device;

    Kernel(String name, long handle, int device) {
        this.name = name;
        this.handle = handle;
        this.device = device;
    }

    public String name() {
        return name;
    }

    /** The CUfunction. */
    public long handle() {
        return handle;
    }

    public int device() {
        return device;
    }

    /** Allows launches with up to {@code bytes} of dynamic shared memory (needed above 48 KiB). */
    public void setMaxDynamicSharedMemory(int bytes) {
        try {
            Cuda.checkDriver("cuFuncSetAttribute(" + name + ", MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                    (int) cuFuncSetAttribute.invokeExact(handle, MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes));
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }

    /** A 1-D launch: {@code grid} blocks of {@code block} threads. */
    public void launch(int grid, int block, int sharedBytes, long stream, Object... args) {
        launch(Dim3.of(grid), Dim3.of(block), sharedBytes, stream, args);
    }

    public void launch(Dim3 grid, Dim3 block, int sharedBytes, long stream, Object... args) {
        OpTimeline.around(name, stream, () -> queue(grid, block, sharedBytes, stream, args));
    }

    private void queue(Dim3 grid, Dim3 block, int sharedBytes, long stream, Object... args) {
        try (Arena arena = Arena.ofConfined()) {
            // kernelParams: an array of pointers, each to one argument's value
            MemorySegment values = arena.allocate(8L * Math.max(1, args.length), 8);
            MemorySegment pointers = arena.allocate(PTR, Math.max(1, args.length));
            for (int i = 0; i < args.length; i++) {
                MemorySegment slot = values.asSlice(8L * i, 8);
                if (args[i] instanceof ByValue(MemorySegment bytes)) { // its own copy, aligned as a CUtensorMap
                    MemorySegment copy = arena.allocate(bytes.byteSize(), 64).copyFrom(bytes);
                    pointers.setAtIndex(PTR, i, copy);
                    continue;
                }
                switch (args[i]) {
                    case Long v -> slot.set(ValueLayout.JAVA_LONG, 0, v);
                    case MemorySegment v -> slot.set(ValueLayout.JAVA_LONG, 0, v.address());
                    case Integer v -> slot.set(ValueLayout.JAVA_INT, 0, v);
                    case Float v -> slot.set(ValueLayout.JAVA_FLOAT, 0, v);
                    case Double v -> slot.set(ValueLayout.JAVA_DOUBLE, 0, v);
                    case Short v -> slot.set(ValueLayout.JAVA_SHORT, 0, v);
                    case Byte v -> slot.set(ValueLayout.JAVA_BYTE, 0, v);
                    case Boolean v -> slot.set(ValueLayout.JAVA_BYTE, 0, (byte) (v ? 1 : 0));
                    case null -> throw new IllegalArgumentException("argument " + i + " of " + name + " is null");
                    default -> throw new IllegalArgumentException("argument " + i + " of " + name + " has type "
                            + args[i].getClass().getSimpleName() + "; use Long, Integer, Float, Double, Short, Byte,"
                            + " Boolean or MemorySegment");
                }
                pointers.setAtIndex(PTR, i, slot);
            }
            int status = (int) cuLaunchKernel.invokeExact(handle, grid.x(), grid.y(), grid.z(), block.x(), block.y(),
                    block.z(), sharedBytes, stream, pointers, MemorySegment.NULL);
            Cuda.checkDriver("cuLaunchKernel(" + name + ")", status);
        } catch (Throwable t) {
            throw Native.rethrow(t);
        }
    }
}
