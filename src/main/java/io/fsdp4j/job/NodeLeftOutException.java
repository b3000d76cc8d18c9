package io.fsdp4j.job;

/**
 * Raised in a process whose node the job's start checks left out (its GPUs failed the health test, and the job was
 * allowed to start without it): the process ends with {@value #EXIT_STATUS}, which {@link Launcher} tells apart
 * from a failure, while the other nodes train without it.
 */
public final class NodeLeftOutException extends RuntimeException {
    /** The exit status of a process left out of its job: neither success (0), a failure (1) nor bad input (2). */
    public static final int EXIT_STATUS = 4;

    public NodeLeftOutException(String message) {
        super(message);
    }
}
