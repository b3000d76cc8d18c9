package io.fsdp4j.plan;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.config.FsdpSection;
import io.fsdp4j.config.ParamCopy;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.plan.MemoryModel.Part;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A plan as text tables for people, or as one JSON object ({@code --json}); {@code modelName} is the preset or
 * directory the user gave.
 */
public final class PlanReport {
    private static final double GIB = 1L << 30;

    private PlanReport() {}

    public static String text(String modelName, Planner.Plan plan, Map<Integer, Map<ShardingStrategy, Double>> scaling,
                              String scalingCheckpointing) {
        var out = new StringBuilder();
        ModelShape m = plan.model();
        Cluster c = plan.cluster();
        Workload w = plan.workload();
        var cal = plan.options().calibration();
        line(out, "fsdp4j plan: %s, %,d parameters (%d blocks), on %d node%s x %d %s (%d GPUs)", modelName,
                m.parameters(), m.blocks(), c.nodes(), c.nodes() == 1 ? "" : "s", c.gpusPerNode(), c.gpu().name(),
                c.world());
        line(out, "per GPU and step: %d x %d tokens%s; %s parameters, %s reduction%s; %s", w.batch(), w.seq(),
                w.packsDocuments() ? " (documents of " + w.attentionSpan() + " tokens packed in each)" : "",
                w.paramDtype() == Precision.FP8 ? "bf16" : w.paramDtype().spelling(), w.reduceDtype().spelling(),
                (w.paramDtype() == Precision.FP8 ? "; the blocks' linear products in fp8, " + w.fp8Recipe().spelling()
                        + " (at twice the bf16 products' ceiling, their operands' casts as memory traffic)" : "")
                        + (w.prefetch() == FsdpSection.DEFAULT_PREFETCH ? ""
                        : w.prefetch() == 0 ? "; no prefetch (each unit gathered when it computes)"
                        : "; all-gathers started " + w.prefetch() + " units ahead (fsdp.prefetch)")
                        + (w.blocksNotCheckpointed() == 0 ? "" : "; the last " + Math.min(w.blocksNotCheckpointed(),
                        m.blocks()) + " blocks not checkpointed (fsdp.blocks_not_checkpointed)")
                        + (w.blocksSelective() == 0 || !w.checkpointing().recomputesBlocks() ? ""
                        : "; " + Math.min(w.blocksSelective(), Math.max(0, m.blocks() - w.blocksNotCheckpointed()))
                        + " blocks before those checkpointed selectively (fsdp.blocks_selective)"), paramCopy(w));
        if (m.lora() != null) {
            line(out, "lora: rank %d (scaling %s) on %s: %,d trainable parameters (%.2f%%); the base frozen in %s (its "
                            + "shards only: no master, gradient or optimizer state), the adapters with fp32 masters, "
                            + "gradients and AdamW moments%s", m.lora().rank(), m.lora().scaling(),
                    String.join(", ", m.lora().modules()), m.trainableParameters(),
                    100.0 * m.trainableParameters() / m.parameters(), m.nf4()
                            ? "nf4 (QLoRA: each block's linears in 4 bits and an fp32 absmax per 64, gathered packed "
                            + "and dequantized to " + w.paramDtype().spelling() + "; embeddings, norms and head in "
                            + w.paramDtype().spelling() + ")" : w.paramDtype().spelling(),
                    w.keptCopy() ? ", and their masters' kept copies" : "");
        }
        line(out, "links: NVLink %.0f/%.0f/%.0f GB/s bus bandwidth (all-gather/reduce-scatter/all-reduce); "
                        + "network %.0f Gb/s (%.1f GB/s) per node each way",
                c.allGatherBusBw() / 1e9, c.reduceScatterBusBw() / 1e9, c.allReduceBusBw() / 1e9,
                c.interNodeBandwidth() * 8 / 1e9, c.interNodeBandwidth() / 1e9);
        AttentionRates.Rates attention = ComputeModel.attentionRates(plan.model(), w, cal.attention());
        line(out, "compute: %.2f x (FLOPs at %.0f TFLOP/s + bytes at %.2f TB/s) + attention at %.0f / %.0f TFLOP/s "
                        + "(forward / backward in a step: %s, at %d heads of size %d, %s) + %.2f ms per "
                        + "block a step (from fsdp4j's 1-GPU Qwen2.5-7B and 0.5B H200 steps)%s",
                cal.slowdown(), c.gpu().gemmFlops() / 1e12, c.gpu().hbmBytesPerSecond() / 1e12,
                attention.forward() / 1e12, attention.backward() / 1e12,
                ComputeModel.attentionTable(w, cal.attention()).engineNames(),
                plan.model().config().heads(), plan.model().config().headDim(),
                w.packsDocuments() ? String.format(Locale.ROOT, "%,.1f documents of %d tokens", (double) w.tokens()
                        / w.attentionSpan(), w.attentionSpan()) : w.batch() + " x " + w.seq() + " tokens",
                cal.perBlockSeconds() * 1e3,
                plan.options().replicaStream() ? "; what-if: replica all-reduce on its own stream" : "");
        out.append('\n');

        line(out, "memory per GPU, GiB (at the step's peak moment; reserved: what the caching allocator holds; "
                + "usable %.1f of %.1f)", c.gpu().usableBytes() / GIB, c.gpu().memoryBytes() / GIB);
        if (plan.workload().cpuOffload()) {
            line(out, "cpu offload: the shards and AdamW moments in host memory (state_host GiB per GPU below), "
                    + "copied over PCIe at %.0f GB/s (assumed); the host optimizer at %.0f GB/s (fitted)",
                    ComputeModel.PCIE_BYTES_PER_SECOND / 1e9, plan.options().calibration().hostBytesPerSecond() / 1e9);
            for (Planner.Prediction p : plan.predictions()) {
                line(out, "  %-18s %-19s state_host %.2f", p.strategy().spelling(), p.checkpointing().spelling(),
                        p.memory().hostStateBytes() / GIB);
            }
        }
        line(out, "%-19s %-19s %7s %6s %6s %7s %8s %6s %6s %9s %8s  %s", "strategy", "ckpt", "params", "grads",
                "optim", "gather", "grad-buf", "activ", "logits", "allocator", "reserved", "fits");
        for (Planner.Prediction p : plan.predictions()) {
            MemoryModel.Estimate e = p.memory();
            line(out, "%-19s %-19s %7.2f %6.2f %6.2f %7.2f %8.2f %6.2f %6.2f %9.2f %8.2f  %s", p.strategy().spelling(),
                    p.checkpointing().spelling(), gib(e.part(Part.PARAMS)), gib(e.part(Part.GRADS)),
                    gib(e.part(Part.OPTIMIZER)), gib(e.part(Part.GATHERED)), gib(e.part(Part.GRAD_BUFFERS)),
                    gib(e.part(Part.ACTIVATIONS)), gib(e.part(Part.LOGITS)), gib(e.allocatorOverhead()),
                    gib(e.reserved()), p.fits() ? "yes" : "no");
        }
        out.append('\n');

        line(out, "step, ms (collectives: time on the communication stream; exposed: compute waiting for them)");
        line(out, "%-19s %-19s %8s %10s %14s %10s %8s %8s %11s %9s %6s", "strategy", "ckpt", "compute", "all-gather",
                "reduce-scatter", "all-reduce", "exposed", "step", "tokens/s", "per GPU", "MFU");
        for (Planner.Prediction p : plan.predictions()) {
            StepSimulator.StepTime t = p.time();
            line(out, "%-19s %-19s %8.1f %10.1f %14.1f %10.1f %8.1f %8.1f %,11.0f %,9.0f %5.1f%%",
                    p.strategy().spelling(), p.checkpointing().spelling(), ms(t.computeSeconds()),
                    ms(t.allGatherSeconds()), ms(t.reduceScatterSeconds()), ms(t.allReduceSeconds()),
                    ms(t.exposedSeconds()), ms(t.stepSeconds()), p.tokensPerSecond(), p.tokensPerSecondPerGpu(),
                    100 * p.mfu());
        }
        out.append('\n');
        line(out, "recommended: %s", plan.reason());
        if (plan.recommended() != null) { // the same as config keys, for fsdp4j train
            line(out, "as train keys: --set fsdp.strategy=%s --set fsdp.activation_checkpointing=%s",
                    plan.recommended().strategy().spelling(), plan.recommended().checkpointing().spelling());
        }
        Planner.ParamCopyAdvice advice = plan.paramCopyAdvice();
        if (advice != null) { // the default per_gather planned, and the kept copy fits the recommended configuration
            line(out, "fsdp.param_copy: kept would also fit (%.1f GiB of %.1f a GPU) and run about %.0f%% faster "
                            + "(%,.0f against %,.0f tokens/s per GPU): --set fsdp.param_copy=kept",
                    gib(advice.kept().memory().reserved()), gib(c.gpu().usableBytes()), 100 * advice.gain(),
                    advice.kept().tokensPerSecondPerGpu(), advice.perGather().tokensPerSecondPerGpu());
        }
        Planner.CheckpointingAdvice blocks = plan.checkpointingAdvice();
        if (blocks != null) { // the recommended configuration checkpoints blocks, and some could keep everything
            int n = blocks.split().blocksNotCheckpointed(), k = blocks.split().blocksSelective();
            int all = plan.model().blocks();
            String split = k == 0 ? "fsdp.blocks_not_checkpointed: the last " + count(n) + " of the " + all
                    + " blocks could keep every activation"
                    : n == 0 ? "fsdp.blocks_selective: the last " + count(k) + " of the " + all
                    + " blocks could be checkpointed selectively"
                    : "fsdp.blocks_not_checkpointed and fsdp.blocks_selective: the last " + count(n) + " of the " + all
                    + " blocks could keep every activation, and the " + count(k) + " before them be checkpointed"
                    + " selectively,";
            line(out, "%s and still fit (%.1f GiB of %.1f a GPU), about %.0f%% faster (%,.0f against %,.0f tokens/s per"
                            + " GPU): %s",
                    split, gib(blocks.partly().memory().reserved()), gib(c.gpu().usableBytes()), 100 * blocks.gain(),
                    blocks.partly().tokensPerSecondPerGpu(), blocks.checkpointed().tokensPerSecondPerGpu(),
                    blocks.keys());
        }
        Planner.Split auto = plan.auto();
        line(out, "train with fsdp.activation_checkpointing=auto and fsdp.param_copy=auto (a fine-tune's defaults on"
                        + " GPUs) on %s: %s; param_copy %s (%.1f GiB of %.1f a GPU%s, %,.0f tokens/s per GPU)",
                plan.trainStrategy().spelling(), autoSplit(auto), auto.paramCopy().spelling(),
                gib(auto.prediction().memory().reserved()), gib(c.gpu().usableBytes()),
                auto.prediction().fits() ? "" : ": does not fit", auto.prediction().tokensPerSecondPerGpu());
        Planner.Longest longest = plan.longest();
        if (longest.seq() > 0) {
            line(out, "longest sequence that fits (%s, checkpointing %s, batch %d): %,d tokens (%.1f GiB of %.1f)%s",
                    longest.strategy().spelling(), longest.checkpointing().spelling(), plan.workload().batch(),
                    longest.seq(), Planner.gib(longest.reserved()), Planner.gib(c.gpu().usableBytes()),
                    longest.modelLimit() ? ", the model's limit (max_position_embeddings)" : "");
        } else {
            line(out, "longest sequence that fits (%s, checkpointing %s, batch %d): none, not even %,d tokens",
                    longest.strategy().spelling(), longest.checkpointing().spelling(), plan.workload().batch(),
                    Planner.SEQ_STEP);
        }
        out.append('\n');

        line(out, "predicted tokens/s by GPU count (up to %d GPUs per node, same links; checkpointing %s; "
                + "-: does not fit)", c.gpusPerNode(), scalingCheckpointing);
        var header = new StringBuilder("%6s".formatted("GPUs"));
        for (ShardingStrategy s : ShardingStrategy.values()) {
            header.append("%20s".formatted(s.spelling()));
        }
        line(out, "%s", header);
        scaling.forEach((gpus, row) -> {
            var r = new StringBuilder("%6d".formatted(gpus));
            row.values().forEach(v -> r.append(Double.isNaN(v) ? "%20s".formatted("-") : "%,20.0f".formatted(v)));
            line(out, "%s", r);
        });
        return out.toString();
    }

