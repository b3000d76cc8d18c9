package io.fsdp4j.backend;

import static io.fsdp4j.backend.CudaBackend.ptr;

import io.fsdp4j.UserError;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.CudaException;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * {@link CudaBackend}'s page-locked host memory (offloaded shards) and the copies between it and the device, each on
 * a stream of its own direction beside the compute stream, ordered against it by events: a copy starts after the
 * compute work queued before it, and the compute stream waits for it only where the copy is awaited.
 */
final class CudaHostMemory implements AutoCloseable {
    private final long stream;
    private final long toDeviceStream;
    private final long toHostStream;
    private final List<MemorySegment> pinned = new ArrayList<>();

    /** Copies ordered against compute stream {@code stream}, on two streams of their own. */
    CudaHostMemory(long stream) {
        this.stream = stream;
        this.toDeviceStream = Cuda.streamCreate();
        this.toHostStream = Cuda.streamCreate();
    }

    MemorySegment allocateHost(long floats) {
        long bytes = Math.max(1, floats) * 4;
        MemorySegment segment;
        try {
            segment = Cuda.mallocHost(bytes);
        } catch (CudaException e) {
            throw new UserError("out of page-locked host memory allocating " + CudaMemory.mib(bytes) + " MiB of "
                    + "offloaded state (" + e.getMessage() + "); the host needs room for 16 bytes per parameter of "
                    + "this rank's shards: use more ranks or nodes, or a smaller model");
        }
        segment.fill((byte) 0);
        synchronized (pinned) {
            pinned.add(segment);
        }
        return segment;
    }

    /** Queues {@code copy} on {@code copyStream} after the compute work queued so far. */
    private Backend.HostCopy copyOn(long copyStream, Runnable copy) {
        long ready = Cuda.eventCreate(false);
        Cuda.eventRecord(ready, stream);
        Cuda.streamWaitEvent(copyStream, ready);
        Cuda.eventDestroy(ready); // released once the recorded work completes
        copy.run();
        long done = Cuda.eventCreate(false);
        Cuda.eventRecord(done, copyStream);
        return new Backend.HostCopy() {
            private boolean awaited;

            @Override
            public void await() {
                if (!awaited) {
                    awaited = true;
                    Cuda.streamWaitEvent(stream, done);
                    Cuda.eventDestroy(done);
                }
            }
        };
    }

    Backend.HostCopy copyFromHost(MemorySegment src, Tensor dst) {
        requireF32(dst);
        long bytes = 4 * dst.numel();
        return copyOn(toDeviceStream, () -> Cuda.copyToDeviceAsync(ptr(dst), src, bytes, toDeviceStream));
    }

    Backend.HostCopy copyToHost(Tensor src, MemorySegment dst) {
        requireF32(src);
        long bytes = 4 * src.numel();
        return copyOn(toHostStream, () -> Cuda.copyToHostAsync(dst, ptr(src), bytes, toHostStream));
    }

    void waitForHostCopies() {
        Cuda.streamSynchronize(toDeviceStream);
        Cuda.streamSynchronize(toHostStream);
    }

    private static void requireF32(Tensor t) {
        if (t.dtype() != DType.F32) {
            throw new IllegalArgumentException("host copies are of fp32 tensors, got " + t);
        }
    }

    /** Waits for the copies, then frees their streams and the page-locked memory. */
    @Override
    public void close() {
        waitForHostCopies();
        Cuda.streamDestroy(toDeviceStream);
        Cuda.streamDestroy(toHostStream);
        synchronized (pinned) {
            pinned.forEach(Cuda::freeHost);
            pinned.clear();
        }
    }
}
