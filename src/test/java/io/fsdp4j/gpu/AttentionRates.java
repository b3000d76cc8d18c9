package io.fsdp4j.gpu;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.config.AttentionKernel;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.Cudnn;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.io.PrintStream;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * Attention's rates on this GPU, engine by engine ({@code attention.kernel}: fsdp4j's kernels and cuDNN's), through
 * {@link CudaBackend} as training calls it: forward and backward timed apart with events, B=1, causal, bf16. TFLOP/s
 * by fsdp4j's convention (docs/plan.md, tools/peers/attention_rates.py): causal forward 4 * NH * HS * (T + 1) / 2 per
 * token, backward 2.5x. A developer tool, run on the GPU machine ({@code bash tools/gpu/run.sh test-main
 * io.fsdp4j.gpu.AttentionRates ARGS}, or with the test classpath {@code java --enable-native-access=ALL-UNNAMED -cp
 * target/classes:target/test-classes:DEPS io.fsdp4j.gpu.AttentionRates ARGS}), in two modes:
 *
 * <ul>
 *   <li>{@code [T ...]}: the heads of the Qwen2.5 presets, Llama-3-8B and Mistral-7B (its window of 4096 tokens; its
 *       TFLOP/s count the pairs within the window) at the sequence lengths given (default 2048 4096 8192 16384), a
 *       readable table ({@code bash tools/gpu/session.sh attention} runs it beside PyTorch's rates).</li>
 *   <li>{@code --sweep [--head-sizes 64,128] [--heads 4,8,...] [--seq 512,...]}: the plan's grid (by default head sizes
 *       64 and 128, 4 to 64 query heads, 512 to 16384 tokens), written as the plan's attention table
 *       ({@code src/main/resources/plan/attention-hopper-auto.txt}, read by {@code io.fsdp4j.plan.AttentionRates}):
 *       each engine's forward and backward time, the engine {@code attention.kernel: auto} would pick for each
 *       direction (the faster), and that engine's rates. The kernels alone: each timed run is queued behind a few
 *       memsets of a scratch buffer so the host's launch path is not what is timed (a line ends in {@code host}
 *       when launching the calls took longer than the memsets covered).</li>
 * </ul>
 *
 * <p>In both modes each figure is the median of three rounds in which the engines take turns, each round about 20 ms
 * of calls a direction (at most 50 calls).
 */
public final class AttentionRates {
    private AttentionRates() {}

    /** A model's attention: its heads and head size, and its sliding window (0: none). */
    private record Heads(String model, int heads, int kvHeads, int headDim, int window) {
        Heads(String model, int heads, int kvHeads, int headDim) {
            this(model, heads, kvHeads, headDim, 0);
        }

        /** One sequence of {@code t} tokens over these heads. */
        AttentionShape shape(int t) {
            return new AttentionShape(1, t, heads, kvHeads, headDim, window);
        }
    }

    /** The scratch buffer whose memsets each run of timed calls is queued behind ({@link #timeQueued}). */
    private static final long BLOCKER_BYTES = 1L << 30;

    /** The plan's grid: head sizes, query heads (key-value heads: 2 up to 16, 4 above) and sequence lengths. */
    record Grid(List<Integer> headSizes, List<Integer> heads, List<Integer> lengths) {
        static final Grid PLAN = new Grid(List.of(64, 128), List.of(4, 8, 12, 14, 16, 24, 28, 32, 40, 64),
                List.of(512, 1024, 2048, 4096, 8192, 16384));

        /** Key-value heads of {@code heads} query heads, as the first table (attention_bench.cu's sweep) had them. */
        static int kvHeads(int heads) {
            return heads <= 16 ? 2 : 4;
        }
    }