    /** What the gathers send, as {@code fsdp.param_copy} and the workload make it. */
    static String paramCopy(Workload w) {
        String key = "fsdp.param_copy " + w.paramCopy().spelling();
        String dtype = w.paramDtype() == Precision.FP8 ? "bf16" : w.paramDtype().spelling(); // fp8 gathers bf16
        if (w.keptCopy()) {
            return "the gathers send a " + dtype + " copy kept beside each master shard (" + key + ": 2 bytes a "
                    + "trained parameter per shard, written by AdamW; no rounding at the gathers)";
        }
        if (!w.paramDtype().isHalf()) {
            return "the gathers send the fp32 master shards (" + key + ": no copy in fp32)";
        }
        return "the fp32 master shard rounded to " + dtype + " at each gather (" + key
                + (w.paramCopy() == ParamCopy.KEPT ? ": no kept copy of a master in host memory)" : ")");
    }

    private static void line(StringBuilder out, String format, Object... args) {
        out.append(String.format(Locale.ROOT, format, args).stripTrailing()).append('\n');
    }

    public static String json(String modelName, Planner.Plan plan, Map<Integer, Map<ShardingStrategy, Double>> scaling,
                              String scalingCheckpointing) {
        ModelShape m = plan.model();
        Cluster c = plan.cluster();
        Workload w = plan.workload();
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("model", modelName);
        root.put("parameters", m.parameters());
        root.put("blocks", m.blocks());
        root.put("gpu", c.gpu().name());
        root.put("nodes", c.nodes());
        root.put("gpus_per_node", c.gpusPerNode());
        root.put("world", c.world());
        root.put("seq", w.seq());
        root.put("batch", w.batch());
        root.put("document_tokens", w.packsDocuments() ? w.attentionSpan() : 0);
        root.put("param_dtype", w.paramDtype().spelling());
        root.put("reduce_dtype", w.reduceDtype().spelling());
        if (m.lora() != null) { // what trains: the adapters; the base frozen in param_dtype, its shards only
            Map<String, Object> lora = new LinkedHashMap<>();
            lora.put("rank", m.lora().rank());
            lora.put("scaling", m.lora().scaling());
            lora.put("target_modules", m.lora().modules());
            lora.put("trainable_parameters", m.trainableParameters());
            lora.put("frozen_dtype", w.paramDtype().spelling());
            lora.put("quantize", m.nf4() ? "nf4" : "none"); // nf4: the blocks' linears in NF4, the rest frozen_dtype
            lora.put("frozen_state", "parameters only: no master, gradient or optimizer state");
            lora.put("trained_state", "fp32 master, gradient and two AdamW moments"
                    + (w.keptCopy() ? ", and the master's kept copy in param_dtype" : ""));
            root.put("lora", lora);
        }
        Map<String, Object> links = new LinkedHashMap<>();
        links.put("all_gather_busbw_gbs", c.allGatherBusBw() / 1e9);
        links.put("reduce_scatter_busbw_gbs", c.reduceScatterBusBw() / 1e9);
        links.put("all_reduce_busbw_gbs", c.allReduceBusBw() / 1e9);
        links.put("inter_node_gbps", c.interNodeBandwidth() * 8 / 1e9);
        root.put("links", links);
        Map<String, Object> assumptions = new LinkedHashMap<>();
        assumptions.put("gemm_tflops", c.gpu().gemmFlops() / 1e12);
        assumptions.put("hbm_tbs", c.gpu().hbmBytesPerSecond() / 1e12);
        assumptions.put("slowdown", plan.options().calibration().slowdown());
        // at the workload's sequence length
        AttentionRates.Rates attention = ComputeModel.attentionRates(plan.model(), w,
                plan.options().calibration().attention());
        assumptions.put("attention_engines",
                ComputeModel.attentionTable(w, plan.options().calibration().attention()).engineNames());
        assumptions.put("attention_forward_tflops", attention.forward() / 1e12);
        assumptions.put("attention_backward_tflops", attention.backward() / 1e12);
        assumptions.put("per_block_ms", plan.options().calibration().perBlockSeconds() * 1e3);
        assumptions.put("cpu_offload", plan.workload().cpuOffload());
        assumptions.put("prefetch", plan.workload().prefetch());
        assumptions.put("param_copy", w.paramCopy().spelling());
        assumptions.put("fp8_recipe", w.fp8Recipe().spelling());
        assumptions.put("blocks_not_checkpointed", w.blocksNotCheckpointed());
        assumptions.put("blocks_selective", w.blocksSelective());
        assumptions.put("kept_copy", w.keptCopy()); // whether the trained shards hold it: half precision, on the device
        assumptions.put("compute_scale", plan.options().computeScale());
        assumptions.put("pcie_gbs", ComputeModel.PCIE_BYTES_PER_SECOND / 1e9);
        assumptions.put("host_optimizer_gbs", plan.options().calibration().hostBytesPerSecond() / 1e9);
        assumptions.put("usable_gib", c.gpu().usableBytes() / GIB);
        assumptions.put("replica_stream", plan.options().replicaStream());
        root.put("assumptions", assumptions);
        List<Map<String, Object>> predictions = new ArrayList<>();
        for (Planner.Prediction p : plan.predictions()) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("strategy", p.strategy().spelling());
            row.put("checkpointing", p.checkpointing().spelling());
            row.put("fits", p.fits());
            Map<String, Object> memory = new LinkedHashMap<>();
            for (Part part : Part.values()) {
                memory.put(part.name().toLowerCase(Locale.ROOT), gib(p.memory().part(part)));
            }
            memory.put("allocator_overhead", gib(p.memory().allocatorOverhead()));
            memory.put("allocated", gib(p.memory().allocated()));
            memory.put("reserved", gib(p.memory().reserved()));
            memory.put("state_host", gib(p.memory().hostStateBytes()));
            memory.put("peak_phase", p.memory().peakPhase());
            row.put("memory_gib", memory);
            StepSimulator.StepTime t = p.time();
            Map<String, Object> time = new LinkedHashMap<>();
            time.put("compute", ms(t.computeSeconds()));
            time.put("all_gather", ms(t.allGatherSeconds()));
            time.put("reduce_scatter", ms(t.reduceScatterSeconds()));
            time.put("all_reduce", ms(t.allReduceSeconds()));
            time.put("exposed", ms(t.exposedSeconds()));
            time.put("step", ms(t.stepSeconds()));
            row.put("step_ms", time);
            row.put("tok_s", p.tokensPerSecond());
            row.put("tok_s_gpu", p.tokensPerSecondPerGpu());
            row.put("mfu", p.mfu());
            predictions.add(row);
        }
        root.put("predictions", predictions);
        Map<String, Object> recommended = new LinkedHashMap<>();
        recommended.put("strategy", plan.recommended() == null ? null : plan.recommended().strategy().spelling());
        recommended.put("checkpointing",
                plan.recommended() == null ? null : plan.recommended().checkpointing().spelling());
        recommended.put("reason", plan.reason());
        root.put("recommended", recommended);
        Map<String, Object> longest = new LinkedHashMap<>();
        longest.put("strategy", plan.longest().strategy().spelling());
        longest.put("checkpointing", plan.longest().checkpointing().spelling());
        longest.put("seq", plan.longest().seq());
        longest.put("reserved_gib", Planner.gib(plan.longest().reserved()));
        longest.put("model_limit", plan.longest().modelLimit());
        root.put("longest_seq", longest);
        Map<String, Object> advice = new LinkedHashMap<>(); // each only where the plan advises it
        Planner.ParamCopyAdvice a = plan.paramCopyAdvice();
        if (a != null) {
            Map<String, Object> copy = new LinkedHashMap<>();
            copy.put("strategy", a.kept().strategy().spelling());
            copy.put("checkpointing", a.kept().checkpointing().spelling());
            copy.put("set", "fsdp.param_copy=kept");
            copy.put("per_gather", adviceSide(a.perGather()));
            copy.put("kept", adviceSide(a.kept()));
            copy.put("gain", a.gain());
            advice.put("param_copy", copy);
        }
        Planner.CheckpointingAdvice b = plan.checkpointingAdvice();
        if (b != null) {
            Map<String, Object> blocks = new LinkedHashMap<>();
            blocks.put("strategy", b.partly().strategy().spelling());
            blocks.put("checkpointing", b.partly().checkpointing().spelling());
            blocks.put("set", b.keys().replace("--set ", ""));
            blocks.put("blocks", b.split().blocksNotCheckpointed());
            blocks.put("selective", b.split().blocksSelective());
            blocks.put("checkpointed", adviceSide(b.checkpointed()));
            blocks.put("partly", adviceSide(b.partly()));
            blocks.put("gain", b.gain());
            advice.put("blocks_not_checkpointed", blocks);
        }
        root.put("advice", advice);
        Planner.Split auto = plan.auto();
        Map<String, Object> chosen = new LinkedHashMap<>();
        chosen.put("strategy", plan.trainStrategy().spelling());
        chosen.put("checkpointing", auto.mode().spelling());
        chosen.put("blocks_not_checkpointed", auto.blocksNotCheckpointed());
        chosen.put("blocks_selective", auto.blocksSelective());
        chosen.put("param_copy", auto.paramCopy().spelling());
        chosen.put("fits", auto.prediction().fits());
        chosen.putAll(adviceSide(auto.prediction()));
        root.put("auto", chosen);
        root.put("scaling_checkpointing", scalingCheckpointing);
        List<Map<String, Object>> rows = new ArrayList<>();
        scaling.forEach((gpus, row) -> {
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("gpus", gpus);
            row.forEach((s, v) -> r.put(s.spelling(), Double.isNaN(v) ? null : v));
            rows.add(r);
        });
        root.put("scaling", rows);
        try {
            return new ObjectMapper().writeValueAsString(root);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    /** One side of the param_copy advice: the predicted peak and speed. */
    private static Map<String, Object> adviceSide(Planner.Prediction p) {
        Map<String, Object> side = new LinkedHashMap<>();
        side.put("reserved_gib", gib(p.memory().reserved()));
        side.put("tok_s", p.tokensPerSecond());
        side.put("tok_s_gpu", p.tokensPerSecondPerGpu());
        return side;
    }

    /** auto's checkpointing in words: the mode, and the blocks left out and checkpointed selectively, if any. */
    private static String autoSplit(Planner.Split auto) {
        String blocks = auto.blocksInWords();
        return "checkpointing " + auto.mode().spelling() + (blocks.isEmpty() ? "" : ", " + blocks);
    }

    /** A count of blocks in words: "one", else its digits. */
    private static String count(int blocks) {
        return blocks == 1 ? "one" : String.valueOf(blocks);
    }

    private static double gib(long bytes) {
        return bytes / GIB;
    }

    private static double ms(double seconds) {
        return seconds * 1e3;
    }
}
