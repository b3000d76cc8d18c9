package io.fsdp4j.cuda;

/** An owned CUDA event: a point in a stream that other streams can wait for, and, when timed, a clock. */
public final class CudaEvent implements AutoCloseable {
    private final long handle;
    private boolean closed;

    private CudaEvent(long handle) {
        this.handle = handle;
    }

    /** {@code timing} false makes a lighter event for ordering only. */
    public static CudaEvent create(boolean timing) {
        return new CudaEvent(Cuda.eventCreate(timing));
    }

    public long handle() {
        return handle;
    }

    public void record(CudaStream stream) {
        Cuda.eventRecord(handle, stream.handle());
    }

    /** Records on a raw stream handle (0 for the legacy default stream). */
    public void record(long stream) {
        Cuda.eventRecord(handle, stream);
    }

    /** Blocks the host until the work before the last record has finished. */
    public void synchronize() {
        Cuda.eventSynchronize(handle);
    }

    /** Whether the work before the last record has finished, without blocking. */
    public boolean isDone() {
        return Cuda.eventQuery(handle);
    }

    /** Milliseconds from {@code start} to this event; both timing events, recorded and completed. */
    public float elapsedMsSince(CudaEvent start) {
        return Cuda.eventElapsedMs(start.handle, handle);
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            Cuda.eventDestroy(handle);
        }
    }
}
