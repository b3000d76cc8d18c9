package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.config.FsdpSection;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.plan.Planning;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/**
 * {@code fsdp4j plan [CONFIG.yaml] [--set key=value ...] [--model PRESET|DIR --nodes N --gpus-per-node G ...]}:
 * predictions before spending the cluster, for the keys a train config gives (each option names its key).
 */
@Command(
        name = "plan",
        header = "Predicted memory and step time per strategy for a model and a topology.",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Predicted memory and step time per strategy for a model and a topology: per-GPU memory of each "
                    + "sharding strategy and checkpointing mode, step time (compute, collectives, what is exposed), "
                    + "tokens/s, the fastest configuration that fits, and tokens/s against GPU count. A train config "
                    + "(and --set) gives the model and the keys it sets; each option names the key it stands for. How "
                    + "it predicts, its calibration and its accuracy against measured runs: docs/plan.md.",
        })
final class PlanCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Parameters(index = "0", arity = "0..1", paramLabel = "CONFIG.yaml",
            description = "a train config: its model, data.seq_len, train.batch_size, fsdp.*, dist.* and lora.* keys"
                    + " are planned (the options below override them; with lora.rank > 0 the base is frozen in"
                    + " fsdp.param_dtype and only the adapters have masters, gradients and optimizer state)")
    private Path config;

    @Option(names = "--set", paramLabel = "KEY=VALUE",
            description = "override one config key, as for 'fsdp4j train' (model.preset, data.seq_len, fsdp.param_dtype,"
                    + " dist.nnodes, ...); repeatable")
    private List<String> sets = new ArrayList<>();

    @Option(names = "--model", paramLabel = "PRESET|DIR",
            description = "model.preset or model.path: a preset (qwen2.5-7b, qwen2.5-1.5b, mistral-7b, llama-3-8b, ...)"
                    + " or a Hugging Face model directory")
    private String model;

    @Option(names = "--nodes", paramLabel = "N", description = "dist.nnodes: nodes (default: 1)")
    private Integer nodes;

    @Option(names = "--gpus-per-node", paramLabel = "G",
            description = "dist.ranks: GPUs per node, linked by NVLink (default: 8)")
    private Integer gpusPerNode;

    @Option(names = "--gpu", defaultValue = "h200", paramLabel = "GPU", description = "h200 or h100 (default: ${DEFAULT-VALUE})")
    private String gpu;

    @Option(names = "--intra-gbps", defaultValue = "0", paramLabel = "X",
            description = "NVLink bus bandwidth of in-node collectives, Gb/s (default: measured on H200: 2520/2600/2824 "
                    + "for all-gather/reduce-scatter/all-reduce)")
    private double intraGbps;

    @Option(names = "--inter-gbps", paramLabel = "Y",
            description = "network bandwidth of each node, Gb/s each way, all its NICs together (eight 400G NICs: 3200; "
                    + "default: 400)")
    private Double interGbps;

    @Option(names = "--nccl-test", paramLabel = "FILE",
            description = "links measured by 'fsdp4j nccl-test --json' on the job's nodes (its output, as a file): "
                    + "groups on one node give the NVLink bus bandwidths, groups across nodes the network's")
    private java.nio.file.Path ncclTest;

    @Option(names = "--bench", paramLabel = "FILE",
            description = "fsdp4j bench's output with a one-GPU line of this model: every compute time is scaled so "
                    + "that the one-GPU step is the one measured (another GPU, clock or software stack)")
    private java.nio.file.Path bench;

    @Option(names = "--seq", paramLabel = "T", description = "data.seq_len: tokens per sequence (default: 2048)")
    private Integer seq;

    @Option(names = "--document-tokens", paramLabel = "N",
            description = "documents of about N tokens packed into each sequence (chat conversations: data.pack): "
                    + "attention within each document, on fsdp4j's kernels (default: one document a sequence)")
    private Integer documentTokens;

    @Option(names = "--batch", paramLabel = "B", description = "train.batch_size: sequences per GPU per step (default: 1)")
    private Integer batch;

    @Option(names = "--checkpointing", paramLabel = "MODE",
            description = "fsdp.activation_checkpointing: none, selective, full or full_keep_attention (default: all"
                    + " four; the scaling table uses full)")
    private String checkpointing;

    @Option(names = "--param-dtype", paramLabel = "DTYPE",
            description = "fsdp.param_dtype: gathered parameters and activations, bf16, fp32 or fp16 (default: bf16)")
    private String paramDtype;

    @Option(names = "--reduce-dtype", paramLabel = "DTYPE",
            description = "fsdp.reduce_dtype: gradient reduction, fp32, bf16 or fp16 (default: fp32)")
    private String reduceDtype;

    @Option(names = "--gpu-counts", split = ",", paramLabel = "N,N,...",
            description = "GPU counts of the scaling table (default: 1,2,4,...,4096)")
    private List<Integer> gpuCounts = new ArrayList<>();

    @Option(names = "--plot", paramLabel = "FILE.png", description = "draw the scaling table as a PNG chart")
    private Path plot;

    @Option(names = "--json", description = "print one JSON object instead of tables")
    private boolean json;

    @Option(names = "--replica-stream",
            description = "what-if: run the replicas' gradient all-reduce (hybrid strategies) on a communication "
                    + "stream of its own instead of after the reduce-scatter on the one stream")
    private boolean replicaStream;

    @Option(names = "--cpu-offload",
            description = "fsdp.cpu_offload: master and gradient shards and AdamW moments in host memory, AdamW on the host")
    private boolean cpuOffload;

    @Option(names = "--prefetch", paramLabel = "N",
            description = "fsdp.prefetch: units ahead of the computing one whose all-gather is started (0 to 8; "
                    + "default: 1); each holds a unit's full parameters")
    private Integer prefetch;

    @Option(names = "--blocks-not-checkpointed", paramLabel = "N",
            description = "fsdp.blocks_not_checkpointed: the model's last N blocks keep every activation whatever the"
                    + " checkpointing mode (default: 0)")
    private Integer blocksNotCheckpointed;

    @Option(names = "--blocks-selective", paramLabel = "N",
            description = "fsdp.blocks_selective: the N blocks before those not checkpointed are checkpointed"
                    + " selectively where the mode recomputes whole blocks (full, full_keep_attention) (default: 0)")
    private Integer blocksSelective;

    @Option(names = "--param-copy", paramLabel = "COPY",
            description = "fsdp.param_copy: per_gather (the fp32 master shard rounded to the parameter dtype at each "
                    + "gather) or kept (that copy kept beside the master, 2 bytes a trained parameter per shard, "
                    + "written by AdamW; no rounding at the gathers) (default: per_gather)")
    private String paramCopy;

    @Override
    public Integer call() {
        List<Integer> counts = gpuCounts;
        if (counts.isEmpty()) {
            counts = new ArrayList<>();
            for (int n = 1; n <= 4096; n *= 2) {
                counts.add(n);
            }
        }
        io.fsdp4j.config.LoraSection lora = null;
        io.fsdp4j.config.Fp8Recipe fp8Recipe = null; // tensorwise
        io.fsdp4j.config.ShardingStrategy trainStrategy = null; // full_shard, train's default
        boolean packedWithoutLength = false;
        if (config != null || !sets.isEmpty()) { // the train config's keys, where no option says otherwise
            List<String> all = new ArrayList<>(sets);
            String text = readQuietly(config) + String.join("\n", sets);
            // the GPUs a fine-tune's defaults are for (bf16, a rank per GPU): --gpus-per-node, or 8
            TrainConfig c = TrainConfig.load(config, all, gpusPerNode != null ? gpusPerNode : 8, null);
            var m = c.model();
            model = model != null ? model : m.path() != null ? m.path().toString() : m.preset();
            nodes = nodes != null ? nodes : c.dist().nnodes();
            if (gpusPerNode == null && (c.fineTune() || text.contains("ranks"))) { // a preset's default is CPU ranks'
                gpusPerNode = c.dist().ranks();
            }
            seq = seq != null ? seq : c.data().autoSeqLen() ? null : c.data().seqLen();
            batch = batch != null ? batch : c.train().batchSize();
            paramDtype = paramDtype != null ? paramDtype : c.fsdp().paramDtype().spelling();
            reduceDtype = reduceDtype != null ? reduceDtype : c.fsdp().reduceDtype().spelling();
            boolean modeNamed = text.contains("activation_checkpointing") && !c.fsdp().autoCheckpointing(); // auto: all
            if (checkpointing == null && modeNamed) {
                checkpointing = c.fsdp().activationCheckpointing().spelling();
            }
            cpuOffload |= c.fsdp().cpuOffload();
            prefetch = prefetch != null ? prefetch : c.fsdp().prefetch();
            paramCopy = paramCopy != null ? paramCopy : c.fsdp().paramCopy().spelling();
            blocksNotCheckpointed = blocksNotCheckpointed != null ? blocksNotCheckpointed
                    : c.fsdp().blocksNotCheckpointed();
            blocksSelective = blocksSelective != null ? blocksSelective : c.fsdp().blocksSelective();
            lora = c.lora(); // lora.rank > 0: the base frozen, the adapters trained
            fp8Recipe = c.fsdp().fp8Recipe();
            trainStrategy = c.fsdp().strategy();
            packedWithoutLength = c.data().pack() && documentTokens == null && !json;
        }
        if (model == null) {
            throw new UserError("give a model: --model PRESET|DIR, or a train config (or --set model.preset=...)");
        }
        Planning.run(new Planning.Request(model, nodes == null ? 1 : nodes, gpusPerNode == null ? 8 : gpusPerNode, gpu,
                intraGbps, interGbps, seq == null ? 2048 : seq, batch == null ? 1 : batch, checkpointing,
                paramDtype == null ? "bf16" : paramDtype, reduceDtype == null ? "fp32" : reduceDtype, counts, plot,
                json, replicaStream, cpuOffload, prefetch == null ? 1 : prefetch,
                paramCopy == null ? FsdpSection.DEFAULT_PARAM_COPY.spelling() : paramCopy, ncclTest, bench, lora,
                fp8Recipe, blocksNotCheckpointed == null ? 0 : blocksNotCheckpointed,
                blocksSelective == null ? 0 : blocksSelective, trainStrategy,
                documentTokens == null ? 0 : documentTokens),
                main.out());
        if (packedWithoutLength) {
            main.out().println("note: data.pack packs documents into each sequence; give --document-tokens N (their "
                    + "mean length) to time attention within them, as a run with auto checkpointing does from its data");
        }
        return 0;
    }

    /** A config file's text, to tell which keys it gives; empty when there is none (its errors come from loading it). */
    private static String readQuietly(Path file) {
        try {
            return file == null ? "" : java.nio.file.Files.readString(file);
        } catch (java.io.IOException | RuntimeException e) {
            return "";
        }
    }
}
