package io.fsdp4j.backend.cpu;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * The benchmark thread's CPU time beside the work it did, as two secondary results: {@code gflop} and
 * {@code cpuSeconds} (JMH adds each up over the measured iterations), whose ratio is GFLOP per CPU-second. On a
 * shared machine wall-clock throughput counts the time other processes hold the core; CPU time does not (their cache
 * traffic still shows).
 */
@State(Scope.Thread)
@AuxCounters(AuxCounters.Type.EVENTS)
public class CpuRate {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    /** GFLOP done in this iteration. */
    public double gflop;
    /** CPU seconds of the benchmark thread in this iteration. */
    public double cpuSeconds;

    @Setup(Level.Iteration)
    public void reset() {
        gflop = 0;
        cpuSeconds = 0;
    }

    /** The thread's CPU time now, in nanoseconds. */
    static long now() {
        return THREADS.getCurrentThreadCpuTime();
    }

    /** Counts {@code flops} done since {@code start} (a {@link #now} value). */
    void add(double flops, long start) {
        cpuSeconds += (now() - start) * 1e-9;
        gflop += flops * 1e-9;
    }
}
