package io.fsdp4j.report;

import java.lang.management.ManagementFactory;
import java.util.Locale;

/**
 * The JVM heap as a run sees it: its limit, the machine's memory, and the one-line messages for a run that needs
 * more heap than it has (CPU ranks keep every weight, gradient and AdamW moment of the model on the heap).
 */
public final class HeapMemory {
    private static final double GIB = 1024.0 * 1024 * 1024;
    /** What {@code bin/fsdp4j} gives the heap: this percentage of the machine's memory. */
    static final int SCRIPT_PERCENT = 75;

    private HeapMemory() {}

    /** The heap's limit, bytes. */
    public static long limitBytes() {
        return Runtime.getRuntime().maxMemory();
    }

    /** The machine's memory, bytes (the container's limit where the JVM sees one), or -1 when unknown. */
    public static long machineBytes() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getTotalMemorySize();
        }
        return -1;
    }

    /** Whether an {@link OutOfMemoryError} is the Java heap's (not direct buffers', threads' or metaspace's). */
    public static boolean isHeap(OutOfMemoryError e) {
        String m = String.valueOf(e.getMessage());
        return m.contains("Java heap space") || m.contains("GC overhead") || m.contains("Requested array size");
    }

    /** The one-line message for a heap exhausted mid-run. */
    public static String outOfHeap(OutOfMemoryError e) {
        return String.format(Locale.ROOT, "out of Java heap memory (%s): the heap is %s%s; give it more with"
                        + " FSDP4J_JAVA_OPTS=-Xmx%dg%s, or run with less: fewer CPU ranks (dist.ranks), a smaller"
                        + " train.batch_size or data.seq_len",
                e.getMessage(), gib(limitBytes()), machine(), suggestedGib(limitBytes() * 2), machineNote());
    }

    /**
     * The one-line message for a run that is known before its start to need {@code neededBytes} of heap (its
     * {@code what}) while the heap is smaller; null when it fits.
     */
    public static String tooSmallFor(long neededBytes, String what) {
        if (neededBytes <= limitBytes()) {
            return null;
        }
        return String.format(Locale.ROOT, "this run needs about %s of Java heap (%s) and the heap is %s%s: set"
                        + " FSDP4J_JAVA_OPTS=-Xmx%dg%s, or train on GPUs",
                gib(neededBytes), what, gib(limitBytes()), machine(), suggestedGib(neededBytes), machineNote());
    }

    /** Whole GiB, rounded up with a tenth to spare. */
    static long suggestedGib(long bytes) {
        return (long) Math.ceil(bytes * 1.1 / GIB);
    }

    private static String machine() {
        long m = machineBytes();
        return m > 0 ? " of this machine's " + gib(m) : "";
    }

    private static String machineNote() {
        long m = machineBytes();
        return m > 0 ? String.format(Locale.ROOT, " (at most about %dg here)", (long) (m * 0.9 / GIB)) : "";
    }

    static String gib(long bytes) {
        return String.format(Locale.ROOT, "%.1f GiB", bytes / GIB);
    }
}
