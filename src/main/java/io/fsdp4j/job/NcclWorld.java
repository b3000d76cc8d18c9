package io.fsdp4j.job;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.comm.CollectiveWatchdog;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.comm.nccl.NcclProcessGroup;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.Nccl;
import io.fsdp4j.cuda.NcclComm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The GPUs of this process as ranks: rank r drives a GPU from its own thread with a {@link CudaBackend}, and
 * reaches the others through NCCL communicators for the world, its shard group and its replicate group. The
 * communicators' unique ids are made before the rank threads start, by the process of each communicator's first
 * member, and handed to the other processes through the job's rendezvous store; every rank joins its groups in the
 * same order (world, shard, replicate), so the joins cannot deadlock.
 *
 * <p>Rank r uses visible GPU {@code r % deviceCount}: GPU r when one process hosts every rank, the node's local
 * index when a process hosts a node's GPUs (ranks are numbered node by node), and the right one of its own when a
 * scheduler shows each process only its GPUs. On one machine several processes can act as nodes: {@code fsdp4j
 * launch --emulate-nodes} gives each its own {@code NCCL_HOSTID}, so NCCL sends between them over sockets.
 *
 * <p>In a job of several processes, a failure in one process reaches the others through the store: the failing
 * process posts the reason ({@link JobWatch}), and a process that dies without a word is reported by the store,
 * which sees its connection drop; every process then aborts its communicators, releasing ranks stuck in NCCL.
 *
 * <p>A peer that is alive but stuck (a deadlock, a kernel that hangs, a stopped process) is noticed by the
 * {@link CollectiveWatchdog}: when a collective has not finished within {@value JobStart#COLLECTIVE_TIMEOUT_ENV}
 * seconds, the process names the ranks or processes holding it up from their {@link JobProgress} (published to the
 * store a few times a second), and stops the job as a failure does. A process whose ranks are still blocked
 * {@link #STOP_GRACE} after its communicators were aborted (a kernel that never ends) prints the reason and exits.
 */
public final class NcclWorld implements LocalRanks {
    /** How long the ranks of a process of a stopping job may take to return before the process exits regardless. */
    static final Duration STOP_GRACE = Duration.ofSeconds(30);

    private final DeviceMesh mesh;
    private final JobLayout layout;
    private final byte[] worldId;
    private final List<byte[]> shardIds = new ArrayList<>();    // by replica; null where no member is hosted here
    private final List<byte[]> replicateIds = new ArrayList<>(); // by shard rank; likewise
    private final Map<Integer, List<NcclComm>> comms = new ConcurrentHashMap<>();
    private final Set<Integer> closedRanks = ConcurrentHashMap.newKeySet();
    private final String deviceName;
    private final JobRendezvous rendezvous; // null for a job of one process
    private final JobWatch watch;           // likewise
    private final Duration collectiveTimeout;
    private final JobProgress progress;
    private final CollectiveWatchdog watchdog;
    private volatile String abortReason;

    /** Every rank of the mesh in this process; collectives time out after {@value JobStart#COLLECTIVE_TIMEOUT_ENV}. */
    public NcclWorld(DeviceMesh mesh) {
        this(mesh, JobStart.collectiveTimeout(System.getenv()));
    }

    /**
     * Every rank of the mesh in this process; a collective that has not finished after {@code collectiveTimeout}
     * stops the job.
     */
    public NcclWorld(DeviceMesh mesh, Duration collectiveTimeout) {
        int gpus = Cuda.deviceCount();
        if (mesh.worldSize() > gpus) {
            throw new UserError(mesh.worldSize() + " ranks need " + mesh.worldSize() + " GPUs, but " + gpus
                    + " are visible; set dist.ranks to at most " + gpus + " (or dist.share_gpu=true to check a"
                    + " configuration of several ranks on one GPU)");
        }
        this.mesh = mesh;
        this.layout = JobLayout.singleProcess(mesh.worldSize());
        this.rendezvous = null;
        this.watch = null;
        this.worldId = Nccl.uniqueId();
        for (int replica = 0; replica < mesh.replicas(); replica++) {
            shardIds.add(Nccl.uniqueId());
        }
        for (int s = 0; s < mesh.shardSize(); s++) {
            replicateIds.add(Nccl.uniqueId());
        }
        this.deviceName = Cuda.properties(0).name() + " x" + mesh.worldSize();
        this.collectiveTimeout = collectiveTimeout;
        this.progress = new JobProgress(layout.localRanks());
        this.watchdog = new CollectiveWatchdog(collectiveTimeout, progress, System::nanoTime, this::onOverdue).start();
    }

    private NcclWorld(DeviceMesh mesh, JobLayout layout, JobRendezvous rendezvous, Map<String, byte[]> ids,
                      JobWatch watch, Duration collectiveTimeout) {
        this.mesh = mesh;
        this.layout = layout;
        this.rendezvous = rendezvous;
        this.watch = watch;
        this.worldId = ids.get("world");
        for (int replica = 0; replica < mesh.replicas(); replica++) {
            shardIds.add(ids.get("shard." + replica));
        }
        for (int s = 0; s < mesh.shardSize(); s++) {
            replicateIds.add(ids.get("replicate." + s));
        }
        this.deviceName = Cuda.properties(0).name() + " x" + mesh.worldSize() + " (" + layout.processes()
                + " processes)";
        this.collectiveTimeout = collectiveTimeout;
        this.progress = new JobProgress(layout.localRanks());
        progress.publish(rendezvous.store(), layout.process());
        this.watchdog = new CollectiveWatchdog(collectiveTimeout, progress, System::nanoTime, this::onOverdue).start();
    }

    /**
     * This process's GPUs in a job of several processes: the rendezvous, the job's start checks, then the unique
     * id of every communicator of the mesh that has a member here (world, shard groups, replicate groups), each
     * made by the process of its first member.
     */
    static NcclWorld join(JobLayout layout, DeviceMesh mesh, JobSettings settings, String description) {
        if (mesh.worldSize() != layout.worldSize()) {
            throw new IllegalArgumentException("a mesh of " + mesh.worldSize() + " ranks for a job of "
                    + layout.worldSize());
        }
        int gpus = Cuda.deviceCount();
        if (layout.ranksPerProc() > gpus) {
            throw new UserError("this process hosts " + layout.ranksPerProc() + " ranks but sees " + gpus + " GPU(s);"
                    + " set dist.ranks to the GPUs of a node (split among its processes)");
        }
        JobRendezvous rendezvous = JobRendezvous.join(layout, settings, null);
        JobWatch watch = null;
        try {
            watch = JobWatch.start(layout, settings); // from here on, a process that dies is reported to the others
            JobStart.checkProcesses(rendezvous, description);
            NcclWorld world = new NcclWorld(mesh, layout, rendezvous, communicatorIds(rendezvous, mesh, Nccl::uniqueId),
                    watch, settings.collectiveTimeout());
            watch.onStop(world::abortLocally);
            return world;
        } catch (RuntimeException | Error e) {
            if (watch != null) {
                watch.close();
            }
            rendezvous.close();
            throw e;
        }
    }

    /**
     * The unique id of every communicator of the mesh with a member in this process, by group name: made by
     * {@code newId} in the process of the group's first member and fetched from the store by the others.
     */
    static Map<String, byte[]> communicatorIds(JobRendezvous rendezvous, DeviceMesh mesh,
                                               java.util.function.Supplier<byte[]> newId) {
        JobLayout layout = rendezvous.layout();
        Map<String, byte[]> ids = new LinkedHashMap<>();
        for (var group : mesh.groups().entrySet()) {
            List<Integer> ranks = group.getValue();
            int owner = ranks.getFirst() / layout.ranksPerProc(); // the owner is a member
            if (ranks.stream().anyMatch(r -> r / layout.ranksPerProc() == layout.process())) {
                ids.put(group.getKey(), rendezvous.share("nccl/" + group.getKey(), owner, newId));
            }
        }
        return ids;
    }

    @Override
    public DeviceMesh mesh() {
        return mesh;
    }

    @Override
    public List<Integer> ranks() {
        return layout.localRanks();
    }

    @Override
    public RankContext open(int globalRank) {
        if (abortReason != null) {
            rankDone(globalRank);
            throw new CollectiveAbortedException(abortReason);
        }
        CudaBackend backend = new CudaBackend(globalRank % Cuda.deviceCount());
        try {
            int replica = mesh.replicaOf(globalRank), shardRank = mesh.shardRankOf(globalRank);
            NcclComm world = Nccl.initRank(worldId, mesh.worldSize(), globalRank);
            NcclComm shard = Nccl.initRank(shardIds.get(replica), mesh.shardSize(), shardRank);
            NcclComm replicate = Nccl.initRank(replicateIds.get(shardRank), mesh.replicas(), replica);
            comms.put(globalRank, List.of(world, shard, replicate));
            if (abortReason != null) { // stopped while joining: the abort missed these
                abortLocally(abortReason);
                throw new CollectiveAbortedException(abortReason);
            }
            var watched = new NcclProcessGroup.Watch(globalRank, watchdog, () -> abortReason);
            return new RankContext(globalRank, mesh, backend, new NcclProcessGroup("world", world, backend, watched),
                    new NcclProcessGroup("shard." + replica, shard, backend, watched),
                    new NcclProcessGroup("replicate." + shardRank, replicate, backend, watched));
        } catch (RuntimeException | Error e) {
            try {
                backend.close();
            } catch (RuntimeException quiet) {
                // failing already
            }
            rankDone(globalRank);
            throw e;
        }
    }

    @Override
    public void beginStep(int rank, int step) {
        progress.beginStep(rank, step);
    }

    /**
     * The watchdog's action: a collective has not finished in time. Names what holds it up, from the progress of
     * every process (or, in a job of one process, of every rank), and stops the job.
     */
    private void onOverdue(CollectiveWatchdog.Overdue overdue) {
        if (abortReason != null) {
            return; // stopping already, for another reason
        }
        String why = rendezvous != null
                ? JobProgress.explainFromStore(rendezvous.store(), layout, overdue.seq(), overdue.what(), overdue.waited(),
                        null)
                : JobProgress.explain(overdue.rank(), overdue.seq(), overdue.what(), overdue.waited(), progress.byRank(),
                        Set.of(), r -> "rank " + r);
        if (why == null) { // the store does not answer: its host is gone or stuck too
            why = "rank " + overdue.rank() + " waited in " + overdue.what() + " (collective " + overdue.seq() + ") for "
                    + JobLayout.seconds(overdue.waited()) + ", and the rendezvous store at " + rendezvous.store().address()
                    + " did not answer (is " + layout.describeProcess(0) + " stopped or unreachable?)";
        }
        why += " (" + JobStart.COLLECTIVE_TIMEOUT_ENV + "=" + collectiveTimeout.toSeconds() + ")";
        if (watch != null) {
            watch.post(why); // it names the processes already
        }
        abortLocally(why);
    }

    /**
     * When the last rank of this process is closed, so is its part of the rendezvous. After an abort the
     * communicators are gone already and the device may hold the error: what can be released is, quietly.
     */
    @Override
    public void close(RankContext rank) {
        CudaBackend backend = (CudaBackend) rank.backend();
        try {
            watchdog.forget(rank.rank()); // on the rank's thread, where its device is current
            if (abortReason == null) {
                backend.synchronize();
                List<NcclComm> mine = comms.remove(rank.rank());
                if (mine != null) {
                    mine.forEach(NcclComm::close);
                }
                backend.close();
            } else {
                try {
                    backend.close();
                } catch (RuntimeException e) {
                    // the job is stopping for the reason already given
                }
            }
        } finally {
            rankDone(rank.rank());
        }
    }

    /** Rank {@code rank} has returned; after the last one, the watchdog and this process's part of the rendezvous end. */
    private void rankDone(int rank) {
        if (closedRanks.add(rank) && closedRanks.size() == ranks().size()) {
            watchdog.close();
            progress.close();
            if (rendezvous != null) {
                watch.finish(abortReason == null);
                rendezvous.close();
            }
        }
    }

    /** Aborts this process's communicators and, in a job of several processes, tells the others why. */
    @Override
    public void abort(String reason) {
        if (watch != null && abortReason == null) {
            watch.post(layout.describeProcess(layout.process()) + ": " + reason);
        }
        abortLocally(reason);
    }

    private void abortLocally(String reason) {
        boolean first;
        synchronized (this) {
            first = abortReason == null;
            if (first) {
                abortReason = reason;
            }
        }
        if (first && rendezvous != null) {
            exitIfStuck(); // timed from before the abort: an abort that itself hangs must not keep the job alive
        }
        comms.values().forEach(list -> list.forEach(NcclComm::abort));
    }

    /**
     * In a job of several processes, exits this process (status 1, the reason on stderr) when its ranks have not
     * all returned {@link #STOP_GRACE} after the abort: a rank stuck where an abort cannot reach (a kernel that
     * never ends) would keep it, and the job, alive.
     */
    private void exitIfStuck() {
        Thread.ofPlatform().daemon().name("stop-grace").start(() -> {
            long deadline = System.nanoTime() + STOP_GRACE.toNanos();
            while (closedRanks.size() < ranks().size() && System.nanoTime() < deadline) {
                try {
                    TimeUnit.MILLISECONDS.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
            if (closedRanks.size() < ranks().size()) {
                List<Integer> stuck = ranks().stream().filter(r -> !closedRanks.contains(r)).toList();
                System.err.println("error: the job stopped: " + abortReason + "; rank(s) " + stuck + " of this process"
                        + " did not return " + JobLayout.seconds(STOP_GRACE) + " after the abort, exiting");
                System.err.flush();
                Runtime.getRuntime().halt(1);
            }
        });
    }

    /** Why the job is stopping (a failure here or in another process, or a collective that timed out), once it is. */
    @Override
    public Optional<String> stoppedBecause() {
        return Optional.ofNullable(abortReason);
    }

    @Override
    public String devices() {
        return deviceName;
    }
}
