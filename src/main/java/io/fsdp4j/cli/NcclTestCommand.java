package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.job.LocalRanks;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.train.CollectiveBandwidth;
import io.fsdp4j.report.MetricsFile;
import io.fsdp4j.train.JobSetup;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j nccl-test [CONFIG.yaml] [--set ...] [--min-bytes B] [--max-bytes B] ... [--json]}. */
@Command(
        name = "nccl-test",
        header = "Collective bandwidth self-test on the job's mesh.",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Collective bandwidth self-test on the job's mesh (the dist.* and fsdp.* keys of a train config): "
                    + "all-gather (bf16), reduce-scatter and all-reduce (fp32) over a range of sizes on each group of "
                    + "the mesh (world, shard groups, replicate groups), with nccl-tests' definitions: size = the whole "
                    + "buffer, time = mean per call (slowest member), algbw = size / time, busbw = algbw x (n-1)/n "
                    + "(all-gather, reduce-scatter) or x 2(n-1)/n (all-reduce). Runs on GPUs through NCCL, or on CPU "
                    + "ranks (in one process or several, under fsdp4j launch). Each first call is checked for the right "
                    + "values.",
        })
final class NcclTestCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Parameters(index = "0", arity = "0..1", paramLabel = "CONFIG.yaml", description = "a train config (its mesh)")
    private Path config;

    @Option(names = "--set", paramLabel = "KEY=VALUE",
            description = "override one config key, as for 'fsdp4j train' (dist.*, fsdp.strategy, fsdp.shard_size); "
                    + "repeatable")
    private List<String> sets = new ArrayList<>();

    @Option(names = "--min-bytes", paramLabel = "SIZE", defaultValue = "1K",
            description = "smallest buffer: bytes, or with K, M, G (x1024) (default: ${DEFAULT-VALUE})")
    private String minBytes;

    @Option(names = "--max-bytes", paramLabel = "SIZE", defaultValue = "16M",
            description = "largest buffer (default: ${DEFAULT-VALUE})")
    private String maxBytes;

    @Option(names = "--factor", defaultValue = "4", paramLabel = "F", description = "size step factor (default: ${DEFAULT-VALUE})")
    private int factor;

    @Option(names = "--warmup", defaultValue = "5", paramLabel = "N", description = "untimed calls per size (default: ${DEFAULT-VALUE})")
    private int warmup;

    @Option(names = "--iters", defaultValue = "20", paramLabel = "N", description = "timed calls per size (default: ${DEFAULT-VALUE})")
    private int iters;

    @Option(names = "--json", description = "one JSON line per measurement instead of the table")
    private boolean json;

    @Override
    public Integer call() {
        var options = new CollectiveBandwidth.Options(bytes(minBytes, "--min-bytes"), bytes(maxBytes, "--max-bytes"),
                factor, warmup, iters);
        TrainConfig effective = TrainConfig.load(config, sets);
        DeviceMesh mesh = JobSetup.mesh(effective);
        LocalRanks world = JobSetup.localRanks(effective, mesh);
        PrintStream out = main.out();
        int ranksPerNode = JobSetup.layout(effective).ranksPerNode(); // under launch, from its variables
        if (!json && world.ranks().contains(0)) {
            out.printf(Locale.ROOT, "# nccl-test: %d ranks on %s, mesh %d x %d (replicas x shard group), %d calls per "
                    + "size after %d warmup%n", mesh.worldSize(), world.devices(), mesh.replicas(), mesh.shardSize(),
                    iters, warmup);
            out.println(CollectiveBandwidth.TABLE_HEADER);
        }
        RankThreads.run(world, r -> {
            RankContext rank = world.open(r);
            try {
                CollectiveBandwidth.measure(rank, options, row -> {
                    out.println(json ? MetricsFile.json(jsonLine(row, mesh, ranksPerNode)) : row.tableLine());
                    out.flush();
                });
            } finally {
                world.close(rank);
            }
        });
        return 0;
    }

    /**
     * One measurement as a JSON object; with where its group lies (nodes: how many nodes its ranks are on;
     * groups_per_node: how many groups of its kind share a node's network while they run at once), so that
     * {@code fsdp4j plan --nccl-test} can tell the links inside a node from the network between nodes.
     */
    private static Map<String, Object> jsonLine(CollectiveBandwidth.Row row, DeviceMesh mesh, int ranksPerNode) {
        Map<String, Object> line = new LinkedHashMap<>();
        DeviceMesh.Span span = mesh.span(row.group(), ranksPerNode);
        line.put("group", row.group());
        line.put("ranks", row.ranks());
        line.put("nodes", span.nodes());
        line.put("groups_per_node", span.groupsPerNode());
        line.put("collective", row.collective().spelling);
        line.put("dtype", row.collective().dtype.name().toLowerCase(Locale.ROOT));
        line.put("bytes", row.bytes());
        line.put("count", row.count());
        line.put("time_us", row.seconds() * 1e6);
        line.put("algbw_gbs", row.algBw() / 1e9);
        line.put("busbw_gbs", row.busBw() / 1e9);
        return line;
    }

    /** "4096", "1K", "64M", "1G" (powers of 1024). */
    static long bytes(String text, String option) {
        String s = text.strip().toUpperCase(Locale.ROOT);
        long unit = 1;
        if (!s.isEmpty() && "KMG".indexOf(s.charAt(s.length() - 1)) >= 0) {
            unit = 1L << (10 * ("KMG".indexOf(s.charAt(s.length() - 1)) + 1));
            s = s.substring(0, s.length() - 1);
        }
        try {
            long n = Long.parseLong(s);
            if (n >= 1) {
                return Math.multiplyExact(n, unit);
            }
        } catch (NumberFormatException | ArithmeticException e) {
            // reported below
        }
        throw new UserError(option + " '" + text + "' is not a size: give bytes, or a number with K, M or G (e.g. 64M)");
    }
}
