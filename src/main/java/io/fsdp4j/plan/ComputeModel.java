package io.fsdp4j.plan;

import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.model.ModelConfig;

/**
 * How long each stage of a step computes on one GPU. Each stage's work is counted at the GPU's ceilings, matrix
 * products at {@link GpuSpec#gemmFlops} and memory traffic at {@link GpuSpec#hbmBytesPerSecond}; the result is then
 * scaled by a calibrated slowdown; attention is timed at its engines' measured rates for the model's head size and
 * heads, the batch and the sequence ({@link AttentionRates}, the calibration's table: by default what
 * {@code attention.kernel: auto} runs on Hopper); and every block pays a fixed time per step
 * (its kernels' launch latencies and tails, small kernels that cannot fill the GPU, the compute stream waiting for
 * the host):
 *
 * <pre>
 *   stage time = slowdown * (FLOPs / gemmFlops + bytes / hbmBytesPerSecond) + attention FLOPs / attention rate
 *                + its share of perBlockSeconds
 * </pre>
 *
 * FLOPs: 2 per matrix parameter per token forward, 4 backward (6N per token, less the embedding lookup, which is
 * free), another 2 under full checkpointing (the recomputed forward), none under selective (its recomputed norms
 * and MLP activation are memory traffic only); causal attention 4 * NH * HS * (keys per
 * query) per token forward (again in full checkpointing's recompute, unless it keeps attention), 2.5 times that
 * backward (flash attention's backward recomputes the scores).
 * Bytes, as the engine does the work: the activations each stage writes and reads (written whole, not zeroed
 * first), rounding the fp32 master shard to bf16 for each gather (on a shard group of one rank that rounded shard is
 * the unit; with {@code fsdp.param_copy: kept} the kept copy is sent as it is, and a frozen base is held in the
 * parameter dtype: no rounding); a block's backward writes its gradients into the fp32 accumulator (on a shard group
 * of one rank, the gradient shard itself) without zeroing it first (fp32 write: one micro-batch a step),
 * the embeddings and head, which may share a table, zero theirs and add (fp32 read and write); an fp32 reduction writes
 * into the zeroed gradient shard in place (no traffic), a bf16 one rounds and adds; after backward the gradient
 * norm and AdamW with the clipping factor folded in (4 + 28 bytes per trained shard element, 2 more where AdamW
 * writes the kept copy too). In fp8 ({@code fsdp.param_dtype: fp8}) the blocks' linear products run at
 * {@link GpuSpec#fp8GemmFlops} and their operands' casts are memory traffic: each cast reads its tensor for the amax
 * and again to write it in fp8, row-major and, where a product takes it, transposed (1 byte an element each); a
 * weight's amax is not read where AdamW's pass over the kept copy found it (one rank's shard the unit).
 */
public final class ComputeModel {
    /** Bytes per shard element of the gradient norm (the gradient read). */
    static final double NORM_BYTES = 4;
    /** Bytes per shard element of AdamW: master, two moments read and written, the gradient read. */
    static final double ADAMW_BYTES = 28;
    /**
     * Bytes per shard element AdamW writes more with {@code fsdp.param_copy: kept}: the master's copy in the parameter
     * dtype, in the same pass ({@code adamw_f32_segments_bf16}).
     */
    static final double KEPT_COPY_BYTES = 2;
    /** Bytes per shard element of rounding the fp32 master shard for a gather: 4 read, 2 written. */
    static final double ROUNDING_BYTES = 6;

    private ComputeModel() {}

