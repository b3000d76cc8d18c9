package io.fsdp4j.comm;

import java.util.Set;

/**
 * Where a process counts its ranks' collectives: issued, started (inputs ready) and completed. The job publishes these
 * counts so that a hang can be blamed on the rank that holds the others up; the {@link CollectiveWatchdog} advances them.
 */
public interface CollectiveProgress {
    /** The ranks counted here. */
    Set<Integer> ranks();

    /** Rank {@code rank} queued its next collective: its number. */
    long issue(int rank);

    /** Collective {@code seq} of rank {@code rank} has its inputs ready. */
    void start(int rank, long seq);

    /** Collective {@code seq} of rank {@code rank} is done. */
    void complete(int rank, long seq);
}
