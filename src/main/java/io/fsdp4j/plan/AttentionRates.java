package io.fsdp4j.plan;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * How fast attention runs at a shape: measured, not modelled, one table per set of kernels, each a sweep over head
 * sizes 64 and 128, 4 to 64 query heads and a range of sequence lengths on one Hopper GPU (the same 132
 * multiprocessors and clocks in the H100 and the H200):
 *
 * <ul>
 *   <li>{@link #engines()} ({@code plan/attention-hopper-auto.txt}, {@code io.fsdp4j.gpu.AttentionRates --sweep},
 *       2026-11-27 on an H100, 512 to 16384 tokens): what training runs on Hopper (sm_90: the H200 and H100 presets) under
 *       {@code attention.kernel: auto} with cuDNN found, for each direction the faster of fsdp4j's kernels
 *       (attention_sm90.cu) and cuDNN's fused flash attention, as auto picks. Predictions use it.</li>
 *   <li>{@link #mmaSync()} ({@code plan/attention-h200.txt}, {@code tools/kernels/attention_bench.cu --sweep},
 *       2026-11-24 on an H200, 512 to 8192 tokens): fsdp4j's mma.sync kernels, which the calibration's reference steps of
 *       2026-11-23 ran ({@link ComputeModel.Calibration#fit} takes their attention out at these rates).</li>
 * </ul>
 *
 * The rates fall steeply with fewer heads and shorter sequences, where a grid of one block per tile of queries of a
 * head leaves the multiprocessors idle and the causal triangle's longest rows run alone at the end. A shape between
 * the table's points is read by interpolating the rates linearly in log(heads) and log(sequence), and linearly in head
 * size between 64 and 128; outside the table the nearest edge holds (not extrapolated). The batch multiplies the heads
 * (the grids' third dimension is the batch, so B sequences of H heads fill the GPU as B * H heads do). Inside a
 * training step the kernels run slower than alone ({@link #IN_STEP_FORWARD}, {@link #IN_STEP_BACKWARD}).
 *
 * <p>Documents packed into a sequence ({@link #forPackedDocuments}) run on fsdp4j's kernels whatever auto would pick
 * (cuDNN takes no packed documents): the engines' table's {@code fsdp4j_forward_ms} and {@code fsdp4j_backward_ms}
 * columns, at the documents' length, with as many sequences as there are documents.
 */
public final class AttentionRates {
    /**
     * In a step over alone, forward: Qwen2.5-0.5B's (the calibration's small reference; its profile in the third
     * session: 48 forwards in 3.32 ms, 108.7 TFLOP/s in the step against 112.9 alone). Qwen2.5-1.5B's step agrees (56
     * in 6.42 ms, 112.4 against 118.3: 0.95). Qwen2.5-7B's step runs at the card's power limit, where every kernel
     * slows (its attention at 0.80 of the rate alone): the calibration's slowdown, fitted to that step, carries it.
     * Measured on the mma.sync kernels and taken for both tables (no small model's step has been profiled on the
     * current engines; 7B's, at the power limit, ran them at 0.87 and 0.88 of the sweep's rates).
     */
    static final double IN_STEP_FORWARD = 108.7 / 112.9;

    /** In a step over alone, backward: 0.5B's 83.4 against 87.9 (1.5B's 90.5 against 96.5: 0.94). */
    static final double IN_STEP_BACKWARD = 83.4 / 87.9;

    /** Forward and backward FLOP/s of one shape, in a step. */
    public record Rates(double forward, double backward) {}

    private static final AttentionRates ENGINES = load("/plan/attention-hopper-auto.txt",
            "attention.kernel auto's engines, the faster of fsdp4j's and cuDNN's for each direction, as measured on one "
                    + "H200", "fsdp4j's kernels (cuDNN takes no packed documents), as measured on one H200");
    private static final AttentionRates MMA_SYNC = load("/plan/attention-h200.txt",
            "fsdp4j's mma.sync kernels, as measured on one H200");

    /** What the table's rates are of and where they were measured, in words (the plan's report says it). */
    private final String engines;

    /** head size -> heads -> sequence -> {forward, backward} FLOP/s alone */
    private final TreeMap<Integer, TreeMap<Integer, TreeMap<Integer, double[]>>> table;

    /** The rates of packed documents' attention: fsdp4j's kernels' columns of the same sweep, or this table. */
    private final AttentionRates packed;

    private AttentionRates(String engines, TreeMap<Integer, TreeMap<Integer, TreeMap<Integer, double[]>>> table,
                           AttentionRates packed) {
        this.engines = engines;
        this.table = table;
        this.packed = packed == null ? this : packed;
    }

    /** The engines training runs on Hopper under {@code attention.kernel: auto} (cuDNN found): what predictions use. */
    public static AttentionRates engines() {
        return ENGINES;
    }

    /** fsdp4j's mma.sync kernels of 2026-11-24: the rates the calibration's reference steps ran at. */
    public static AttentionRates mmaSync() {
        return MMA_SYNC;
    }

    /** What the rates are of, in words. */
    public String engineNames() {
        return engines;
    }

    /** The rates in a step for {@code heads} query heads of {@code headDim}, {@code batch} sequences of {@code seq}. */
    public Rates inStep(int headDim, int heads, int batch, long seq) {
        return inStep(headDim, heads, (double) batch, seq);
    }

    /** {@link #inStep(int, int, int, long)} for a number of sequences that need not be whole (documents a step). */
    public Rates inStep(int headDim, int heads, double sequences, long seq) {
        double[] alone = alone(headDim, heads * sequences, seq);
        return new Rates(alone[0] * IN_STEP_FORWARD, alone[1] * IN_STEP_BACKWARD);
    }

    /**
     * The table for documents packed into sequences: where this table's sweep timed fsdp4j's kernels beside the
     * engine it picked, those kernels' rates (cuDNN takes no packed documents); else this table.
     */
    public AttentionRates forPackedDocuments() {
        return packed;
    }

    /** The longest sequence the table measured (beyond it the rates at that length hold). */
    int longestMeasured() {
        int longest = 0;
        for (var byHeads : table.values()) {
            for (var bySeq : byHeads.values()) {
                longest = Math.max(longest, bySeq.lastKey());
            }
        }
        return longest;
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

    /** Reads a table from the jar ({@link #parse}). */
    static AttentionRates load(String resource, String engines) {
        return parse(read(resource), resource, engines);
    }

    /**
     * Reads an engines' table from the jar ({@link #parse}), with its fsdp4j columns as the packed documents' table
     * ({@link #parseFsdp4j}, named {@code packedEngines}).
     */
    static AttentionRates load(String resource, String engines, String packedEngines) {
        String text = read(resource);
        AttentionRates picked = parse(text, resource, engines);
        return new AttentionRates(picked.engines, picked.table, parseFsdp4j(text, resource, packedEngines));
    }

    private static String read(String resource) {
        try (InputStream in = AttentionRates.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new IllegalStateException("the attention rate table " + resource + " is missing from the jar");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A sweep line's {forward, backward} FLOP/s, found by the header's column names. */
    private interface LineRates {
        double[] of(List<String> header, List<String> fields, String source);
    }

    /**
     * Reads a sweep's lines: '#' comments, one header line naming the columns ({@code sweep HS NH NKV T ...
     * forward_tflops backward_tflops}), then a {@code sweep} line per shape; the columns are found by name, so the
     * mma.sync sweep ({@code forward_ms dq_ms dkdv_ms} before the rates) and the engines' sweep (each engine's times
     * and picks) read alike.
     */
    static AttentionRates parse(String text, String source, String engines) {
        return parse(text, source, engines, (header, f, src) -> new double[] {
                Double.parseDouble(f.get(column(header, "forward_tflops", src))) * 1e12,
                Double.parseDouble(f.get(column(header, "backward_tflops", src))) * 1e12});
    }

    /**
     * An engines' sweep's fsdp4j kernels alone: their rates from the {@code fsdp4j_forward_ms} and
     * {@code fsdp4j_backward_ms} columns, as the sweep counts its FLOPs (forward 4 NH HS T (T+1) / 2, the backward
     * 2.5 times that).
     */
    static AttentionRates parseFsdp4j(String text, String source, String engines) {
        return parse(text, source, engines, (header, f, src) -> {
            double hs = Double.parseDouble(f.get(column(header, "HS", src)));
            double nh = Double.parseDouble(f.get(column(header, "NH", src)));
            double t = Double.parseDouble(f.get(column(header, "T", src)));
            double flops = 4.0 * nh * hs * t * (t + 1) / 2;
            return new double[] {flops / (Double.parseDouble(f.get(column(header, "fsdp4j_forward_ms", src))) / 1e3),
                    2.5 * flops / (Double.parseDouble(f.get(column(header, "fsdp4j_backward_ms", src))) / 1e3)};
        });
    }

    private static AttentionRates parse(String text, String source, String engines, LineRates rates) {
        TreeMap<Integer, TreeMap<Integer, TreeMap<Integer, double[]>>> table = new TreeMap<>();
        List<String> header = null;
        int lineNumber = 0;
        for (String line : text.lines().toList()) {
            lineNumber++;
            if (!line.startsWith("sweep ")) {
                continue;
            }
            List<String> f = Arrays.asList(line.trim().split("\\s+"));
            if (f.get(1).equals("HS")) {
                header = f;
                continue;
            }
            if (header == null) {
                throw new IllegalStateException(source + ":" + lineNumber + ": a sweep line before the column header");
            }
            try {
                int hs = Integer.parseInt(f.get(column(header, "HS", source))),
                        nh = Integer.parseInt(f.get(column(header, "NH", source))),
                        t = Integer.parseInt(f.get(column(header, "T", source)));
                double[] r = rates.of(header, f, source);
                double forward = r[0], backward = r[1];
                if (!(forward > 0 && backward > 0) || Double.isInfinite(forward) || Double.isInfinite(backward)) {
                    throw new NumberFormatException("a rate that is not positive");
                }
                table.computeIfAbsent(hs, k -> new TreeMap<>()).computeIfAbsent(nh, k -> new TreeMap<>())
                        .put(t, new double[] {forward, backward});
            } catch (NumberFormatException | IndexOutOfBoundsException e) {
                throw new IllegalStateException(source + ":" + lineNumber + ": not a sweep line of "
                        + String.join(" ", header) + ": " + line);
            }
        }
        if (table.isEmpty()) {
            throw new IllegalStateException("the attention rate table " + source + " has no rows");
        }
        return new AttentionRates(engines, table, null);
    }

    private static int column(List<String> header, String name, String source) {
        int i = header.indexOf(name);
        if (i < 0) {
            throw new IllegalStateException(source + ": the column header has no " + name + ": "
                    + String.join(" ", header));
        }
        return i;
    }
}