    /**
     * The constants taken from measured steps: stage times are {@code slowdown} times their time at the ceilings,
     * plus {@code perBlockSeconds} per block per step (a quarter in forward, the rest in backward); offloaded
     * ({@code fsdp.cpu_offload}), the host's optimizer pass moves {@code hostBytesPerSecond}; attention runs at
     * {@code attention}'s rates (the engines training runs now, {@link AttentionRates#engines()}, unless a what-was
     * replays the kernels of an older step).
     */
    public record Calibration(double slowdown, double perBlockSeconds, double hostBytesPerSecond,
                              AttentionRates attention) {

        /** Attention at the current engines' rates. */
        public Calibration(double slowdown, double perBlockSeconds, double hostBytesPerSecond) {
            this(slowdown, perBlockSeconds, hostBytesPerSecond, AttentionRates.engines());
        }

        /** Without a host rate: offloaded steps are timed without their host optimizer (what {@link #fit} needs). */
        public Calibration(double slowdown, double perBlockSeconds) {
            this(slowdown, perBlockSeconds, Double.POSITIVE_INFINITY);
        }

        /** The same constants with attention at {@code rates} (a step of other kernels: the references' own). */
        public Calibration withAttention(AttentionRates rates) {
            return new Calibration(slowdown, perBlockSeconds, hostBytesPerSecond, rates);
        }

        /**
         * From fsdp4j's 1-GPU steps on an H200 of 2026-11-23 ({@link #REFERENCE_7B}, {@link #REFERENCE_0_5B}): the
         * slowdown and the fixed time per block that give both measured steps with their attention at the rates it
         * ran at then (the mma.sync kernels). The host rate: what is left of the offloaded step on one H100
         * ({@link #REFERENCE_OFFLOAD}) once its device part is timed with those two. Predictions then time attention
         * at the engines training runs now ({@link AttentionRates#engines()}).
         */
        public static Calibration h200() {
            return withHostRate(fit(REFERENCE_7B, REFERENCE_0_5B), REFERENCE_OFFLOAD);
        }

        /**
         * Solves {@code slowdown * ideal + attention + perBlock * blocks = measured step} for two measured steps
         * (ideal: the matrix products and memory traffic at the ceilings; attention at its kernels' rates): a large model,
         * whose step is mostly work at the ceilings, and a small one, whose many short kernels make the fixed time
         * per block (launch latencies, kernels too small to fill the GPU, the host's pace) a large part of it.
         */
        public static Calibration fit(Reference large, Reference small) {
            GpuSpec gpu = GpuSpec.h200();
            double i1 = idealStepSeconds(large.model(), large.workload(), gpu), b1 = large.model().blocks();
            double i2 = idealStepSeconds(small.model(), small.workload(), gpu), b2 = small.model().blocks();
            // what is left of each step once its attention is timed at the rates of the kernels it ran
            double t1 = large.stepSeconds()
                    - attentionStepSeconds(large.model(), large.workload(), gpu, large.attention());
            double t2 = small.stepSeconds()
                    - attentionStepSeconds(small.model(), small.workload(), gpu, small.attention());
            double det = i1 * b2 - i2 * b1;
            double slowdown = (t1 * b2 - t2 * b1) / det;
            double perBlock = (i1 * t2 - i2 * t1) / det;
            if (!(slowdown > 0 && perBlock >= 0)) {
                throw new IllegalStateException("the reference steps give no positive calibration: " + slowdown
                        + " x ideal + " + perBlock + " s per block");
            }
            return new Calibration(slowdown, perBlock);
        }

        /** The host rate that makes the offloaded reference's predicted step its measured one. */
        public static Calibration withHostRate(Calibration device, OffloadReference r) {
            Cluster one = Cluster.of(r.gpu(), 1, 1, 0, 1);
            var deviceOnly = Planner.predict(r.model(), one, r.workload(), ShardingStrategy.FULL_SHARD,
                    new Planner.Options(new Calibration(device.slowdown(), device.perBlockSeconds())
                            .withAttention(r.attention()), false));
            double hostSeconds = r.stepSeconds() - deviceOnly.time().stepSeconds();
            if (hostSeconds <= 0) {
                throw new IllegalStateException("the offloaded reference step is shorter than its device part");
            }
            return new Calibration(device.slowdown(), device.perBlockSeconds(),
                    HOST_OPTIMIZER_BYTES * shardElements(r.model(), 1) / hostSeconds, device.attention());
        }
    }

    /** An offloaded step measured on one GPU, its attention on the kernels whose rates {@code attention} has. */
    public record OffloadReference(ModelShape model, Workload workload, GpuSpec gpu, double stepSeconds,
                                   AttentionRates attention) {}

    /**
     * qwen2.5-7b-20l (Qwen2.5-7B's shapes, 20 blocks) with {@code fsdp.cpu_offload} on one H100, the benchmark's
     * workload: 657 tokens/s, 3.119 s a step (docs/benchmarks.md, 2026-11-23, second call; the mma.sync kernels).
     */
    public static final OffloadReference REFERENCE_OFFLOAD = new OffloadReference(
            ModelShape.of(ModelConfig.qwen25_7b_20layers()), Workload.benchmark().withCpuOffload(true), GpuSpec.h100(),
            3.1189700, AttentionRates.mmaSync());

