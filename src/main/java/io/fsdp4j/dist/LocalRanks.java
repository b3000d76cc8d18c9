package io.fsdp4j.dist;

/**
 * The ranks this process hosts, one thread each, and how they reach each other: threads on CPU ranks with
 * in-process collectives ({@link InProcessWorld}), or GPUs with NCCL ({@link NcclWorld}).
 */
public interface LocalRanks {

    DeviceMesh mesh();

    /** Sets up rank {@code globalRank} on the calling thread (its device and its groups). */
    RankContext open(int globalRank);

    /** Releases what {@link #open} set up, on the rank's thread. */
    void close(RankContext rank);

    /** Releases every rank blocked in a collective, so that the job stops instead of hanging. */
    void abort(String reason);

    /** A description of the devices for logs and summaries, e.g. "cpu x2" or "NVIDIA H200 x4". */
    String devices();
}
