package io.fsdp4j.cuda;

/**
 * An owned CUDA stream of the device that was current when it was made (non-blocking with respect to the legacy
 * default stream). Order work between streams with {@link #waitFor(CudaEvent)}, never with host synchronisation.
 */
public final class CudaStream implements AutoCloseable {
    private final long handle;
    private boolean closed;

    private CudaStream(long handle) {
        this.handle = handle;
    }

    public static CudaStream create() {
        return new CudaStream(Cuda.streamCreate());
    }

    /** The cudaStream_t, for the {@code stream} arguments of the other classes. */
    public long handle() {
        return handle;
    }

    /** Blocks the host until all work queued so far has finished. */
    public void synchronize() {
        Cuda.streamSynchronize(handle);
    }

    /** Work queued after this waits for the event's last record (on the device; the host does not wait). */
    public void waitFor(CudaEvent event) {
        Cuda.streamWaitEvent(handle, event.handle());
    }

    /** Records a new event on this stream (ordering only, no timing). */
    public CudaEvent record() {
        CudaEvent event = CudaEvent.create(false);
        event.record(this);
        return event;
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            Cuda.streamDestroy(handle);
        }
    }
}