    /** One shape's times, ms a call (NaN where an engine did not run), and whether the host held any back. */
    record Timed(int headDim, int heads, int kvHeads, int seq, double fsdp4jForward, double fsdp4jBackward,
                 double cudnnForward, double cudnnBackward, boolean hostBound) {

        /** Causal forward FLOPs (B = 1). */
        double forwardFlops() {
            return 4.0 * heads * headDim * (double) seq * (seq + 1) / 2;
        }

        /** auto's pick for a direction: cuDNN only where it ran and is faster, as {@code CudaAttention.pick}. */
        static String pick(double fsdp4jMs, double cudnnMs) {
            return cudnnMs < fsdp4jMs ? "cudnn" : "fsdp4j";
        }

        /** The table's line: {@link #HEADER}'s columns. */
        String line() {
            String forward = pick(fsdp4jForward, cudnnForward), backward = pick(fsdp4jBackward, cudnnBackward);
            double forwardMs = forward.equals("cudnn") ? cudnnForward : fsdp4jForward;
            double backwardMs = backward.equals("cudnn") ? cudnnBackward : fsdp4jBackward;
            return String.format(Locale.ROOT, "sweep %d %d %d %d %s %s %s %s %s %s %.1f %.1f%s", headDim, heads,
                    kvHeads, seq, ms(fsdp4jForward), ms(fsdp4jBackward), ms(cudnnForward), ms(cudnnBackward),
                    forward, backward, forwardFlops() / forwardMs / 1e9, 2.5 * forwardFlops() / backwardMs / 1e9,
                    hostBound ? " host" : "");
        }

        private static String ms(double ms) {
            return Double.isNaN(ms) ? "-" : String.format(Locale.ROOT, "%.4f", ms);
        }
    }

    /** The column names of the sweep's lines (the plan's loader finds its columns by these names). */
    static final String HEADER = "sweep HS NH NKV T fsdp4j_forward_ms fsdp4j_backward_ms cudnn_forward_ms "
            + "cudnn_backward_ms forward_engine backward_engine forward_tflops backward_tflops";

    public static void main(String[] args) {
        try {
            if (args.length > 0 && args[0].equals("--sweep")) {
                Grid grid = parseSweep(Arrays.asList(args).subList(1, args.length));
                try (CudaBackend gpu = new CudaBackend(0)) {
                    sweep(gpu, grid, System.out);
                }
                return;
            }
            presets(parseLengths(Arrays.asList(args)));
        } catch (IllegalArgumentException e) {
            System.err.println("error: io.fsdp4j.gpu.AttentionRates: " + e.getMessage());
            System.exit(2);
        }
    }

    /** {@code [--head-sizes L] [--heads L] [--seq L]} (L: comma-separated positive integers) over the plan's grid. */
    static Grid parseSweep(List<String> args) {
        List<Integer> headSizes = Grid.PLAN.headSizes(), heads = Grid.PLAN.heads(), lengths = Grid.PLAN.lengths();
        for (int i = 0; i < args.size(); i += 2) {
            String option = args.get(i);
            if (i + 1 >= args.size()) {
                throw new IllegalArgumentException(option + " needs a value (comma-separated integers)");
            }
            List<Integer> values = integers(option, args.get(i + 1));
            switch (option) {
                case "--head-sizes" -> {
                    for (int hs : values) {
                        if (hs != 64 && hs != 128) {
                            throw new IllegalArgumentException("--head-sizes takes 64 and 128 (the sizes both "
                                    + "engines' fast kernels cover), not " + hs);
                        }
                    }
                    headSizes = values;
                }
                case "--heads" -> {
                    for (int h : values) {
                        if (h % Grid.kvHeads(h) != 0) {
                            throw new IllegalArgumentException("--heads: " + h + " query heads do not group over "
                                    + Grid.kvHeads(h) + " key-value heads");
                        }
                    }
                    heads = values;
                }
                case "--seq" -> lengths = values;
                default -> throw new IllegalArgumentException("unknown option '" + option
                        + "' (--sweep takes --head-sizes, --heads, --seq)");
            }
        }
        return new Grid(headSizes, heads, lengths);
    }

    static List<Integer> parseLengths(List<String> args) {
        List<Integer> lengths = new ArrayList<>();
        for (String a : args) {
            lengths.addAll(integers("a sequence length", a));
        }
        return lengths.isEmpty() ? List.of(2048, 4096, 8192, 16384) : lengths;
    }

