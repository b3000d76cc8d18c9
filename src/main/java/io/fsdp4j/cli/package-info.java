/**
 * The {@code fsdp4j} command line (picocli). {@link io.fsdp4j.cli.Main} lists the subcommands, one class each;
 * a command parses its options, calls one entry point of
 * another package ({@code Training.run}, {@code Scoring.run}) and returns its exit status. Errors are reported in
 * one place, {@code ErrorHandler}: a {@link io.fsdp4j.UserError} or a usage error is one line
 * {@code error: ...} on standard error and status 2; a job stopped by another rank or process is
 * {@code error: the job stopped: ...}, status 1; anything else is an internal error, status 1, with the stack
 * trace when {@code FSDP4J_DEBUG=1}. Results go to standard output, everything else to standard error.
 *
 * <p>May use: every other package; none uses it.
 */
package io.fsdp4j.cli;
