package io.fsdp4j.cli;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code fsdp4j bench [--set key=value ...]}: not built yet. */
@Command(
        name = "bench",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = "Synthetic-token throughput benchmark; prints one JSON line (not yet available).")
final class BenchCommand implements Callable<Integer> {
    @Option(names = "--set", paramLabel = "KEY=VALUE",
            description = "override one config key, as for 'fsdp4j train'; repeatable")
    private List<String> sets = new ArrayList<>();

    @Override
    public Integer call() {
        throw PlannedCommands.notAvailable("bench");
    }
}