    /**
     * Host-device copies of offloaded shards: PCIe 5.0 x16 moves 64 GB/s each way; page-locked copies reach about
     * 50 (an assumption: not measured on this machine).
     */
    public static final double PCIE_BYTES_PER_SECOND = 50e9;

    /**
     * Bytes per shard element of the host's optimizer pass when offloaded: the norm (4), the clipping scale (read
     * and write, 8) and AdamW (28).
     */
    static final double HOST_OPTIMIZER_BYTES = 4 + 8 + 28;

    /** Elements of the shards the optimizer updates: every unit's, or under LoRA the adapters'. */
    static double shardElements(ModelShape m, int groupSize) {
        double elements = 0;
        for (int u = 0; u <= m.headUnit(); u++) {
            elements += m.trainableShardNumel(u, groupSize);
        }
        return elements;
    }

    /** A measured step of one model on one H200, its attention on the kernels whose rates {@code attention} has. */
    public record Reference(ModelShape model, Workload workload, double stepSeconds, AttentionRates attention) {}

    /**
     * Qwen2.5-7B on one H200, FULL_SHARD on one rank, the benchmark's workload (docs/benchmarks.md, 2026-11-23,
     * third session, ninth call): 6,792 tokens/s, 0.3015 s a step, attention on fsdp4j's mma.sync kernels; that run's
     * profile timed AdamW at 53.1 ms.
     */
    public static final Reference REFERENCE_7B = new Reference(
            ModelShape.of(ModelConfig.qwen25_7b()), Workload.benchmark(), 0.3015214, AttentionRates.mmaSync());

    /**
     * Qwen2.5-0.5B on one H200, the same settings, in the same device call as {@link #REFERENCE_7B}: 59,804
     * tokens/s, 0.03425 s a step.
     */
    public static final Reference REFERENCE_0_5B = new Reference(
            ModelShape.of(ModelConfig.qwen25_0_5b()), Workload.benchmark(), 0.0342451, AttentionRates.mmaSync());

    /**
     * AdamW's time over this rank's shards on the device: the optimizer's part of the step's tail, as the model times
     * it (with {@code fsdp.param_copy: kept} it writes the kept copies too).
     */
    public static double adamwSeconds(ModelShape m, Workload w, Sharding s, GpuSpec gpu, Calibration cal) {
        return cal.slowdown() * adamwBytes(w) * shardElements(m, s.shardSize()) / gpu.hbmBytesPerSecond();
    }

    /** AdamW's bytes per trained shard element on the device. */
    static double adamwBytes(Workload w) {
        return ADAMW_BYTES + (w.keptCopy() ? KEPT_COPY_BYTES : 0);
    }

    /**
     * Compute seconds of each stage of a step. Index u is the unit: {@code forward[0]} the embedding lookup,
     * {@code forward[1..L]} the blocks, {@code forward[L+1]} the head (loss and its backward in one stage);
     * {@code backward[1..L]} the blocks (with their recomputed forward), {@code backward[0]} the embedding's.
     *
     * @param tail after backward: zeroing, norm, clipping and the optimizer over this rank's shards
     */
    public record StageTimes(double[] forward, double[] backward, double tail) {
        /** Every stage's time times {@code factor}. */
        public StageTimes scaled(double factor) {
            if (factor == 1) {
                return this;
            }
            double[] f = forward.clone(), b = backward.clone();
            for (int u = 0; u < f.length; u++) {
                f[u] *= factor;
                b[u] *= factor;
            }
            return new StageTimes(f, b, tail * factor);
        }

        public double total() {
            double t = tail;
            for (int u = 0; u < forward.length; u++) {
                t += forward[u] + backward[u];
            }
            return t;
        }
    }

    public static StageTimes stageTimes(ModelShape m, Workload w, Sharding s, GpuSpec gpu, Calibration cal) {
        Work work = new Work(m, w, s);
        int units = m.headUnit() + 1;
        double[] forward = new double[units], backward = new double[units];
        AttentionRates.Rates attention = attentionRates(m, w, cal.attention());
        for (int u = 0; u < units; u++) {
            boolean block = u >= 1 && u <= m.blocks();
            forward[u] = work.forward(u).seconds(gpu, cal.slowdown(), attention) + (block ? cal.perBlockSeconds() / 4 : 0);
            backward[u] = work.backward(u).seconds(gpu, cal.slowdown(), attention)
                    + (block ? cal.perBlockSeconds() * 3 / 4 : 0);
        }
        double tail = w.cpuOffload() // on the host, after the step's copies back
                ? HOST_OPTIMIZER_BYTES * shardElements(m, s.shardSize()) / cal.hostBytesPerSecond()
                : cal.slowdown() * work.tail().seconds(gpu);
        return new StageTimes(forward, backward, tail);
    }

