package io.fsdp4j.comm;

/** Raised in every rank waiting on a collective when the job is aborted or a peer does not arrive in time. */
public final class CollectiveAbortedException extends RuntimeException {
    public CollectiveAbortedException(String message) {
        super(message);
    }
}
