package io.fsdp4j.cli;

import io.fsdp4j.job.Launcher;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;
import picocli.CommandLine;

/**
 * {@code fsdp4j}: the command line. Each subcommand is a class of this package; errors of every command are
 * reported by {@link ErrorHandler}. Commands print results to {@link #out()} (standard output) and nothing else:
 * diagnostics go to standard error.
 */
@Command(
        name = "fsdp4j",
        mixinStandardHelpOptions = true,
        versionProvider = VersionProvider.class,
        usageHelpAutoWidth = true,
        description = "Fully sharded data parallel (FSDP) training of large language models in Java.",
        subcommands = {
            TrainCommand.class,
            ScoreCommand.class,
            BenchCommand.class,
            PrepareCommand.class,
            EvalCommand.class,
            ExportCommand.class,
            LaunchCommand.class,
            NcclTestCommand.class,
            PlanCommand.class,
            TokenizeCommand.class,
            DoctorCommand.class,
        },
        footer = {"", "Run 'fsdp4j COMMAND --help' for a command's options. Set FSDP4J_DEBUG=1 for stack traces."})
public final class Main implements Callable<Integer> {
    private final PrintStream out;
    private final PrintStream err;

    @Spec
    private CommandSpec spec;

    private Main(PrintStream out, PrintStream err) {
        this.out = out;
        this.err = err;
    }

    public static void main(String[] args) {
        boolean debug = "1".equals(System.getenv("FSDP4J_DEBUG"));
        // a process of a job ends when its launcher dies, rather than train on unsupervised
        Launcher.endWithLauncher(System.getenv(), Duration.ofSeconds(60), line -> {
            System.err.println(line);
            System.err.flush();
        });
        System.exit(execute(args, System.out, System.err, debug));
    }

    /**
     * Runs one command line in this process and returns its exit status, one of {@link io.fsdp4j.ExitStatus}: 0
     * success, 2 bad input (a {@link io.fsdp4j.UserError} or a usage error), 3 a run that diverged, 4 a node left
     * out of its job, 5 another process of the job failed, 6 stopped by a signal after saving, 1 an internal error.
     * With {@code debug}, internal errors print their stack trace.
     */
    public static int execute(String[] args, PrintStream out, PrintStream err, boolean debug) {
        var handler = new ErrorHandler(err, debug);
        try {
            return commandLine(out, err, handler).execute(args);
        } catch (Throwable t) {
            // Errors (out of memory, stack overflow) that picocli does not route to the handler.
            return handler.report(t);
        } finally {
            out.flush();
            err.flush();
        }
    }

    /** The configured command line, for callers that want picocli's API; {@link #execute} is the usual entry. */
    public static CommandLine commandLine(PrintStream out, PrintStream err, boolean debug) {
        return commandLine(out, err, new ErrorHandler(err, debug));
    }

    private static CommandLine commandLine(PrintStream out, PrintStream err, ErrorHandler handler) {
        var cl = new CommandLine(new Main(out, err));
        cl.setOut(new PrintWriter(out, true, out.charset()));
        cl.setErr(new PrintWriter(err, true, err.charset()));
        cl.setExecutionExceptionHandler(handler);
        cl.setParameterExceptionHandler(handler);
        // a command's header is its line in 'fsdp4j --help'; its own help starts at the usage, then its description
        // (which says the same at more length), so that nothing is printed twice
        for (CommandLine sub : cl.getSubcommands().values()) {
            List<String> sections = new ArrayList<>(sub.getHelpSectionKeys());
            sections.remove(CommandLine.Model.UsageMessageSpec.SECTION_KEY_HEADER_HEADING);
            sections.remove(CommandLine.Model.UsageMessageSpec.SECTION_KEY_HEADER);
            sub.setHelpSectionKeys(sections);
        }
        return cl;
    }

    /** Where commands print their results (standard output). */
    PrintStream out() {
        return out;
    }

    /** Where commands print notes that are not their results (standard error). */
    PrintStream err() {
        return err;
    }

    /** {@code fsdp4j} alone: the usage, on standard error, and the usage-error status. */
    @Override
    public Integer call() {
        spec.commandLine().usage(err);
        return CommandLine.ExitCode.USAGE;
    }
}
