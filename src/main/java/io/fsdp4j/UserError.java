package io.fsdp4j;

/**
 * An error caused by the user's input (a config, a model directory, a data file, a command-line flag).
 * The command line prints its message as one line, {@code error: <message>}, and exits non-zero, so the
 * message must say what is wrong and, where it can, what to do about it.
 */
public class UserError extends RuntimeException {
    public UserError(String message) {
        super(message);
    }

    public UserError(String message, Throwable cause) {
        super(message, cause);
    }
}
