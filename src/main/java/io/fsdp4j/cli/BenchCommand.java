package io.fsdp4j.cli;

import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.train.Benchmark;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j bench [--set key=value ...]}: synthetic-token throughput, one JSON line. */
@Command(
        name = "bench",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Synthetic-token training throughput, as the PyTorch FSDP2 peer benchmark measures it: random weights,",
            "random tokens, batch 1 per rank, warmup steps then timed steps; prints one JSON line with the peer's",
            "field names (tok_s, tok_s_gpu, mfu, step_s, peak_reserved_gib, ...).",
        })
final class BenchCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--set", paramLabel = "KEY=VALUE",
            description = "override one config key, as for 'fsdp4j train' (model.preset, data.seq_len, dist.ranks, "
                    + "fsdp.*); repeatable")
    private List<String> sets = new ArrayList<>();

    @Option(names = "--warmup", defaultValue = "5", description = "untimed steps first (default: ${DEFAULT-VALUE})")
    private int warmup;

    @Option(names = "--steps", defaultValue = "15", description = "timed steps (default: ${DEFAULT-VALUE})")
    private int steps;

    @Option(names = "--profile", description = "profile one more step on the GPU: compute, exposed communication, "
            + "host gaps, and the operations that take the most time (rank 0)")
    private boolean profile;

    @Option(names = "--profile-ops", paramLabel = "N", description = "with --profile: how many operations the table "
            + "lists, the largest first; 0 lists every one (default: " + Benchmark.PROFILE_OPS + ")")
    private Integer profileOps;

    @Override
    public Integer call() {
        if (warmup < 0 || steps < 1) {
            throw new io.fsdp4j.UserError("--warmup must be >= 0 and --steps >= 1");
        }
        if (profileOps != null && (!profile || profileOps < 0)) {
            throw new io.fsdp4j.UserError("--profile-ops N goes with --profile, N >= 0 (0 lists every operation)");
        }
        List<String> all = new ArrayList<>(List.of("data.seq_len=2048", "train.batch_size=1"));
        all.addAll(sets);
        Benchmark.run(TrainConfig.load(null, all), warmup, steps, profile,
                profileOps == null ? Benchmark.PROFILE_OPS : profileOps, main.out());
        return 0;
    }
}
