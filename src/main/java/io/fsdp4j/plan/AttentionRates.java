package io.fsdp4j.plan;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * How fast fsdp4j's attention kernels run at a shape: measured, not modelled. The table
 * ({@code plan/attention-h200.txt}, made by {@code tools/kernels/attention_bench.cu --sweep} on one H200) times the
 * forward and the backward (dq and dk/dv) alone at head sizes 64 and 128, 4 to 64 heads and 512 to 8192 tokens. The
 * rates fall steeply with fewer heads and shorter sequences, where the kernels' grids (a block per 128 or 64 queries
 * of a head) leave the GPU's multiprocessors idle or the causal triangle's longest rows alone at the end: Qwen2.5-7B's 28
 * heads at 2048 tokens run the forward at 211 TFLOP/s, Qwen2.5-1.5B's 12 at 118, 28 heads at 512 tokens at 64.
 *
 * <p>A shape between the table's points is read by interpolating the rates linearly in log(heads) and log(sequence),
 * and linearly in head size between 64 and 128; outside the table the nearest edge holds (not extrapolated). The
 * batch multiplies the heads (the grids' third dimension is the batch, so B sequences of H heads fill the GPU as
 * B * H heads do). Inside a training step the kernels run slower than alone ({@link #IN_STEP_FORWARD},
 * {@link #IN_STEP_BACKWARD}).
 */
public final class AttentionRates {
    /**
     * In a step over alone, forward: Qwen2.5-0.5B's (the calibration's small reference; its profile in the third
     * session: 48 forwards in 3.32 ms, 108.7 TFLOP/s in the step against 112.9 alone). Qwen2.5-1.5B's step agrees (56
     * in 6.42 ms, 112.4 against 118.3: 0.95). Qwen2.5-7B's step runs at the card's power limit, where every kernel
     * slows (its attention at 0.80 of the rate alone): the calibration's slowdown, fitted to that step, carries it.
     */
    static final double IN_STEP_FORWARD = 108.7 / 112.9;

    /** In a step over alone, backward: 0.5B's 83.4 against 87.9 (1.5B's 90.5 against 96.5: 0.94). */
    static final double IN_STEP_BACKWARD = 83.4 / 87.9;

    /** Forward and backward FLOP/s of one shape, in a step. */
    public record Rates(double forward, double backward) {}

    private static final AttentionRates H200 = load("/plan/attention-h200.txt");

    /** head size -> heads -> sequence -> {forward, backward} FLOP/s alone */
    private final TreeMap<Integer, TreeMap<Integer, TreeMap<Integer, double[]>>> table;

    private AttentionRates(TreeMap<Integer, TreeMap<Integer, TreeMap<Integer, double[]>>> table) {
        this.table = table;
    }

    /** The kernels' rates in a step for {@code heads} query heads of {@code headDim}, {@code batch} sequences of {@code seq}. */
    public static Rates inStep(int headDim, int heads, int batch, long seq) {
        double[] alone = H200.alone(headDim, (double) heads * batch, seq);
        return new Rates(alone[0] * IN_STEP_FORWARD, alone[1] * IN_STEP_BACKWARD);
    }

    /** {forward, backward} FLOP/s of the kernels alone, interpolated (see the class comment). */
    double[] alone(int headDim, double heads, long seq) {
        Integer low = table.floorKey(headDim), high = table.ceilingKey(headDim);
        if (low == null) {
            return alone(table.get(high), heads, seq);
        }
        if (high == null || low.equals(high)) {
            return alone(table.get(low), heads, seq);
        }
        double f = (headDim - low) / (double) (high - low);
        return mix(alone(table.get(low), heads, seq), alone(table.get(high), heads, seq), f);
    }

    private static double[] alone(TreeMap<Integer, TreeMap<Integer, double[]>> byHeads, double heads, long seq) {
        double[] h = bracket(new TreeSet<>(byHeads.keySet()), heads);
        double[] atLow = alongSeq(byHeads.get((int) h[0]), seq), atHigh = alongSeq(byHeads.get((int) h[1]), seq);
        return mix(atLow, atHigh, h[2]);
    }

    private static double[] alongSeq(TreeMap<Integer, double[]> bySeq, long seq) {
        double[] t = bracket(new TreeSet<>(bySeq.keySet()), seq);
        return mix(bySeq.get((int) t[0]), bySeq.get((int) t[1]), t[2]);
    }

    /** The table's points around x and x's place between them in log scale: {low, high, fraction}; clamped at the edges. */
    private static double[] bracket(TreeSet<Integer> points, double x) {
        if (x <= points.first()) {
            return new double[] {points.first(), points.first(), 0};
        }
        if (x >= points.last()) {
            return new double[] {points.last(), points.last(), 0};
        }
        int low = points.floor((int) Math.floor(x)), high = points.ceiling((int) Math.ceil(x));
        double f = low == high ? 0 : Math.log(x / low) / Math.log((double) high / low);
        return new double[] {low, high, f};
    }

    private static double[] mix(double[] a, double[] b, double f) {
        return new double[] {a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f};
    }

    /** Reads the sweep's lines ({@code sweep HS NH NKV T fwd_ms dq_ms dkdv_ms fwd_tflops bwd_tflops}). */
    static AttentionRates load(String resource) {
        TreeMap<Integer, TreeMap<Integer, TreeMap<Integer, double[]>>> table = new TreeMap<>();
        try (InputStream in = AttentionRates.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException("the attention rate table " + resource + " is missing from the jar");
            }
            List<String> lines = new String(in.readAllBytes(), StandardCharsets.UTF_8).lines().toList();
            List<String> rows = new ArrayList<>();
            for (String l : lines) {
                if (l.startsWith("sweep ") && !l.startsWith("sweep HS")) {
                    rows.add(l);
                }
            }
            for (String row : rows) {
                String[] f = row.trim().split("\\s+");
                int hs = Integer.parseInt(f[1]), nh = Integer.parseInt(f[2]), t = Integer.parseInt(f[4]);
                double forward = Double.parseDouble(f[8]) * 1e12, backward = Double.parseDouble(f[9]) * 1e12;
                table.computeIfAbsent(hs, k -> new TreeMap<>()).computeIfAbsent(nh, k -> new TreeMap<>())
                        .put(t, new double[] {forward, backward});
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (table.isEmpty()) {
            throw new IllegalStateException("the attention rate table " + resource + " has no rows");
        }
        return new AttentionRates(table);
    }
}