    private static List<Integer> integers(String what, String text) {
        List<Integer> values = new ArrayList<>();
        for (String part : text.split(",")) {
            int v;
            try {
                v = Integer.parseInt(part.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(what + ": '" + part + "' is not an integer");
            }
            if (v < 1) {
                throw new IllegalArgumentException(what + ": " + v + " is not positive");
            }
            values.add(v);
        }
        return values;
    }

    /** The comment lines and column header that open a sweep's table. */
    static List<String> preamble(String device, String cudnn, boolean hopper, Grid grid) {
        return List.of(
                "# attention.kernel's engines timed alone through CudaBackend on one " + device + " (" + cudnn + "), "
                        + LocalDate.now(ZoneOffset.UTC) + ": causal, batch 1, bf16, random inputs;",
                "# fsdp4j's kernels ("
                        + (hopper ? "Hopper's forward, dk/dv and dq, attention_sm90.cu"
                        : "attention_tc.cu") + ") and cuDNN's fused flash attention.",
                "# Made by io.fsdp4j.gpu.AttentionRates --sweep --head-sizes " + join(grid.headSizes()) + " --heads "
                        + join(grid.heads()) + " --seq " + join(grid.lengths())
                        + "; read by io.fsdp4j.plan.AttentionRates.",
                "# Columns: head size, query heads, key-value heads, sequence length, each engine's forward and",
                "# backward ms a call, the engine attention.kernel: auto picks for each direction (the faster), and",
                "# its forward and backward TFLOP/s (forward 4 NH HS T (T+1)/2, backward 2.5 times that). 'host': the",
                "# host held the line's timed calls back (launching them took longer than the memsets before them).",
                "# Each time: the median of three rounds in which the engines take turns, about 20 ms of calls each",
                "# (50 calls at most).",
                HEADER);
    }

    private static String join(List<Integer> values) {
        return String.join(",", values.stream().map(String::valueOf).toList());
    }

    /** Times every shape of {@code grid} on both engines and prints the table, a line as each shape is done. */
    static void sweep(CudaBackend gpu, Grid grid, PrintStream out) {
        var props = Cuda.properties(0);
        String cudnn = Cudnn.found() ? "cuDNN " + Cudnn.versionString(Cudnn.version()) : "cuDNN not found";
        for (String line : preamble(props.name() + " (" + props.arch() + ")", cudnn, gpu.hopperAttention(), grid)) {
            out.println(line);
        }
        out.flush();
        int maxT = grid.lengths().stream().mapToInt(Integer::intValue).max().orElseThrow();
        int maxWidth = 0, maxOutWidth = 0, maxHeads = 0;
        for (int hs : grid.headSizes()) {
            for (int h : grid.heads()) {
                maxWidth = Math.max(maxWidth, (h + 2 * Grid.kvHeads(h)) * hs);
                maxOutWidth = Math.max(maxOutWidth, h * hs);
                maxHeads = Math.max(maxHeads, h);
            }
        }
        long blocker = Cuda.malloc(BLOCKER_BYTES);
        try (var scope = gpu.newScope(); var entered = scope.enter()) {
            // one buffer of each kind at the largest shape, seen at each shape's size (their values: random, once)
            Tensor qkvAll = randomBf16(gpu, maxT, maxWidth);
            Tensor outAll = gpu.allocate(DType.BF16, maxT, maxOutWidth);
            Tensor lseAll = gpu.allocate(DType.F32, maxHeads, maxT);
            Tensor dQkvAll = gpu.allocate(DType.BF16, maxT, maxWidth);
            for (int hs : grid.headSizes()) {
                for (int h : grid.heads()) {
                    for (int t : grid.lengths()) {
                        var s = new AttentionShape(1, t, h, Grid.kvHeads(h), hs, 0);
                        Tensor qkv = qkvAll.view(0, t, s.qkvWidth()), o = outAll.view(0, t, h * hs);
                        Tensor lse = lseAll.view(0, 1, h, t), dQkv = dQkvAll.view(0, t, s.qkvWidth());
                        double[][] both = timeRounds(gpu, s, qkv, o, lse, dQkv, blocker);
                        double[] ours = both[0], theirs = both[1];
                        out.println(new Timed(hs, h, s.kvHeads(), t, ours[0], ours[1], theirs[0], theirs[1],
                                ours[2] > 0 || theirs[2] > 0).line());
                        out.flush();
                    }
                }
            }
        } finally {
            gpu.synchronize();
            Cuda.free(blocker);
        }
    }

    /** A bf16 tensor of uniform values in [-1, 1), uploaded a slice at a time. */
    private static Tensor randomBf16(CudaBackend gpu, int rows, int width) {
        Tensor t = gpu.allocate(DType.BF16, rows, width);
        var random = new java.util.SplittableRandom(1);
        int sliceRows = Math.max(1, (1 << 24) / width);
        for (int r = 0; r < rows; r += sliceRows) {
            int n = Math.min(sliceRows, rows - r);
            float[] values = new float[n * width];
            for (int i = 0; i < values.length; i++) {
                values[i] = (float) (random.nextDouble() * 2 - 1);
            }
            try (var scope = gpu.newScope(); var entered = scope.enter()) {
                gpu.copy(gpu.upload(values, n, width), t.view((long) r * width, n, width));
            }
        }
        return t;
    }

    /** Rounds of timings, the engines taking turns, of which each figure is the median. */
    private static final int ROUNDS = 3;

    /**
     * fsdp4j's and cuDNN's {forward ms, backward ms, 1 if the host held a timed run back else 0} of {@code s}
     * ({NaN, NaN, 0} for cuDNN where it is not found): {@value #ROUNDS} rounds in which the engines take turns, each figure the
     * median of its rounds, so that a change of the GPU's clocks during the table moves both engines' figures alike
     * (one run of 3 calls each had put Llama-3-8B's backward at 16384 tokens 5% off the kernel harness's, 2026-11-27).
     */
    private static double[][] timeRounds(CudaBackend gpu, AttentionShape s, Tensor qkv, Tensor out, Tensor lse,
                                         Tensor dQkv, long blocker) {
        List<AttentionKernel> engines = Cudnn.found() ? List.of(AttentionKernel.FSDP4J, AttentionKernel.CUDNN)
                : List.of(AttentionKernel.FSDP4J);
        double[][][] rounds = new double[2][ROUNDS][];
        for (int r = 0; r < ROUNDS; r++) {
            for (int e = 0; e < engines.size(); e++) {
                rounds[e][r] = timeQueued(gpu, s, engines.get(e), qkv, out, lse, dQkv, blocker);
            }
        }
        double[][] medians = {{Double.NaN, Double.NaN, 0}, {Double.NaN, Double.NaN, 0}};
        for (int e = 0; e < engines.size(); e++) {
            for (int k = 0; k < 2; k++) {
                int direction = k;
                medians[e][k] = java.util.Arrays.stream(rounds[e]).mapToDouble(m -> m[direction]).sorted()
                        .toArray()[ROUNDS / 2];
            }
            for (double[] m : rounds[e]) {
                medians[e][2] = Math.max(medians[e][2], m[2]);
            }
        }
        return medians;
    }

    /**
     * {forward ms, backward ms, 1 if the host held a timed run back else 0} of {@code s} on {@code engine}: one call of
     * each to warm up (cuDNN builds its plans, the kernels compile), then each direction's calls queued behind memsets
     * ({@link GpuTests#millisPerCallQueued}), as {@link #repsFor} says.
     */
    private static double[] timeQueued(CudaBackend gpu, AttentionShape s, AttentionKernel engine, Tensor qkv, Tensor out,
                                       Tensor lse, Tensor dQkv, long blocker) {
        gpu.attention().use(engine);
        Runnable forward = () -> gpu.attentionForward(out, lse, qkv, null, s);
        Runnable backward = () -> gpu.attentionBackward(dQkv, out, qkv, out, lse, null, s);
        double forwardOnce = GpuTests.millisPerCall(gpu, 1, forward);
        double backwardOnce = GpuTests.millisPerCall(gpu, 1, backward);
        var f = GpuTests.millisPerCallQueued(gpu, repsFor(forwardOnce), forward, blocker, BLOCKER_BYTES);
        var b = GpuTests.millisPerCallQueued(gpu, repsFor(backwardOnce), backward, blocker, BLOCKER_BYTES);
        return new double[] {f.ms(), b.ms(), f.hostBound() || b.hostBound() ? 1 : 0};
    }

    /**
     * Calls that take about 20 ms at {@code onceMs} a call, 3 to 50: more calls of the shortest shapes took the host
     * longer to launch than the memsets before them cover (200 held back 47 of the plan's 120 lines, 2026-11-27).
     */
    static int repsFor(double onceMs) {
        return (int) Math.max(3, Math.min(50, Math.ceil(20 / Math.max(onceMs, 1e-3))));
    }

    /**
     * The (query, key) pairs causal attention over t tokens computes, each query with the keys up to itself, within
     * the last {@code window} of them (0: all): t (t + 1) / 2 without a window.
     */
    static double pairs(int t, int window) {
        if (window <= 0 || window >= t) {
            return (double) t * (t + 1) / 2;
        }
        return (double) window * (window + 1) / 2 + (double) (t - window) * window;
    }

    /** The presets' table (the first mode). */
    private static void presets(List<Integer> lengths) {
        // Llama-3-8B and Mistral-7B have the same heads; Mistral's preset (v0.1) attends within a window of 4096
        List<Heads> presets = List.of(new Heads("qwen2.5-7b", 28, 4, 128), new Heads("qwen2.5-1.5b", 12, 2, 128),
                new Heads("qwen2.5-0.5b", 14, 2, 64), new Heads("llama-3-8b", 32, 8, 128),
                new Heads("mistral-7b", 32, 8, 128, 4096));
        try (CudaBackend gpu = new CudaBackend(0)) {
            long blocker = Cuda.malloc(BLOCKER_BYTES);
            try {
                System.out.printf(Locale.ROOT, "%s, cuDNN %s%n", Cuda.properties(0).name(),
                        Cudnn.found() ? Cudnn.versionString(Cudnn.version()) : "not found");
                System.out.printf(Locale.ROOT, "%-13s %6s  %-7s %10s %10s %9s %9s%n", "model", "T", "engine", "fwd ms",
                        "bwd ms", "fwd TF/s", "bwd TF/s");
                // the device raises its clocks over the first calls: the first shape's timings, on every engine, thrown
                // away (they made the table's first line 2-5x slow in every call before, 2026-11-27)
                time(gpu, presets.getFirst().shape(lengths.getFirst()), blocker);
                for (Heads h : presets) {
                    for (int t : lengths) {
                        var s = h.shape(t);
                        double[][] both = time(gpu, s, blocker);
                        for (AttentionKernel engine : List.of(AttentionKernel.FSDP4J, AttentionKernel.CUDNN)) {
                            if (engine == AttentionKernel.CUDNN && !Cudnn.found()) {
                                continue;
                            }
                            double[] ms = both[engine == AttentionKernel.FSDP4J ? 0 : 1];
                            double flops = 4.0 * h.heads() * h.headDim() * pairs(t, h.window());
                            System.out.printf(Locale.ROOT, "%-13s %6d  %-7s %10.3f %10.3f %9.0f %9.0f%s%n",
                                    h.model(), t, engine, ms[0], ms[1], flops / ms[0] / 1e9,
                                    2.5 * flops / ms[1] / 1e9, ms[2] > 0 ? "  host" : "");
                        }
                    }
                }
            } finally {
                gpu.synchronize();
                Cuda.free(blocker);
            }
        }
    }

    /** {@link #timeRounds} of {@code s} on buffers of its own. */
    private static double[][] time(CudaBackend gpu, AttentionShape s, long blocker) {
        int n = s.batch() * s.seqLen(), ow = s.heads() * s.headDim();
        try (var scope = gpu.newScope(); var entered = scope.enter()) {
            Tensor qkv = randomBf16(gpu, n, s.qkvWidth());
            Tensor out = gpu.allocate(DType.BF16, n, ow), lse = gpu.allocate(DType.F32, 1, s.heads(), s.seqLen());
            Tensor dQkv = gpu.allocate(DType.BF16, n, s.qkvWidth());
            return timeRounds(gpu, s, qkv, out, lse, dQkv, blocker);
        }
    }
}
