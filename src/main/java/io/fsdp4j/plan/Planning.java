package io.fsdp4j.plan;

import io.fsdp4j.UserError;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.ConfigChoice;
import io.fsdp4j.config.Fp8Recipe;
import io.fsdp4j.config.FsdpSection;
import io.fsdp4j.config.LoraSection;
import io.fsdp4j.config.ParamCopy;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.hf.HfConfig;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** {@code fsdp4j plan}: reads the request, plans, prints the report and draws the chart. */
public final class Planning {
    private Planning() {}

    /**
     * What the user asked for, as the command line spells it.
     *
     * @param model a preset name or a Hugging Face model directory
     * @param intraGbps NVLink bus bandwidth in Gb/s for every in-node collective; 0 for the GPU's measured ones
     * @param interGbps each node's network bandwidth in Gb/s, each way; null: 400, or what {@code ncclTest} measured
     * @param checkpointing none, selective, full or full_keep_attention; null for all four
     * @param plot where to draw the scaling chart (PNG), or null
     * @param prefetch fsdp.prefetch: units ahead of the computing one whose all-gather is started
     * @param paramCopy fsdp.param_copy: per_gather or kept
     * @param ncclTest {@code fsdp4j nccl-test --json}'s output, whose measured links replace the defaults; or null
     * @param bench {@code fsdp4j bench}'s output with a one-GPU line of the model, to which compute is scaled; or null
     * @param lora the config's {@code lora.*}: with a rank, the base is planned frozen and the adapters trained; or null
     * @param fp8Recipe fsdp.fp8_recipe: how fp8 products scale their operands; null for the default (tensorwise)
     * @param blocksNotCheckpointed fsdp.blocks_not_checkpointed: the last blocks that keep every activation
     * @param blocksSelective fsdp.blocks_selective: the blocks before those checkpointed selectively
     * @param trainStrategy fsdp.strategy of the train config, for the line of what auto runs; null: full_shard
     * @param documentTokens the length of the documents packed into each sequence (chat conversations); 0: one
     *                       document a sequence
     */
    public record Request(String model, int nodes, int gpusPerNode, String gpu, double intraGbps, Double interGbps,
                          int seq, int batch, String checkpointing, String paramDtype, String reduceDtype,
                          List<Integer> gpuCounts, Path plot, boolean json, boolean replicaStream,
                          boolean cpuOffload, int prefetch, String paramCopy, Path ncclTest, Path bench,
                          LoraSection lora, Fp8Recipe fp8Recipe, int blocksNotCheckpointed, int blocksSelective,
                          ShardingStrategy trainStrategy, int documentTokens) {
        public Request {
            gpuCounts = List.copyOf(gpuCounts);
        }
    }

