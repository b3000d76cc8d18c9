package io.fsdp4j.cli;

import io.fsdp4j.UserError;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Unmatched;

/**
 * The commands of the interface that are not built yet. Each takes any arguments and fails with a
 * {@link UserError}, so every spelling of them says the same thing. Building one means giving it its own class.
 */
final class PlannedCommands {
    private PlannedCommands() {}

    static UserError notAvailable(String command) {
        return new UserError("'" + command + "' is not available in this version of fsdp4j yet");
    }

    /** Accepts any arguments and fails. */
    abstract static class Planned implements Callable<Integer> {
        @Unmatched
        private List<String> arguments = new ArrayList<>();

        abstract String name();

        @Override
        public Integer call() {
            throw notAvailable(name());
        }
    }

    @Command(name = "nccl-test", mixinStandardHelpOptions = true, versionProvider = VersionProvider.class,
            description = "Collective bandwidth self-test on the job's mesh (not yet available).")
    static final class NcclTest extends Planned {
        @Override
        String name() {
            return "nccl-test";
        }
    }
}
