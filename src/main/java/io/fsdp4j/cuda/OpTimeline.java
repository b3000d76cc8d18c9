package io.fsdp4j.cuda;

import io.fsdp4j.report.StepProfile;
import java.util.ArrayList;
import java.util.List;

/**
 * Records the device time of every operation one thread queues while it is active: each kernel launch
 * ({@link Kernel}), matrix product ({@link CublasLt}), device copy ({@link Cuda#copyOnDeviceAsync}) and collective
 * ({@link NcclComm}) gets a timing event before and after it on its stream. Inactive (the normal case) it costs one
 * thread-local read per operation. Active, it adds two event records per operation (a few microseconds of host
 * time), so a profiled step is a little slower than an unprofiled one; the split it reports is what matters.
 *
 * <pre>{@code
 * try (OpTimeline timeline = OpTimeline.start(computeStream)) {
 *     ... one training step ...
 *     StepProfile profile = timeline.finish();
 * }
 * }</pre>
 */
public final class OpTimeline implements AutoCloseable {
    private static final ThreadLocal<OpTimeline> ACTIVE = new ThreadLocal<>();

    private record Pending(String op, long stream, CudaEvent start, CudaEvent end) {}

    private final long computeStream;
    private final CudaEvent origin = CudaEvent.create(true);
    private final List<Pending> pending = new ArrayList<>();
    private boolean closed;

    private OpTimeline(long computeStream) {
        this.computeStream = computeStream;
        origin.record(computeStream);
    }

    /**
     * Starts recording this thread's operations; the step's time is measured from now on {@code computeStream}.
     * Operations on any other stream count as communication.
     */
    public static OpTimeline start(long computeStream) {
        if (ACTIVE.get() != null) {
            throw new IllegalStateException("a timeline is already recording on this thread");
        }
        OpTimeline timeline = new OpTimeline(computeStream);
        ACTIVE.set(timeline);
        return timeline;
    }

    /** Runs {@code queue}, which queues operation {@code op} on {@code stream}, timed when a timeline is active. */
    static void around(String op, long stream, Runnable queue) {
        OpTimeline timeline = ACTIVE.get();
        if (timeline == null) {
            queue.run();
            return;
        }
        CudaEvent start = CudaEvent.create(true), end = CudaEvent.create(true);
        start.record(stream);
        queue.run();
        end.record(stream);
        timeline.pending.add(new Pending(op, stream, start, end));
    }

    /**
     * Stops recording, waits for the device to pass everything recorded, and returns the step's profile: from the
     * start to the end of the last operation on any stream.
     */
    public StepProfile finish() {
        ACTIVE.remove();
        CudaEvent last = CudaEvent.create(true);
        try {
            last.record(computeStream);
            last.synchronize();
            List<StepProfile.Span> spans = new ArrayList<>();
            double stepMs = last.elapsedMsSince(origin);
            for (Pending p : pending) {
                p.end().synchronize(); // a collective's stream may finish after the compute stream
                double startMs = p.start().elapsedMsSince(origin), endMs = p.end().elapsedMsSince(origin);
                stepMs = Math.max(stepMs, endMs);
                spans.add(new StepProfile.Span(p.op(), p.stream() == computeStream ? StepProfile.Stream.COMPUTE
                        : StepProfile.Stream.COMMUNICATION, startMs, Math.max(startMs, endMs)));
            }
            return new StepProfile(stepMs, spans);
        } finally {
            last.close();
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (ACTIVE.get() == this) {
            ACTIVE.remove();
        }
        for (Pending p : pending) {
            p.start().close();
            p.end().close();
        }
        origin.close();
    }
}