    /** A step's matrix products and memory traffic at the ceilings, without calibration: what the slowdown scales. */
    static double idealStepSeconds(ModelShape m, Workload w, GpuSpec gpu) {
        Calibration ideal = new Calibration(1, 0);
        return stepSeconds(m, w, gpu, ideal) - attentionStepSeconds(m, w, gpu, ideal.attention());
    }

    /** A step's attention at {@code rates} (what the calibration leaves as measured). */
    static double attentionStepSeconds(ModelShape m, Workload w, GpuSpec gpu, AttentionRates rates) {
        return stepSeconds(m, w, gpu, new Calibration(0, 0).withAttention(rates));
    }

    private static double stepSeconds(ModelShape m, Workload w, GpuSpec gpu, Calibration cal) {
        return stageTimes(m, w, Sharding.of(ShardingStrategy.FULL_SHARD, Cluster.of(gpu, 1, 1, 0, 1)), gpu, cal)
                .total();
    }

    /**
     * Attention's rates in a step of this model and workload, from the table {@code rates}. Attention is timed at its
     * engines' measured rates, not at the GEMM ceiling scaled by the slowdown: its share of a step grows with the
     * sequence, and its rate depends on the heads and the sequence far more than the matrix products' does
     * (Qwen2.5-1.5B's 12 heads ran the mma.sync forward at 56% of 7B's 28 heads' rate; on the current engines 7B's
     * 28 heads run it at 443 TFLOP/s at 2048 tokens and 684 at 16384), so a slowdown fitted on one shape would
     * misjudge another. Documents packed shorter than the sequence ({@link Workload#documentTokens}) are timed as
     * that many sequences of their length, at the rates of the kernels that take them
     * ({@link AttentionRates#forPackedDocuments}).
     */
    public static AttentionRates.Rates attentionRates(ModelShape m, Workload w, AttentionRates rates) {
        int span = w.attentionSpan();
        return attentionTable(w, rates).inStep(m.config().headDim(), m.config().heads(), (double) w.tokens() / span,
                span);
    }

    /** The table {@link #attentionRates} reads: {@code rates}, or its packed documents' table where {@code w} packs. */
    public static AttentionRates attentionTable(Workload w, AttentionRates rates) {
        return w.packsDocuments() ? rates.forPackedDocuments() : rates;
    }

    /**
     * FLOPs and bytes of memory traffic of a stage, and its attention FLOPs (forward and backward), which are timed at
     * the attention kernels' own rates.
     */
    record Cost(double flops, double fp8Flops, double bytes, double attentionForwardFlops,
                double attentionBackwardFlops) {
        Cost(double flops, double bytes, double attentionForwardFlops, double attentionBackwardFlops) {
            this(flops, 0, bytes, attentionForwardFlops, attentionBackwardFlops);
        }

        Cost(double flops, double bytes) {
            this(flops, bytes, 0, 0);
        }

        /** Matrix products in fp8 ({@link GpuSpec#fp8GemmFlops}) and the bytes their operands' casts move. */
        static Cost fp8(double fp8Flops, double bytes) {
            return new Cost(0, fp8Flops, bytes, 0, 0);
        }

        /** Matrix products and memory traffic at the ceilings: what the calibration's slowdown scales. */
        double seconds(GpuSpec gpu) {
            return flops / gpu.gemmFlops() + fp8Flops / gpu.fp8GemmFlops() + bytes / gpu.hbmBytesPerSecond();
        }

        /** Attention at the kernels' rates for the stage's shape. */
        double attentionSeconds(AttentionRates.Rates rates) {
            return attentionForwardFlops / rates.forward() + attentionBackwardFlops / rates.backward();
        }

        double seconds(GpuSpec gpu, double slowdown, AttentionRates.Rates rates) {
            return slowdown * seconds(gpu) + attentionSeconds(rates);
        }

        Cost plus(Cost o) {
            return new Cost(flops + o.flops, fp8Flops + o.fp8Flops, bytes + o.bytes,
                    attentionForwardFlops + o.attentionForwardFlops, attentionBackwardFlops + o.attentionBackwardFlops);
        }
    }

