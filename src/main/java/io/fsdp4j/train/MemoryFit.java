package io.fsdp4j.train;

import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.plan.Cluster;
import io.fsdp4j.plan.GpuSpec;
import io.fsdp4j.plan.ModelShape;
import io.fsdp4j.plan.Planner;
import io.fsdp4j.plan.Workload;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.function.IntSupplier;
import java.util.stream.IntStream;

/**
 * What a run spends the GPU's memory on, where the config leaves it to the run ({@code auto}, a fine-tune's default
 * on GPUs), decided at the run's start once the sequence length is known:
 * <ul>
 *   <li>{@code fsdp.activation_checkpointing: auto}: the mode and the block counts ({@code fsdp.blocks_not_checkpointed},
 *       {@code fsdp.blocks_selective});</li>
 *   <li>{@code fsdp.param_copy: auto}: {@code kept} or {@code per_gather}.</li>
 * </ul>
 * The choice is what {@code fsdp4j plan} predicts fastest among those whose peak leaves 1% of the GPU's memory free
 * ({@link Planner#chooseMemoryUse}), for the job's strategy, GPUs and nodes, said in one line. On CPU ranks,
 * {@code none} and {@code per_gather}: the host's memory is not what the plan models, and recomputing costs the CPU
 * what it costs the GPU. Every process of a job decides alike: the same config, model and GPU kind give the same
 * choice (each process plans on the smallest of its GPUs; nodes whose GPUs differ in memory may choose differently,
 * and the job's start then refuses the differing settings: name them in the config).
 */
final class MemoryFit {
    private MemoryFit() {}

    /** {@code config} with its {@code auto} settings decided (on the job's GPUs or CPU ranks) and said on {@code out}. */
    static TrainConfig fit(TrainConfig config, ModelConfig model, PrintStream out) {
        return fit(config, model, () -> 0, out);
    }

    /**
     * {@link #fit(TrainConfig, ModelConfig, PrintStream)} for sequences that pack documents of about
     * {@code documentTokens} ({@link io.fsdp4j.data.Dataset#documentTokens}; 0: one document a sequence), whose
     * attention the plan times within each document; asked for only where the plan decides (GPUs, an auto setting).
     */
    static TrainConfig fit(TrainConfig config, ModelConfig model, IntSupplier documentTokens, PrintStream out) {
        var f = config.fsdp();
        if (!f.autoCheckpointing() && !f.autoParamCopy()) {
            return config;
        }
        if (!JobSetup.onCuda(config)) {
            List<String> settings = new ArrayList<>();
            if (f.autoCheckpointing()) {
                settings.add("fsdp.activation_checkpointing=none");
            }
            if (f.autoParamCopy()) {
                settings.add("fsdp.param_copy=per_gather");
            }
            out.println("fsdp4j: auto: " + String.join(", ", settings) + " (CPU ranks keep every activation)");
            return config.with(settings.toArray(String[]::new));
        }
        var gpus = IntStream.range(0, Cuda.deviceCount()).mapToObj(Cuda::properties).toList();
        var smallest = gpus.stream().min(Comparator.comparingLong(Cuda.DeviceProperties::totalMemory)).orElseThrow();
        return fit(config, model, GpuSpec.ofDevice(smallest.name(), smallest.totalMemory()),
                documentTokens.getAsInt(), out);
    }

    /** {@link #fit(TrainConfig, ModelConfig, PrintStream)} on GPUs of this kind. */
    static TrainConfig fit(TrainConfig config, ModelConfig model, GpuSpec gpu, PrintStream out) {
        return fit(config, model, gpu, 0, out);
    }

    /** {@link #fit(TrainConfig, ModelConfig, int, PrintStream)} on GPUs of this kind. */
    static TrainConfig fit(TrainConfig config, ModelConfig model, GpuSpec gpu, int documentTokens, PrintStream out) {
        var f = config.fsdp();
        JobLayout job = JobSetup.layout(config);
        int sharing = config.dist().shareGpu() ? job.ranksPerNode() : 1; // ranks on one GPU share its memory
        GpuSpec perRank = gpu.withMemory(gpu.name(), gpu.headroomBytes() + gpu.usableBytes() / sharing);
        Cluster cluster = Cluster.of(perRank, job.nnodes(), job.ranksPerNode(), 0, 400e9 / 8);
        var lora = config.lora();
        ModelShape shape = ModelShape.of(model, lora.enabled() ? LoraSpec.of(lora, model) : null,
                lora.enabled() && lora.quantized());
        Workload w = new Workload(config.data().seqLen(), config.train().batchSize(), f.activationCheckpointing(),
                f.paramDtype(), f.reduceDtype(), f.cpuOffload(), f.prefetch(), f.paramCopy(), f.fp8Recipe(),
                f.blocksNotCheckpointed(), f.blocksSelective(), documentTokens);
        Planner.Split choice = Planner.chooseMemoryUse(shape, cluster, w, f.strategy(), Planner.Options.defaults(),
                f.autoCheckpointing(), f.autoParamCopy());
        double gib = 1L << 30;
        List<String> settings = new ArrayList<>(), said = new ArrayList<>();
        if (f.autoCheckpointing()) {
            settings.add("fsdp.activation_checkpointing=" + choice.mode().spelling());
            settings.add("fsdp.blocks_not_checkpointed=" + choice.blocksNotCheckpointed());
            settings.add("fsdp.blocks_selective=" + choice.blocksSelective());
            String blocks = choice.blocksInWords();
            said.add("fsdp.activation_checkpointing=" + choice.mode().spelling()
                    + (blocks.isEmpty() ? "" : ", " + blocks));
        }
        if (f.autoParamCopy()) {
            settings.add("fsdp.param_copy=" + choice.paramCopy().spelling());
            said.add("fsdp.param_copy=" + choice.paramCopy().spelling());
        }
        String unfit = "";
        if (!choice.prediction().fits()) {
            unfit = f.autoCheckpointing() ? ": more than fits, the least any choice keeps" : ": more than fits";
            Workload offload = w.withCpuOffload(true);
            Planner.Split offloaded = f.cpuOffload() ? null : Planner.chooseMemoryUse(shape, cluster, offload,
                    f.strategy(), Planner.Options.defaults(), f.autoCheckpointing(), false);
            if (offloaded != null
                    && offloaded.prediction().memory().reserved() <= Planner.sparedBytes(cluster, offload)) {
                unfit += String.format(Locale.ROOT, "; with fsdp.cpu_offload=true it plans %.1f GiB",
                        offloaded.prediction().memory().reserved() / gib);
            }
        }
        String documents = w.packsDocuments()
                ? ", attention within packed documents of about " + w.attentionSpan() + " tokens" : "";
        out.printf(Locale.ROOT, "fsdp4j: auto: %s (planned %.1f of %.1f GiB a %s%s%s; fsdp4j plan shows the others)%n",
                String.join("; ", said), choice.prediction().memory().reserved() / gib, perRank.usableBytes() / gib,
                sharing > 1 ? "rank on the shared " + gpu.name() : gpu.name(), documents, unfit);
        return config.with(settings.toArray(String[]::new));
    }
}
