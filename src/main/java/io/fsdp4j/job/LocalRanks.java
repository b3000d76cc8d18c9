package io.fsdp4j.job;

import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import java.util.List;
import java.util.stream.IntStream;

/**
 * The ranks this process hosts, one thread each, and how they reach each other: threads on CPU ranks (or on one
 * shared GPU) with in-process collectives ({@link InProcessWorld}), GPUs with NCCL ({@link NcclWorld}), or some of the
 * CPU ranks of a job of several processes ({@link TcpWorld}).
 */
public interface LocalRanks {

    DeviceMesh mesh();

    /** The global ranks this process hosts, ascending: every rank of the mesh unless the job spans processes. */
    default List<Integer> ranks() {
        return IntStream.range(0, mesh().worldSize()).boxed().toList();
    }

    /** Sets up rank {@code globalRank} on the calling thread (its device and its groups). */
    RankContext open(int globalRank);

    /** Releases what {@link #open} set up, on the rank's thread. */
    void close(RankContext rank);

    /**
     * Rank {@code rank} begins training step {@code step}: in a job that hangs, the message says which step each
     * process was at.
     */
    default void beginStep(int rank, int step) {}

    /** Releases every rank blocked in a collective, so that the job stops instead of hanging. */
    void abort(String reason);

    /**
     * Why the job was stopped from outside this process (another process failed or died), if it was: a rank that
     * fails afterwards failed because of it, and is reported with this reason.
     */
    default java.util.Optional<String> stoppedBecause() {
        return java.util.Optional.empty();
    }

    /** A description of the devices for logs and summaries, e.g. "cpu x2" or "NVIDIA H200 x4". */
    String devices();
}
