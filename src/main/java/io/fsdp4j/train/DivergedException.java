package io.fsdp4j.train;

/**
 * Training stopped because the loss or gradient norm was not finite for {@code train.max_bad_steps} steps in a row
 * (every one of them skipped: no shard was updated). The command line prints its message as one line and exits
 * with {@link io.fsdp4j.ExitStatus#DIVERGED}.
 */
public final class DivergedException extends RuntimeException {
    public DivergedException(String message) {
        super(message);
    }
}
