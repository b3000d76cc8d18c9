package io.fsdp4j.cli;

import io.fsdp4j.ExitStatus;
import io.fsdp4j.UserError;
import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.job.NodeLeftOutException;
import io.fsdp4j.train.DivergedException;
import io.fsdp4j.report.HeapMemory;
import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.job.NodeLeftOutException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import picocli.CommandLine.IExecutionExceptionHandler;
import picocli.CommandLine.IParameterExceptionHandler;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.UnmatchedArgumentException;
import picocli.CommandLine;

/**
 * The one place that turns failures into what the user sees, for every command:
 * <ul>
 *   <li>a {@link UserError}, also wrapped in other exceptions: {@code error: <message>}, one line, status 2;</li>
 *   <li>a usage error: {@code error: <message> (see fsdp4j <command> --help)}, one line, status 2;</li>
 *   <li>a run that diverged ({@link DivergedException}): {@code error: <message>}, one line, status
 *       {@value ExitStatus#DIVERGED};</li>
 *   <li>a job stopped by another rank or process ({@link CollectiveAbortedException}, which names it):
 *       {@code error: the job stopped: <reason>}, status {@value ExitStatus#PEER_FAILED};</li>
 *   <li>a process whose node the preflight left out of its job ({@link NodeLeftOutException}):
 *       {@code error: <message>}, one line, status {@value NodeLeftOutException#EXIT_STATUS};</li>
 *   <li>the Java heap exhausted: {@code error: out of Java heap ...}, one line with the heap's size, the machine's
 *       memory and what to set, status 1;</li>
 *   <li>anything else: {@code error: internal error: <class>: <message>}, status 1, and the stack trace when
 *       {@code FSDP4J_DEBUG=1}.</li>
 * </ul>
 */
final class ErrorHandler implements IExecutionExceptionHandler, IParameterExceptionHandler {
    private final PrintStream err;
    private final boolean debug;

    ErrorHandler(PrintStream err, boolean debug) {
        this.err = err;
        this.debug = debug;
    }

    @Override
    public int handleParseException(ParameterException ex, String[] args) {
        UserError user = userError(ex);
        if (user != null) {
            return report(user);
        }
        CommandLine cmd = ex.getCommandLine();
        err.println("error: " + usageMessage(ex) + " (see " + cmd.getCommandSpec().qualifiedName() + " --help)");
        err.flush();
        return CommandLine.ExitCode.USAGE;
    }

    @Override
    public int handleExecutionException(Exception ex, CommandLine cmd, ParseResult parseResult) {
        return report(ex);
    }

    /** Prints {@code failure} as the user sees it and returns the exit status. */
    int report(Throwable failure) {
        if (failure instanceof NodeLeftOutException leftOut) { // the other nodes go on without this one
            err.println("error: " + oneLine(leftOut.getMessage(), leftOut));
            err.flush();
            return NodeLeftOutException.EXIT_STATUS;
        }
        if (failure instanceof DivergedException diverged) {
            err.println("error: " + oneLine(diverged.getMessage(), diverged));
            err.flush();
            return ExitStatus.DIVERGED;
        }
        UserError user = userError(failure);
        if (user != null) {
            err.println("error: " + oneLine(user.getMessage(), user));
            err.flush();
            return CommandLine.ExitCode.USAGE;
        }
        OutOfMemoryError oom = outOfHeap(failure);
        if (oom != null) {
            err.println("error: " + HeapMemory.outOfHeap(oom));
            err.flush();
            return CommandLine.ExitCode.SOFTWARE;
        }
        if (failure instanceof CollectiveAbortedException stopped) { // another rank or process failed: it is named
            err.println("error: the job stopped: " + oneLine(stopped.getMessage(), stopped));
            err.flush();
            return ExitStatus.PEER_FAILED;
        }
        String hint = debug ? "" : " (set FSDP4J_DEBUG=1 for the stack trace)";
        err.println("error: internal error: " + failure.getClass().getName() + ": " + oneLine(failure.getMessage(), failure)
                + hint);
        if (debug) {
            failure.printStackTrace(err);
        }
        err.flush();
        return CommandLine.ExitCode.SOFTWARE;
    }

    /** The Java heap's {@link OutOfMemoryError} in the chain of causes (not a device's or native memory's), or null. */
    private static OutOfMemoryError outOfHeap(Throwable failure) {
        List<Throwable> seen = new ArrayList<>();
        for (Throwable t = failure; t != null && !seen.contains(t); t = t.getCause()) {
            if (t instanceof OutOfMemoryError oom && HeapMemory.isHeap(oom)) {
                return oom;
            }
            seen.add(t);
        }
        return null;
    }

    /** The first {@link UserError} in the chain of causes, or null. */
    private static UserError userError(Throwable failure) {
        List<Throwable> seen = new ArrayList<>();
        for (Throwable t = failure; t != null && !seen.contains(t); t = t.getCause()) {
            if (t instanceof UserError user) {
                return user;
            }
            seen.add(t);
        }
        return null;
    }

    private static String usageMessage(ParameterException ex) {
        if (ex instanceof UnmatchedArgumentException unmatched) {
            CommandLine cmd = ex.getCommandLine();
            List<String> args = unmatched.getUnmatched();
            String first = args.isEmpty() ? "" : args.getFirst();
            if (first.startsWith("-")) {
                String name = first.contains("=") ? first.substring(0, first.indexOf('=')) : first;
                var options = cmd.getCommandSpec().options().stream().flatMap(o -> Arrays.stream(o.names())).toList();
                return "unknown option '" + name + "'" + didYouMean(name, options);
            }
            if (!cmd.getSubcommands().isEmpty() && cmd.getCommandSpec().positionalParameters().isEmpty()) {
                var commands = List.copyOf(cmd.getSubcommands().keySet());
                return "unknown command '" + first + "'; commands: " + String.join(", ", commands)
                        + didYouMean(first, commands);
            }
            return "unexpected argument '" + first + "'";
        }
        return oneLine(ex.getMessage(), ex);
    }

    /** {@code "; did you mean 'x'?"} for the candidate nearest to {@code typed}, if one is near; else empty. */
    static String didYouMean(String typed, List<String> candidates) {
        String best = null;
        int bestDistance = Math.max(1, Math.min(3, typed.length() / 3));
        for (String candidate : candidates) {
            int d = editDistance(typed, candidate);
            if (d <= bestDistance && (best == null || d < editDistance(typed, best))) {
                best = candidate;
                bestDistance = d;
            }
        }
        return best == null ? "" : "; did you mean '" + best + "'?";
    }

    /** Levenshtein distance, with a swap of two neighbouring characters counting as one edit. */
    private static int editDistance(String a, String b) {
        int[][] d = new int[a.length() + 1][b.length() + 1];
        for (int i = 0; i <= a.length(); i++) {
            for (int j = 0; j <= b.length(); j++) {
                if (i == 0 || j == 0) {
                    d[i][j] = i + j;
                    continue;
                }
                int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
                d[i][j] = Math.min(Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1), d[i - 1][j - 1] + cost);
                if (i > 1 && j > 1 && a.charAt(i - 1) == b.charAt(j - 2) && a.charAt(i - 2) == b.charAt(j - 1)) {
                    d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
                }
            }
        }
        return d[a.length()][b.length()];
    }

    /** A message on one line; a failure without one is named by its class. */
    private static String oneLine(String message, Throwable failure) {
        if (message == null || message.isBlank()) {
            return failure.getClass().getSimpleName();
        }
        return message.strip().replaceAll("\\s*\\R\\s*", " ");
    }
}
