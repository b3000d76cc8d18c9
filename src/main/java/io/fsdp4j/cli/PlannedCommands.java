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

    @Command(name = "prepare", mixinStandardHelpOptions = true, versionProvider = VersionProvider.class,
            description = "Tokenize a dataset (Alpaca, SQuAD v1.1, plain text) into token files (not yet available).")
    static final class Prepare extends Planned {
        @Override
        String name() {
            return "prepare";
        }
    }

    @Command(name = "eval", mixinStandardHelpOptions = true, versionProvider = VersionProvider.class,
            description = "Loss and perplexity, and generation-based exact match and F1 (not yet available).")
    static final class Eval extends Planned {
        @Override
        String name() {
            return "eval";
        }
    }

    @Command(name = "launch", mixinStandardHelpOptions = true, versionProvider = VersionProvider.class,
            description = "Start the processes of a multi-process or multi-node job (not yet available).")
    static final class Launch extends Planned {
        @Override
        String name() {
            return "launch";
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

    @Command(name = "plan", mixinStandardHelpOptions = true, versionProvider = VersionProvider.class,
            description = "Predicted memory and step time per strategy for a model and a topology (not yet available).")
    static final class Plan extends Planned {
        @Override
        String name() {
            return "plan";
        }
    }
}
