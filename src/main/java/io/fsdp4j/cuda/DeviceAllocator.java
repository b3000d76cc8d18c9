package io.fsdp4j.cuda;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * A caching allocator of device memory for one device, so that a training step makes no cudaMalloc/cudaFree in
 * its steady state. Sizes are rounded to classes: to 512 bytes under 1 MiB, to 2 MiB from there. A freed block
 * goes to its class's free list; a request takes a free block of its class, or (for large ones) the smallest
 * free block that wastes at most an eighth plus 2 MiB, before asking cudaMalloc. When cudaMalloc runs out of
 * memory, the cached free blocks are released and it is tried once more.
 *
 * <p>Stream rule: blocks are reused in host order, which is safe when every use of a block is on one stream (the
 * rank's compute stream), or ordered before that stream by events, by the time it is freed. Thread-safe; call
 * it from threads whose current device is this allocator's.
 */
public final class DeviceAllocator implements AutoCloseable {
    static final long SMALL_ROUND = 512, LARGE_ROUND = 2L << 20, LARGE_FROM = 1L << 20;

    private final int device;
    private final TreeMap<Long, ArrayDeque<Long>> free = new TreeMap<>();
    private final Map<Long, Long> live = new HashMap<>();
    private long allocated, reserved, peakAllocated, peakReserved, mallocs;
    private boolean closed;

    /** An allocator for the current device. */
    public DeviceAllocator() {
        this(Cuda.getDevice());
    }

    public DeviceAllocator(int device) {
        this.device = device;
    }

    public int device() {
        return device;
    }

    /** The size a request of {@code bytes} occupies. */
    public static long sizeClass(long bytes) {
        if (bytes <= 0) {
            return SMALL_ROUND;
        }
        long round = bytes < LARGE_FROM ? SMALL_ROUND : LARGE_ROUND;
        return (bytes + round - 1) / round * round;
    }

    /** A device pointer to at least {@code bytes} bytes (aligned to 256 bytes), uninitialised. */
    public synchronized long allocate(long bytes) {
        if (closed) {
            throw new IllegalStateException("device allocator is closed");
        }
        long size = sizeClass(bytes);
        long block, blockSize;
        Map.Entry<Long, ArrayDeque<Long>> fit = freeFit(size);
        if (fit != null) {
            blockSize = fit.getKey();
            block = fit.getValue().pop();
            if (fit.getValue().isEmpty()) {
                free.remove(blockSize);
            }
        } else {
            block = malloc(size);
            blockSize = size;
        }
        live.put(block, blockSize);
        allocated += blockSize;
        peakAllocated = Math.max(peakAllocated, allocated);
        return block;
    }

    /** The free list to take from: the request's own class, or for a large one a slightly larger class. */
    private Map.Entry<Long, ArrayDeque<Long>> freeFit(long size) {
        long limit = size < LARGE_FROM ? size : size + size / 8 + LARGE_ROUND;
        Map.Entry<Long, ArrayDeque<Long>> entry = free.ceilingEntry(size);
        return entry == null || entry.getKey() > limit ? null : entry;
    }

    private long malloc(long size) {
        int current = Cuda.getDevice();
        if (current != device) {
            throw new IllegalStateException("device allocator of device " + device + " used from a thread on device " + current);
        }
        long block;
        try {
            block = Cuda.malloc(size);
        } catch (CudaException outOfMemory) {
            if (outOfMemory.status() != 2 || reserved == allocated) { // 2 = cudaErrorMemoryAllocation
                throw withStats(outOfMemory);
            }
            Cuda.clearLastError();
            emptyCacheLocked();
            try {
                block = Cuda.malloc(size);
            } catch (CudaException again) {
                throw withStats(again);
            }
        }
        mallocs++;
        reserved += size;
        peakReserved = Math.max(peakReserved, reserved);
        return block;
    }

    private CudaException withStats(CudaException e) {
        return new CudaException(e.function(), e.status(), e.getMessage().substring(e.function().length() + 2)
                + "; this allocator holds " + mib(allocated) + " MiB in use and " + mib(reserved) + " MiB reserved on device " + device);
    }

    private static String mib(long bytes) {
        return "%.1f".formatted(bytes / (double) (1 << 20));
    }

    /** Returns a block from {@link #allocate} to the cache. */
    public synchronized void free(long pointer) {
        if (closed) {
            return;
        }
        Long size = live.remove(pointer);
        if (size == null) {
            throw new IllegalArgumentException("0x" + Long.toHexString(pointer) + " is not a live block of this allocator");
        }
        allocated -= size;
        free.computeIfAbsent(size, s -> new ArrayDeque<>()).push(pointer);
    }

    /** Gives every cached free block back to CUDA (cudaFree); blocks in use stay. */
    public synchronized void emptyCache() {
        emptyCacheLocked();
    }

    private void emptyCacheLocked() {
        Cuda.deviceSynchronize(); // a freed block may still be in use by queued work
        for (var entry : free.entrySet()) {
            for (long block : entry.getValue()) {
                Cuda.free(block);
                reserved -= entry.getKey();
            }
        }
        free.clear();
    }

    /** Bytes in blocks handed out (rounded to their classes). */
    public synchronized long allocatedBytes() {
        return allocated;
    }

    /** Bytes obtained from cudaMalloc: in use plus cached. */
    public synchronized long reservedBytes() {
        return reserved;
    }

    public synchronized long peakAllocatedBytes() {
        return peakAllocated;
    }

    public synchronized long peakReservedBytes() {
        return peakReserved;
    }

    /** How many times cudaMalloc was called: flat once the steady state is reached. */
    public synchronized long mallocCount() {
        return mallocs;
    }

    public synchronized void resetPeaks() {
        peakAllocated = allocated;
        peakReserved = reserved;
    }

    /** Frees every block, in use or cached; pointers from this allocator are invalid afterwards. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        Cuda.deviceSynchronize();
        for (long block : live.keySet()) {
            Cuda.free(block);
        }
        live.clear();
        allocated = 0;
        emptyCacheLocked();
        reserved = 0;
        closed = true;
    }
}
