package io.fsdp4j.report;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Where one training step's time went on one device: the operations queued on the compute stream and on the
 * communication stream, each an interval of device time measured from the step's start (timing events recorded
 * around every kernel, matrix product, copy and collective; {@code io.fsdp4j.cuda.OpTimeline} records them).
 *
 * <p>The step splits into: <b>compute</b>, the time the compute stream is busy (the union of its intervals);
 * <b>exposed communication</b>, the time the compute stream is idle while a collective runs (it is waiting for a
 * gather or a reduction); and <b>host gaps</b>, the time the compute stream is idle and no collective runs (the
 * device waits for the host: launch overhead, host synchronisation, host-side work). Communication that runs
 * while the compute stream is busy is hidden behind compute. The three parts add up to the step's wall time on the
 * device.
 *
 * @param stepMs the step's device time, from its first event to its last
 * @param spans every recorded operation
 */
public record StepProfile(double stepMs, List<Span> spans) {

    /** Which stream an operation ran on. */
    public enum Stream { COMPUTE, COMMUNICATION }

    /** One operation: its name (a kernel, "gemm ...", "nccl ..."), stream and interval in ms from the step start. */
    public record Span(String op, Stream stream, double startMs, double endMs) {
        public Span {
            if (!(endMs >= startMs)) {
                throw new IllegalArgumentException(op + ": ends at " + endMs + " ms before it starts at " + startMs);
            }
        }

        double ms() {
            return endMs - startMs;
        }
    }

    /** The totals of one operation name: how many launches and their summed device time. */
    public record OpTotal(String op, Stream stream, int count, double ms) {}

    public StepProfile {
        spans = List.copyOf(spans);
    }

    /** Time the compute stream is busy (overlapping intervals counted once). */
    public double computeMs() {
        return unionMs(busy(Stream.COMPUTE));
    }

    /** Time some collective runs (overlapping intervals counted once). */
    public double communicationMs() {
        return unionMs(busy(Stream.COMMUNICATION));
    }

    /** Time the compute stream is idle while a collective runs: communication not hidden behind compute. */
    public double exposedCommunicationMs() {
        List<double[]> idle = complement(merge(busy(Stream.COMPUTE)), 0, stepMs);
        return intersectionMs(idle, merge(busy(Stream.COMMUNICATION)));
    }

    /** Time the compute stream is idle and nothing communicates: the device waits for the host. */
    public double hostGapMs() {
        return Math.max(0, stepMs - computeMs() - exposedCommunicationMs());
    }

    /**
     * One stretch of a host gap: the compute stream idle with nothing communicating, between the compute
     * operation that ended at its start ({@code after}; null at the step's start) and the one that starts at its
     * end ({@code before}; null at the step's end).
     */
    public record HostGap(double startMs, double endMs, String after, String before) {
        public double ms() {
            return endMs - startMs;
        }
    }

    /** The host gaps of the step, the longest first: where the device waited for the host, and between what. */
    public List<HostGap> hostGaps() {
        List<double[]> idle = complement(merge(busy(Stream.COMPUTE)), 0, stepMs);
        List<double[]> noComputeNoComm = new ArrayList<>();
        for (double[] i : idle) {
            noComputeNoComm.addAll(complement(merge(busy(Stream.COMMUNICATION)), i[0], i[1]));
        }
        List<HostGap> gaps = new ArrayList<>();
        for (double[] g : noComputeNoComm) {
            if (g[1] <= g[0]) {
                continue;
            }
            String after = null, before = null;
            double afterEnd = Double.NEGATIVE_INFINITY, beforeStart = Double.POSITIVE_INFINITY;
            for (Span s : spans) {
                if (s.stream() != Stream.COMPUTE) {
                    continue;
                }
                if (s.endMs() <= g[0] && s.endMs() > afterEnd) {
                    afterEnd = s.endMs();
                    after = s.op();
                }
                if (s.startMs() >= g[1] && s.startMs() < beforeStart) {
                    beforeStart = s.startMs();
                    before = s.op();
                }
            }
            gaps.add(new HostGap(g[0], g[1], after, before));
        }
        gaps.sort(Comparator.comparingDouble(HostGap::ms).reversed());
        return gaps;
    }

    /** How many of the longest host gaps the table names. */
    static final int HOST_GAPS_SHOWN = 5;

    /** Per operation name, largest total first. */
    public List<OpTotal> totals() {
        Map<String, OpTotal> byOp = new LinkedHashMap<>();
        for (Span s : spans) {
            byOp.merge(s.stream() + "/" + s.op(), new OpTotal(s.op(), s.stream(), 1, s.ms()),
                    (a, b) -> new OpTotal(a.op(), a.stream(), a.count() + b.count(), a.ms() + b.ms()));
        }
        List<OpTotal> out = new ArrayList<>(byOp.values());
        out.sort(Comparator.comparingDouble(OpTotal::ms).reversed());
        return out;
    }

