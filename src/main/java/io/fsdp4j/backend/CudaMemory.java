package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaBackend.ptr;

import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.CudaException;
import io.fsdp4j.cuda.DeviceAllocator;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.DeviceStorage;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;

/**
 * {@link CudaBackend}'s device memory: tensors from the caching allocator, each owned by the memory scope entered on
 * the backend's thread (or, outside every scope, by the backend until it closes), and the transfers between them and
 * the host that go in order on the compute stream (uploads, and downloads, which wait for the stream).
 */
final class CudaMemory {
    private final int device;
    private final String deviceName;
    private final long stream;
    private final DeviceAllocator allocator;
    private final ArrayDeque<Scope> entered = new ArrayDeque<>();
    private final List<Long> unscoped = new ArrayList<>();

    CudaMemory(int device, String deviceName, long stream, DeviceAllocator allocator) {
        this.device = device;
        this.deviceName = deviceName;
        this.stream = stream;
        this.allocator = allocator;
    }

    private final class Scope implements MemoryScope {
        private final List<Long> pointers = new ArrayList<>();
        private boolean closed;

        @Override
        public Entered enter() {
            entered.push(this);
            return () -> {
                if (entered.peek() != this) {
                    throw new IllegalStateException("memory scopes must be left in reverse order of entry");
                }
                entered.pop();
            };
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                pointers.forEach(allocator::free);
                pointers.clear();
            }
        }
    }

    MemoryScope newScope() {
        return new Scope();
    }

    Tensor allocate(DType dtype, int... shape) {
        Tensor t = allocateForWrite(dtype, shape);
        Cuda.memsetAsync(ptr(t), 0, Math.max(1, t.numel()) * dtype.bytes(), stream);
        return t;
    }

    Tensor allocateForWrite(DType dtype, int... shape) {
        long n = Tensor.product(shape);
        long bytes = Math.max(1, n) * dtype.bytes();
        long address;
        try {
            address = allocator.allocate(bytes);
        } catch (CudaException e) {
            if (e.status() != 2) { // 2: cudaErrorMemoryAllocation
                throw e;
            }
            throw new OutOfDeviceMemory("a " + dtype + java.util.Arrays.toString(shape) + " tensor of " + mib(bytes)
                    + " MiB on " + deviceName, e.getMessage());
        }
        Scope owner = entered.peek();
        if (owner != null) {
            owner.pointers.add(address);
        } else {
            unscoped.add(address);
        }
        return new Tensor(dtype, shape, new DeviceStorage(address, n, dtype, device), 0);
    }

    Tensor upload(float[] values, int... shape) {
        return upload(DType.F32, values.length, shape, arena -> arena.allocateFrom(ValueLayout.JAVA_FLOAT, values));
    }

    Tensor uploadInts(int[] values, int... shape) {
        return upload(DType.I32, values.length, shape, arena -> arena.allocateFrom(ValueLayout.JAVA_INT, values));
    }

    /** A new tensor holding {@code count} 4-byte values that {@code staged} puts in host memory. */
    private Tensor upload(DType dtype, int count, int[] shape, Function<Arena, MemorySegment> staged) {
        Tensor t = Tensor.product(shape) == count ? allocateForWrite(dtype, shape) // written whole
                : allocate(dtype, shape);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = staged.apply(arena);
            // on the compute stream, so the ops queued next read the values; from pageable memory the call returns
            // once the values are staged, so the arena may go
            Cuda.copyToDeviceAsync(ptr(t), host, 4L * count, stream);
        }
        return t;
    }

    float[] toFloats(Tensor t) {
        int n = Math.toIntExact(t.numel());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate((long) n * t.dtype().bytes(), 8);
            Cuda.streamSynchronize(stream);
            Cuda.copyToHost(host, ptr(t), (long) n * t.dtype().bytes());
            return switch (t.dtype()) {
                case F32 -> host.toArray(ValueLayout.JAVA_FLOAT);
                case BF16, F16 -> {
                    short[] bits = host.toArray(ValueLayout.JAVA_SHORT);
                    float[] out = new float[n];
                    for (int i = 0; i < n; i++) {
                        out[i] = Half.fromBits(t.dtype(), bits[i]);
                    }
                    yield out;
                }
                default -> throw new IllegalArgumentException("not a float tensor: " + t);
            };
        }
    }

    int[] toInts(Tensor t) {
        int n = Math.toIntExact(t.numel());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(4L * n, 4);
            Cuda.streamSynchronize(stream);
            Cuda.copyToHost(host, ptr(t), 4L * n);
            return host.toArray(ValueLayout.JAVA_INT);
        }
    }

    /** The first {@code count} doubles of {@code doubles} (a buffer of doubles in an F32 tensor's bytes). */
    double[] readDoubles(Tensor doubles, int count) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(8L * count, 8);
            Cuda.streamSynchronize(stream);
            Cuda.copyToHost(host, ptr(doubles), 8L * count);
            return host.toArray(ValueLayout.JAVA_DOUBLE);
        }
    }

    /** Frees the tensors allocated outside every scope (the scopes' own are freed as they close). */
    void freeUnscoped() {
        unscoped.forEach(allocator::free);
        unscoped.clear();
    }

    static String mib(long bytes) {
        return String.format(Locale.ROOT, "%.1f", bytes / (double) (1 << 20));
    }
}