    /** The work of each stage for one model, workload and sharding. */
    private static final class Work {
        final ModelShape m;
        final Workload w;
        final int groupSize;
        final boolean regather;
        final long n, c, e, rb;
        /** fp8: the blocks' linear products in fp8, their operands cast. */
        final boolean fp8;
        /** The blocks' weights get gradients (not under LoRA): their inputs are cast transposed too. */
        final boolean weightGradients;
        /**
         * AdamW's pass over the kept bf16 copy finds each weight's amax (one rank's shard is the unit the blocks
         * compute with): the casts do not read the weights for it.
         */
        final boolean weightAmaxKnown;
        /**
         * How much longer fp8's gradient products take with a scale per row than with one per tensor: at gate|up's
         * shape on an H200 (2048 tokens, cuBLASLt 13.1, tools/kernels/cublaslt_rowwise_probe.cu, 2026-11-26) the input
         * gradient 0.380 against 0.336 ms, the weight gradient 0.419 against 0.389 (the forward alike: 0.321).
         */
        static final double ROWWISE_GRADIENT_PRODUCTS = (0.380 + 0.419) / (0.336 + 0.389);
        /** fp8 rowwise ({@code fsdp.fp8_recipe: rowwise}): each layout of an operand cast with its own scales. */
        final boolean rowwise;

        Work(ModelShape m, Workload w, Sharding s) {
            this.m = m;
            this.w = w;
            this.groupSize = s.shardSize();
            this.regather = s.reshardAfterForward();
            this.n = w.tokens();
            this.c = m.config().hidden();
            this.e = w.paramBytes();
            this.rb = w.reduceBytes();
            this.fp8 = w.paramDtype() == io.fsdp4j.config.Precision.FP8;
            this.weightGradients = m.lora() == null;
            this.rowwise = fp8 && w.fp8Recipe() == io.fsdp4j.config.Fp8Recipe.ROWWISE;
            this.weightAmaxKnown = w.keptCopy() && groupSize == 1 && weightGradients && !rowwise;
        }

        long shard(int u) {
            return m.shardNumel(u, groupSize);
        }

        long padded(int u) {
            return m.paddedNumel(u, groupSize);
        }

        /**
         * Preparing one all-gather: the fp32 master shard of the part that trains rounded to bf16 (read 4, write 2
         * bytes an element; the buffers written whole are not zeroed). Unsharded the rounded shard is the unit; in
         * fp32, nothing; with a kept copy ({@code fsdp.param_copy: kept}) nothing: the optimizer wrote it. A frozen
         * base is held in the parameter dtype and sent as it is.
         */
        Cost gather(int u) {
            boolean rounded = e == 2 && !w.keptCopy();
            return new Cost(0, (rounded ? ROUNDING_BYTES * m.trainableShardNumel(u, groupSize) : 0) + dequantize(u));
        }

        /**
         * QLoRA ({@link ModelShape#nf4}): a block's gathered NF4 linears dequantized into the block's buffer, reading
         * the packed codes and absmax (9/16 byte an element) and writing the parameter dtype.
         */
        double dequantize(int u) {
            if (!m.nf4() || u == 0 || u == m.headUnit()) {
                return 0;
            }
            long linears = m.units().get(u).params().stream().filter(p -> p.offset() < m.frozenNumel(u)
                    && p.kind() == io.fsdp4j.model.ParamSpec.Kind.MATRIX).mapToLong(p -> p.numel()).sum();
            return (9.0 / 16 + e) * linears;
        }

        /** The fp32 accumulator zeroed when first used (unsharded: the gradient shard, which is the accumulator). */
        Cost accumulator(int u) {
            return new Cost(0, 4.0 * padded(u));
        }

        /** Matrix gradients added into the fp32 accumulator by the products' epilogue (read and write). */
        Cost weightGradients(long matrixParams) {
            return new Cost(0, 8.0 * matrixParams);
        }

        /** A block's gradients written into an accumulator nobody zeroed (the step's one backward): fp32 writes. */
        Cost blockGradients(int u) {
            return new Cost(0, 4.0 * padded(u));
        }

