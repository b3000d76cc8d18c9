package io.fsdp4j.cli;

import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.train.Benchmark;
import io.fsdp4j.train.TrainingInputs;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code fsdp4j bench [--set key=value ...]}: synthetic-token throughput, one JSON line. */
@Command(
        name = "bench",
        header = "Synthetic-token training throughput, measured as the PyTorch FSDP2 peer benchmark measures it.",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = {
            "Synthetic-token training throughput, as the PyTorch FSDP2 peer benchmark measures it: random "
                    + "weights, random tokens, batch 1 per rank, warmup steps then timed steps; prints one JSON line "
                    + "with the peer's field names (tok_s, tok_s_gpu, mfu, step_s, peak_reserved_gib, ...).",
        })
final class BenchCommand implements Callable<Integer> {
    @ParentCommand
    private Main main;

    @Option(names = "--set", paramLabel = "KEY=VALUE",
            description = "override one config key, as for 'fsdp4j train' (model.preset, data.seq_len, dist.ranks, "
                    + "fsdp.*); repeatable")
    private List<String> sets = new ArrayList<>();

    @Option(names = "--warmup", defaultValue = "5", paramLabel = "N", description = "untimed steps first (default: ${DEFAULT-VALUE})")
    private int warmup;

    @Option(names = "--steps", defaultValue = "15", paramLabel = "N", description = "timed steps (default: ${DEFAULT-VALUE})")
    private int steps;

    @Option(names = "--profile", description = "profile one more step on the GPU: compute, exposed communication, "
            + "host gaps, and the operations that take the most time (rank 0)")
    private boolean profile;

    @Option(names = "--profile-ops", paramLabel = "N", description = "with --profile: how many operations the table "
            + "lists, the largest first; 0 lists every one (default: " + Benchmark.PROFILE_OPS + ")")
    private Integer profileOps;

    /** Keys of `train`'s config that bench would not use, and what to use instead. */
    private static final Map<String, String> NOT_READ = Map.of(
            "data.train", "bench runs on random tokens; 'fsdp4j train' trains on data.train",
            "data.eval", "bench runs on random tokens and evaluates nothing; 'fsdp4j train' or 'fsdp4j eval' do",
            "train.steps", "bench runs --warmup untimed then --steps timed steps; give those instead");

    /** A key set for bench that it would silently not use is refused (one line), not ignored. */
    static void refuseKeysBenchDoesNotRead(List<String> sets) {
        for (String set : sets) {
            String key = set.contains("=") ? set.substring(0, set.indexOf('=')).trim() : set.trim();
            String why = NOT_READ.get(key);
            if (why != null) {
                throw new io.fsdp4j.UserError("fsdp4j bench does not read '" + key + "': " + why);
            }
        }
    }

    /** The PyTorch peer benchmark's sequence length, bench's default. */
    static final int PEER_SEQ = 2048;

    @Override
    public Integer call() {
        if (warmup < 0 || steps < 1) {
            throw new io.fsdp4j.UserError("--warmup must be >= 0 and --steps >= 1");
        }
        if (profileOps != null && (!profile || profileOps < 0)) {
            throw new io.fsdp4j.UserError("--profile-ops N goes with --profile, N >= 0 (0 lists every operation)");
        }
        refuseKeysBenchDoesNotRead(sets);
        List<String> all = new ArrayList<>(List.of("data.seq_len=" + PEER_SEQ, "train.batch_size=1"));
        all.addAll(sets);
        TrainConfig config = TrainConfig.load(null, all);
        // the peer's 2048 tokens unless the model cannot take them (the default preset, tiny, has 1024 positions) or
        // the user chose a length
        int positions = TrainingInputs.modelConfig(config).maxPositions();
        boolean lengthChosen = sets.stream().anyMatch(s -> s.startsWith("data.seq_len="));
        if (!lengthChosen && positions < PEER_SEQ) {
            config = config.with("data.seq_len=" + positions);
            main.err().printf("fsdp4j bench: %d tokens a sequence, the model's max_position_embeddings (the peer's"
                    + " default, %d, is longer)%n", positions, PEER_SEQ);
        }
        Benchmark.run(config, warmup, steps, profile, profileOps == null ? Benchmark.PROFILE_OPS : profileOps,
                main.out());
        return 0;
    }
}