    public static void run(Request r, PrintStream out) {
        ModelConfig config = modelConfig(r.model());
        ModelShape model = ModelShape.of(config, r.lora() == null ? null : LoraSpec.of(r.lora(), config),
                r.lora() != null && r.lora().quantized());
        if (r.intraGbps() < 0 || (r.interGbps() != null && r.interGbps() <= 0)) {
            throw new UserError("--intra-gbps must be positive (or 0 for the measured NVLink figures) and --inter-gbps positive");
        }
        Cluster cluster = cluster(r);
        List<ActivationCheckpointing> all = List.of(ActivationCheckpointing.FULL,
                ActivationCheckpointing.FULL_KEEP_ATTENTION, ActivationCheckpointing.SELECTIVE,
                ActivationCheckpointing.NONE);
        List<ActivationCheckpointing> modes = r.checkpointing() == null ? all
                : List.of(choice("--checkpointing", r.checkpointing(), all));
        Workload workload = new Workload(r.seq(), r.batch(), modes.getFirst(),
                choice("--param-dtype", r.paramDtype(), List.of(Precision.values())),
                choice("--reduce-dtype", r.reduceDtype(), List.of(Precision.values())), r.cpuOffload(), r.prefetch(),
                choice("--param-copy", r.paramCopy(), List.of(ParamCopy.values())),
                r.fp8Recipe() == null ? FsdpSection.DEFAULT_FP8_RECIPE : r.fp8Recipe(), r.blocksNotCheckpointed(),
                r.blocksSelective(), r.documentTokens());
        for (int gpus : r.gpuCounts()) {
            if (gpus < 1 || (gpus > r.gpusPerNode() && gpus % r.gpusPerNode() != 0)) {
                throw new UserError("--gpu-counts: each count must be positive, and at most --gpus-per-node ("
                        + r.gpusPerNode() + ") or a multiple of it; got " + gpus);
            }
        }
        MeasuredStep measured = null;
        if (r.bench() != null) {
            if (r.cpuOffload()) {
                throw new UserError("--bench scales the GPU's compute to a measured step; the offloaded step's host "
                        + "optimizer is not scaled by it: leave out --bench or --cpu-offload");
            }
            measured = MeasuredStep.read(r.bench(), r.model(), model, cluster.gpu(), ComputeModel.Calibration.h200());
        }
        Planner.Options options = new Planner.Options(ComputeModel.Calibration.h200(), r.replicaStream(),
                measured == null ? 1 : measured.computeScale());
        Planner.Plan plan = Planner.plan(model, cluster, workload, modes, options,
                r.trainStrategy() == null ? ShardingStrategy.FULL_SHARD : r.trainStrategy());
        var scaling = Planner.scaling(model, cluster, workload, r.gpuCounts(), options);
        String scalingMode = modes.getFirst().spelling();
        out.print(r.json() ? PlanReport.json(r.model(), plan, scaling, scalingMode) + "\n"
                : PlanReport.text(r.model(), plan, scaling, scalingMode));
        if (r.ncclTest() != null && !r.json()) {
            out.println("links measured by nccl-test: " + r.ncclTest());
        }
        if (measured != null && !r.json()) {
            out.printf(java.util.Locale.ROOT, "compute scaled by %.3f: fsdp4j bench measured %s's step on one %s at "
                            + "%.1f ms (%s), the model says %.1f ms%n", measured.computeScale(), r.model(),
                    measured.device(), measured.stepSeconds() * 1e3, r.bench(), measured.modelledSeconds() * 1e3);
        }
        if (r.plot() != null) {
            ScalingChart.write(r.plot(), "%s on %s, %d per node, %.0f Gb/s per node (checkpointing %s)".formatted(
                    r.model(), cluster.gpu().name(), cluster.gpusPerNode(), cluster.interNodeBandwidth() * 8 / 1e9,
                    scalingMode), scaling);
            if (!r.json()) {
                out.println("plot: " + r.plot());
            }
        }
    }

    /**
     * The links: measured by nccl-test where the file has them, else as given (--intra-gbps for every in-node
     * collective, --inter-gbps), else the GPU's measured NVLink figures and 400 Gb/s. A link both measured and given
     * is refused: which one to believe is the user's to say.
     */
    static Cluster cluster(Request r) {
        GpuSpec gpu = GpuSpec.of(r.gpu());
        double intra = r.intraGbps() * 1e9 / 8, inter = (r.interGbps() == null ? 400 : r.interGbps()) * 1e9 / 8;
        Cluster given = Cluster.of(gpu, r.nodes(), r.gpusPerNode(), intra, inter);
        if (r.ncclTest() == null) {
            return given;
        }
        MeasuredLinks m = MeasuredLinks.read(r.ncclTest());
        if (!m.intraBusBw().isEmpty() && r.intraGbps() > 0) {
            throw new UserError("--intra-gbps and --nccl-test both give the links inside a node (" + r.ncclTest()
                    + " measured groups on one node); give one of them");
        }
        if (m.interNodeBandwidth() != null && r.interGbps() != null) {
            throw new UserError("--inter-gbps and --nccl-test both give the network between nodes (" + r.ncclTest()
                    + " measured groups across nodes); give one of them");
        }
        return new Cluster(gpu, r.nodes(), r.gpusPerNode(),
                m.intraBusBw().getOrDefault(Collective.ALL_GATHER, given.allGatherBusBw()),
                m.intraBusBw().getOrDefault(Collective.REDUCE_SCATTER, given.reduceScatterBusBw()),
                m.intraBusBw().getOrDefault(Collective.ALL_REDUCE, given.allReduceBusBw()),
                m.interNodeBandwidth() != null ? m.interNodeBandwidth() : inter);
    }

    /** A Hugging Face model directory when one exists at that path, otherwise a preset name. */
    static ModelConfig modelConfig(String model) {
        Path dir = Path.of(model);
        if (Files.isDirectory(dir)) {
            return HfConfig.read(dir);
        }
        if (model.contains("/") || model.contains(java.io.File.separator)) {
            throw new UserError("--model: no model directory " + model);
        }
        return ModelConfig.preset(model);
    }

    private static <E extends Enum<E> & ConfigChoice> E choice(String option, String value, List<E> allowed) {
        for (E e : allowed) {
            if (e.spelling().equals(value)) {
                return e;
            }
        }
        var names = allowed.stream().map(ConfigChoice::spelling).toList();
        throw new UserError(option + " must be one of " + String.join(", ", names) + ", got '" + value + "'");
    }
}