        /**
         * Around one reduction. In fp32 the reduce-scatter writes into the zeroed gradient shard in place: nothing.
         * In bf16 the accumulator is rounded (read 4, write 2) and the reduced bf16 shard added into the gradient
         * shard (read 2 + 4, write 4); unsharded, the gradient shard is rounded and widened back (6 + 6).
         */
        Cost reduction(int u) {
            if (rb != 2) {
                return new Cost(0, 0);
            }
            return new Cost(0, groupSize == 1 ? 12.0 * shard(u) : 6.0 * padded(u) + 10.0 * shard(u));
        }

        /**
         * Attention's forward FLOPs per block: 4 * NH * HS per (query, key) pair attended, causally (or in a window),
         * within each query's document.
         */
        double attentionForward() {
            long t = w.attentionSpan(), window = m.config().slidingWindow();
            double keysPerQuery = window <= 0 || window >= t ? (t + 1) / 2.0
                    : (window * (window + 1) / 2.0 + (double) (t - window) * window) / t;
            return 4.0 * m.config().heads() * m.config().headDim() * keysPerQuery * n;
        }

        /** Element traffic per token of a block's forward, in activation elements (see the class comment). */
        double forwardElements() {
            long q = m.qkvWidth(), a = m.attentionWidth(), up = m.mlpUpWidth(), f = m.config().intermediate();
            // two norms (4C), rotary (2Q), attention (Q+A), two residual adds (6C), the MLP activation (U+F);
            // outputs are written whole, not zeroed first
            return 4 * c + 2 * q + (q + a) + 6 * c + (up + f);
        }

        /** Element traffic per token of selective checkpointing's recompute: two norms, the MLP activation. */
        double recomputedElements() {
            long up = m.mlpUpWidth(), f = m.config().intermediate();
            return 4 * c + (up + f);
        }

        double backwardElements() {
            long q = m.qkvWidth(), a = m.attentionWidth(), up = m.mlpUpWidth(), f = m.config().intermediate();
            // (every gradient written whole, none zeroed first) MLP activation (F+2U), two norms (6C), two residual adds
            // (6C), attention (3A+2Q), rotary (2Q), q|k|v bias (Q)
            return (f + 2 * up) + 6 * c + 6 * c + (3 * a + 2 * q) + 2 * q + q;
        }

        Cost forward(int u) {
            if (u == 0) {
                return gather(0).plus(new Cost(0, 2.0 * n * c * e));
            }
            if (u == m.headUnit()) {
                return head();
            }
            Cost cost = products(2.0 * m.matrixParams(u) * n).plus(fp8Forward())
                    .plus(new Cost(0, forwardElements() * n * e, attentionForward(), 0)).plus(gather(u));
            // full checkpointing copies the block's output out of the forward's scope (keeping attention, it does not)
            return mode(u) == ActivationCheckpointing.FULL ? cost.plus(new Cost(0, 2.0 * n * c * e)) : cost;
        }

        /** A block's linear products of {@code flops}: in fp8 with {@code fsdp.param_dtype: fp8}. */
        Cost products(double flops) {
            return fp8 ? Cost.fp8(flops, 0) : new Cost(flops, 0);
        }

        /**
         * {@link #products} of a block's backward (the input and weight gradients): rowwise, cuBLASLt's products with a
         * scale per row and without fast accumulation take {@link #ROWWISE_GRADIENT_PRODUCTS} times as long.
         */
        Cost gradientProducts(double flops) {
            return products(rowwise ? ROWWISE_GRADIENT_PRODUCTS * flops : flops);
        }

        /**
         * Bytes of fp8's casts of one operand of {@code elements} elements: its amax (a read, 2 bytes an element,
         * unless {@code amaxKnown}), then read once more and written in fp8 in {@code layouts} layouts (1 byte each).
         */
        static double castBytes(double elements, int layouts, boolean amaxKnown) {
            return elements * ((amaxKnown ? 0 : 2) + 2 + layouts);
        }

        /**
         * {@link #castBytes} as this workload's recipe casts: rowwise, each layout is a cast of its own, with its own
         * amaxes (a row's or a column's), so both layouts read the operand twice each.
         */
        double cast(double elements, int layouts, boolean amaxKnown) {
            return rowwise ? layouts * castBytes(elements, 1, false) : castBytes(elements, layouts, amaxKnown);
        }

        /** The four linears of a block: weight elements, inputs and outputs per token (q|k|v, o, gate|up, down). */
        long[][] linears() {
            long q = m.qkvWidth(), a = m.attentionWidth(), up = m.mlpUpWidth(), f = m.config().intermediate();
            return new long[][] {{q * c, c, q}, {c * a, a, c}, {up * c, c, up}, {c * f, f, c}};
        }