    /**
     * A table a user reads: the split of the step, then the {@code topOps} operations that take the most time (0 or
     * less: every operation), the rest summed on one line.
     */
    public String table(int topOps) {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "step %.1f ms on the device%n", stepMs));
        row(b, "compute (compute stream busy)", computeMs());
        row(b, "exposed communication", exposedCommunicationMs());
        row(b, "host gaps (device waits for the host)", hostGapMs());
        b.append(String.format(Locale.ROOT, "  %-40s %9.1f ms (%.0f%% of it hidden behind compute)%n",
                "communication (collectives running)", communicationMs(),
                communicationMs() == 0 ? 0 : 100 * (1 - exposedCommunicationMs() / communicationMs())));
        b.append(String.format(Locale.ROOT, "%n  %-13s %-44s %6s %10s %6s%n", "stream", "operation", "count", "ms",
                "%step"));
        List<OpTotal> totals = totals();
        if (topOps <= 0) {
            topOps = totals.size();
        }
        for (OpTotal t : totals.subList(0, Math.min(topOps, totals.size()))) {
            b.append(String.format(Locale.ROOT, "  %-13s %-44s %6d %10.2f %5.1f%%%n",
                    t.stream().toString().toLowerCase(Locale.ROOT), abbreviate(t.op(), 44), t.count(), t.ms(),
                    100 * t.ms() / stepMs));
        }
        if (totals.size() > topOps) {
            double rest = totals.subList(topOps, totals.size()).stream().mapToDouble(OpTotal::ms).sum();
            b.append(String.format(Locale.ROOT, "  %-13s %-44s %6d %10.2f %5.1f%%%n", "", "(other operations)",
                    totals.size() - topOps, rest, 100 * rest / stepMs));
        }
        List<HostGap> gaps = hostGaps();
        if (!gaps.isEmpty()) {
            b.append(String.format(Locale.ROOT, "%n  host gaps: %d; the longest, at ms from the step's start, between"
                    + " the compute operations around them:%n", gaps.size()));
            for (HostGap g : gaps.subList(0, Math.min(HOST_GAPS_SHOWN, gaps.size()))) {
                b.append(String.format(Locale.ROOT, "  %8.3f ms at %8.2f  after %s, before %s%n", g.ms(), g.startMs(),
                        g.after() == null ? "(the step's start)" : abbreviate(g.after(), 40),
                        g.before() == null ? "(the step's end)" : abbreviate(g.before(), 40)));
            }
        }
        return b.toString();
    }

    /** The split as numbers, for a JSON line. */
    public Map<String, Object> summary() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("step_ms", stepMs);
        m.put("compute_ms", computeMs());
        m.put("exposed_comm_ms", exposedCommunicationMs());
        m.put("host_gap_ms", hostGapMs());
        m.put("comm_ms", communicationMs());
        return m;
    }

    private void row(StringBuilder b, String what, double ms) {
        b.append(String.format(Locale.ROOT, "  %-40s %9.1f ms %5.1f%%%n", what, ms, stepMs == 0 ? 0 : 100 * ms / stepMs));
    }

    private static String abbreviate(String s, int width) {
        return s.length() <= width ? s : s.substring(0, width - 3) + "...";
    }

    private List<double[]> busy(Stream stream) {
        List<double[]> out = new ArrayList<>();
        for (Span s : spans) {
            if (s.stream() == stream) {
                out.add(new double[] {Math.max(0, s.startMs()), Math.min(stepMs, s.endMs())});
            }
        }
        return out;
    }

    /** Sorted, disjoint intervals covering the same time. */
    static List<double[]> merge(List<double[]> intervals) {
        List<double[]> sorted = new ArrayList<>(intervals);
        sorted.removeIf(i -> i[1] <= i[0]);
        sorted.sort(Comparator.comparingDouble(i -> i[0]));
        List<double[]> out = new ArrayList<>();
        for (double[] i : sorted) {
            if (!out.isEmpty() && i[0] <= out.getLast()[1]) {
                out.getLast()[1] = Math.max(out.getLast()[1], i[1]);
            } else {
                out.add(new double[] {i[0], i[1]});
            }
        }
        return out;
    }

    private static double unionMs(List<double[]> intervals) {
        return merge(intervals).stream().mapToDouble(i -> i[1] - i[0]).sum();
    }

    /** [from, to] minus sorted disjoint intervals. */
    private static List<double[]> complement(List<double[]> merged, double from, double to) {
        List<double[]> out = new ArrayList<>();
        double at = from;
        for (double[] i : merged) {
            if (i[0] > at) {
                out.add(new double[] {at, Math.min(i[0], to)});
            }
            at = Math.max(at, i[1]);
        }
        if (at < to) {
            out.add(new double[] {at, to});
        }
        return out;
    }

    /** Total length of the overlap of two sorted disjoint interval lists. */
    private static double intersectionMs(List<double[]> a, List<double[]> b) {
        double total = 0;
        int i = 0, j = 0;
        while (i < a.size() && j < b.size()) {
            double lo = Math.max(a.get(i)[0], b.get(j)[0]), hi = Math.min(a.get(i)[1], b.get(j)[1]);
            total += Math.max(0, hi - lo);
            if (a.get(i)[1] < b.get(j)[1]) {
                i++;
            } else {
                j++;
            }
        }
        return total;
    }
}
