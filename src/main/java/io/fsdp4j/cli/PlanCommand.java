package io.fsdp4j.cli;

import io.fsdp4j.plan.Planning;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j plan --model PRESET|DIR --nodes N --gpus-per-node G ...}: predictions before spending the cluster. */
@Command(
        name = "plan",
        header = "Predicted memory and step time per strategy for a model and a topology.",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Predicted memory and step time per strategy for a model and a topology:",
            "per-GPU memory of each sharding strategy and checkpointing mode, step time",
            "(compute, collectives, what is exposed), tokens/s, the fastest configuration",
            "that fits, and tokens/s against GPU count. How it predicts, its calibration",
            "and its accuracy against measured runs: docs/plan.md.",
        })
final class PlanCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--model", required = true, paramLabel = "PRESET|DIR",
            description = "a preset (qwen2.5-7b, qwen2.5-1.5b, mistral-7b, llama-3-8b, ...) or a Hugging Face model directory")
    private String model;

    @Option(names = "--nodes", defaultValue = "1", paramLabel = "N", description = "nodes (default: ${DEFAULT-VALUE})")
    private int nodes;

    @Option(names = "--gpus-per-node", defaultValue = "8", paramLabel = "G",
            description = "GPUs per node, linked by NVLink (default: ${DEFAULT-VALUE})")
    private int gpusPerNode;

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

    @Option(names = "--seq", defaultValue = "2048", description = "tokens per sequence (default: ${DEFAULT-VALUE})")
    private int seq;

    @Option(names = "--batch", defaultValue = "1", description = "sequences per GPU per step (default: ${DEFAULT-VALUE})")
    private int batch;

    @Option(names = "--checkpointing", paramLabel = "MODE",
            description = "none, selective or full (default: all three; the scaling table uses full)")
    private String checkpointing;

    @Option(names = "--param-dtype", defaultValue = "bf16", paramLabel = "DTYPE",
            description = "gathered parameters and activations: bf16 or fp32 (default: ${DEFAULT-VALUE})")
    private String paramDtype;

    @Option(names = "--reduce-dtype", defaultValue = "fp32", paramLabel = "DTYPE",
            description = "gradient reduction: fp32 or bf16 (default: ${DEFAULT-VALUE})")
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

    @Option(names = "--prefetch", paramLabel = "N", defaultValue = "1",
            description = "fsdp.prefetch: units ahead of the computing one whose all-gather is started (0 to 8; "
                    + "default: ${DEFAULT-VALUE}); each holds a unit's full parameters")
    private int prefetch;

    @Override
    public Integer call() {
        List<Integer> counts = gpuCounts;
        if (counts.isEmpty()) {
            counts = new ArrayList<>();
            for (int n = 1; n <= 4096; n *= 2) {
                counts.add(n);
            }
        }
        Planning.run(new Planning.Request(model, nodes, gpusPerNode, gpu, intraGbps, interGbps, seq, batch,
                checkpointing, paramDtype, reduceDtype, counts, plot, json, replicaStream, cpuOffload,
                prefetch, ncclTest, bench), main.out());
        return 0;
    }
}