        /**
         * fp8's casts in a block's forward: each linear's weight and input, row-major (without full checkpointing the
         * backward casts them again transposed; under it the recomputed forward casts them both ways at once).
         */
        Cost fp8Forward() {
            if (!fp8) {
                return new Cost(0, 0);
            }
            double bytes = 0;
            for (long[] l : linears()) {
                bytes += cast(l[0], 1, weightAmaxKnown) + cast((double) n * l[1], 1, false);
            }
            return Cost.fp8(0, bytes);
        }

        /**
         * fp8's casts in a block's backward. Under full checkpointing the recomputed forward casts q|k|v's, o's and
         * gate|up's weights and inputs both ways at once (inputs transposed only where weights get gradients: not
         * under LoRA), the backward takes them, and casts the down projection's weight and input transposed (the
         * recompute leaves that product out); otherwise the backward casts every weight and input transposed. Every
         * output gradient is cast both ways (e5m2).
         */
        Cost fp8Backward(int u) {
            if (!fp8) {
                return new Cost(0, 0);
            }
            long[][] linears = linears();
            double bytes = 0;
            for (int i = 0; i < linears.length; i++) {
                long[] l = linears[i];
                double inputs = (double) n * l[1];
                if (mode(u).recomputesBlocks() && i < 3) {
                    bytes += cast(l[0], 2, weightAmaxKnown) + cast(inputs, weightGradients ? 2 : 1, false);
                } else {
                    bytes += cast(l[0], 1, weightAmaxKnown) + (weightGradients ? cast(inputs, 1, false) : 0);
                }
                bytes += cast((double) n * l[2], weightGradients ? 2 : 1, false);
            }
            return Cost.fp8(0, bytes);
        }

        /** The head: final norm, logits, cross-entropy and their backward, one stage. */
        Cost head() {
            int h = m.headUnit();
            long v = m.config().vocabSize();
            Cost cost = new Cost(6.0 * m.matrixParams(h) * n, e * (3.0 * n * v + 8.0 * n * c))
                    .plus(gather(h)).plus(accumulator(h)).plus(weightGradients(m.matrixParams(h)))
                    .plus(reduction(h));
            if (m.tied()) { // the embedding table is the head's matrix: gathered again if resharded, accumulated
                cost = cost.plus(accumulator(0));
                if (regather) {
                    cost = cost.plus(gather(0));
                }
            }
            return cost;
        }

        /** Block unit {@code u}'s checkpointing (units 1 to blocks are the blocks). */
        ActivationCheckpointing mode(int u) {
            return w.checkpointing(u - 1, m.blocks());
        }

        Cost backward(int u) {
            if (u == m.headUnit()) {
                return new Cost(0, 0);
            }
            if (u == 0) {
                Cost cost = new Cost(0, 4.0 * n * c + (double) n * c * e).plus(reduction(0));
                return m.tied() ? cost : cost.plus(accumulator(0));
            }
            Cost cost = gradientProducts(4.0 * m.matrixParams(u) * n).plus(fp8Backward(u))
                    .plus(new Cost(0, backwardElements() * n * e, 0, 2.5 * attentionForward()))
                    .plus(blockGradients(u)).plus(reduction(u));
            ActivationCheckpointing mode = mode(u);
            if (mode.recomputesBlocks()) { // the forward again, but attention's where it was kept
                boolean attentionKept = mode == ActivationCheckpointing.FULL_KEEP_ATTENTION;
                cost = cost.plus(products(2.0 * m.matrixParams(u) * n))
                        .plus(new Cost(0, forwardElements() * n * e, attentionKept ? 0 : attentionForward(), 0));
            } else if (mode == ActivationCheckpointing.SELECTIVE) {
                cost = cost.plus(new Cost(0, recomputedElements() * n * e));
            }
            // resharded after forward, a block is gathered again for its backward, but for the last (kept)
            return regather && u < m.blocks() ? cost.plus(gather(u)) : cost;
        }

        /**
         * The gradient shards' norm (4 bytes per trained shard element read) and AdamW with the clipping factor
         * folded in (28: master, first and second moment read and written, gradient read; 2 more writing the kept
         * copy). Under LoRA only the adapters' shards have gradients and optimizer state.
         */
        Cost tail() {
            return new Cost(0, (NORM_BYTES + adamwBytes(w)) * shardElements(m, groupSize));
        }
    }
}
