package io.fsdp4j;

/**
 * The exit statuses of every command, one meaning each, so that a scheduler or a script can tell what happened
 * without reading the output. {@code fsdp4j launch} ends with its failed process's status (a process killed by a
 * signal, or ending with a status not listed here, is {@link #PEER_FAILED}).
 */
public final class ExitStatus {
    private ExitStatus() {}

    /** Done. */
    public static final int OK = 0;
    /** An internal error (a bug, or a failure of the machine that is not a file's): the message says what. */
    public static final int INTERNAL = 1;
    /** Bad input: a config, a flag, a file (named), a directory in use. Nothing saved was lost. */
    public static final int BAD_INPUT = 2;
    /** Training diverged: the loss or gradient norm was not finite for {@code train.max_bad_steps} steps in a row. */
    public static final int DIVERGED = 3;
    /** This node was left out of its job by the preflight; the other nodes go on (dist.exclude_unhealthy). */
    public static final int LEFT_OUT = 4;
    /** Another rank or process of the job failed (it is named), so this one stopped. */
    public static final int PEER_FAILED = 5;
    /** Stopped by SIGTERM or SIGINT after the current step, with a checkpoint saved where a directory is set. */
    public static final int STOPPED = 6;
}
