package io.fsdp4j.job;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.comm.inprocess.InProcessGroup;
import io.fsdp4j.comm.tcp.PeerLink;
import io.fsdp4j.comm.tcp.TcpGroup;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The CPU ranks of this process in a job of several processes (on one node or several): it hosts the global ranks
 * {@link JobLayout#localRanks()}, as threads, and reaches the ranks of other processes over TCP.
 *
 * <p>Opening it is the rendezvous: the first process serves the {@link RendezvousServer} at the job's rendezvous
 * address; every process connects to it with the job token, opens a listening socket for collectives, publishes
 * its address, and waits (bounded) until every process has, naming the ones that do not come. Then each group of
 * the mesh (world, shard groups, replicate groups) whose members span processes gets one connection between each
 * pair of its processes; a group inside this process is an {@link InProcessGroup}. Collectives then give the
 * same bits as one process hosting every rank ({@link TcpGroup}).
 */
public final class TcpWorld implements LocalRanks, TcpGroup.Owner, AutoCloseable {
    private static final String PEER_MAGIC = "fsdp4j-peer/1";
    private static final byte PEER_OK = 0, PEER_REFUSED = 1;

    /** One group of the mesh: in this process only, or across processes. */
    private record Group(InProcessGroup inProcess, TcpGroup tcp) {
        ProcessGroup member(int groupRank) {
            return inProcess != null ? inProcess.member(groupRank) : tcp.member(groupRank);
        }

        void abort(String reason) {
            if (inProcess != null) {
                inProcess.abort(reason);
            } else {
                tcp.abort(reason);
            }
        }
    }

    private final JobLayout layout;
    private final DeviceMesh mesh;
    private final String description;
    private final Map<String, Group> groups = new LinkedHashMap<>();
    private final List<AutoCloseable> resources = new ArrayList<>();
    private final Set<Integer> closedRanks = ConcurrentHashMap.newKeySet();
    private final JobProgress progress;
    private JobRendezvous rendezvous;
    private Duration collectiveTimeout;
    private volatile boolean closed;

    private TcpWorld(JobLayout layout, DeviceMesh mesh, String description) {
        this.layout = layout;
        this.mesh = mesh;
        this.description = description;
        this.progress = new JobProgress(layout.localRanks());
    }

    /**
     * Joins the job: the rendezvous (served here by the first process), the job's start checks (every process
     * must describe the job as {@code description}, see {@link JobStart#checkProcesses}) and the connections to
     * the others.
     */
    public static TcpWorld open(JobLayout layout, DeviceMesh mesh, JobSettings settings, String description) {
        return open(layout, mesh, settings, description, null);
    }

    /** The same, describing the job by its mesh alone. */
    public static TcpWorld open(JobLayout layout, DeviceMesh mesh, JobSettings settings) {
        return open(layout, mesh, settings, JobStart.describe(mesh, layout), null);
    }

    /** The same, with the first process's store already served ({@code hosted}; tests use a free port). */
    static TcpWorld open(JobLayout layout, DeviceMesh mesh, JobSettings settings, RendezvousServer hosted) {
        return open(layout, mesh, settings, JobStart.describe(mesh, layout), hosted);
    }

    static TcpWorld open(JobLayout layout, DeviceMesh mesh, JobSettings settings, String description,
                         RendezvousServer hosted) {
        if (mesh.worldSize() != layout.worldSize()) {
            throw new IllegalArgumentException("a mesh of " + mesh.worldSize() + " ranks for a job of "
                    + layout.worldSize());
        }
        TcpWorld world = new TcpWorld(layout, mesh, description);
        try {
            world.connect(settings, hosted);
            return world;
        } catch (RuntimeException | Error e) {
            world.close();
            throw e;
        }
    }

    private void connect(JobSettings settings, RendezvousServer hosted) {
        int me = layout.process();
        Map<String, List<Integer>> meshGroups = mesh.groups();
        Map<String, Set<Integer>> peersOf = new LinkedHashMap<>(); // spanning groups of this process: their other processes
        for (var e : meshGroups.entrySet()) {
            Set<Integer> procs = new LinkedHashSet<>();
            e.getValue().forEach(r -> procs.add(processOf(r)));
            if (procs.contains(me) && procs.size() > 1) {
                procs.remove(me);
                peersOf.put(e.getKey(), procs);
            }
        }
        Map<String, Map<Integer, PeerLink>> links = peersOf.isEmpty() ? Map.of() : rendezvous(settings, hosted, peersOf);
        collectiveTimeout = settings.collectiveTimeout();
        if (rendezvous != null) {
            progress.publish(rendezvous.store(), me);
        }
        for (var e : meshGroups.entrySet()) {
            String name = e.getKey();
            List<Integer> ranks = e.getValue();
            if (ranks.stream().noneMatch(r -> processOf(r) == me)) {
                continue;
            }
            groups.put(name, peersOf.containsKey(name)
                    ? new Group(null, new TcpGroup(this, name, ranks, layout.ranksPerProc(), me, links.get(name),
                            settings.collectiveTimeout()))
                    : new Group(new InProcessGroup(name, ranks, settings.collectiveTimeout()), null));
        }
    }

    private int processOf(int globalRank) {
        return globalRank / layout.ranksPerProc();
    }

    // ---- rendezvous ------------------------------------------------------------------------------------

    private Map<String, Map<Integer, PeerLink>> rendezvous(JobSettings settings, RendezvousServer hosted,
                                                           Map<String, Set<Integer>> peersOf) {
        JobRendezvous rendezvous = JobRendezvous.join(layout, settings, hosted);
        resources.add(rendezvous);
        this.rendezvous = rendezvous;
        ServerSocket listener;
        try {
            listener = new ServerSocket();
            listener.bind(new InetSocketAddress(0), 1024);
        } catch (IOException e) {
            throw new UserError("rendezvous: cannot open a port for collectives on this host: " + e.getMessage(), e);
        }
        resources.add(listener);
        // Published host: empty means "the store's host" (this process reached the store over loopback).
        RendezvousClient store = rendezvous.store();
        String host = settings.advertise() != null ? settings.advertise()
                : store.localAddress().isLoopbackAddress() ? "" : store.localAddress().getHostAddress();
        rendezvous.publish("addr", (host.contains(":") ? "[" + host + "]" : host) + ":" + listener.getLocalPort());
        Map<Integer, JobLayout.Address> addresses = new TreeMap<>();
        rendezvous.awaitAll("addr").forEach((p, a) -> addresses.put(p, a.startsWith(":")
                ? new JobLayout.Address(layout.rdzvHost(), Integer.parseInt(a.substring(1)))
                : JobLayout.Address.parse(a, "published address of process " + p)));
        JobStart.checkProcesses(rendezvous, description);
        return connectPeers(settings, listener, addresses, peersOf, rendezvous.deadline());
    }

    /** One connection per group and pair of processes: to lower-numbered processes out, from higher ones in. */
    private Map<String, Map<Integer, PeerLink>> connectPeers(JobSettings settings, ServerSocket listener,
                                                             Map<Integer, JobLayout.Address> addresses,
                                                             Map<String, Set<Integer>> peersOf, long deadline) {
        int me = layout.process();
        Map<String, Map<Integer, PeerLink>> links = new ConcurrentHashMap<>();
        peersOf.keySet().forEach(g -> links.put(g, new ConcurrentHashMap<>()));
        Set<String> inbound = ConcurrentHashMap.newKeySet();
        peersOf.forEach((g, peers) -> peers.stream().filter(p -> p > me).forEach(p -> inbound.add(g + "|" + p)));
        AtomicReference<RuntimeException> acceptFailure = new AtomicReference<>();
        Thread acceptor = Thread.ofPlatform().daemon().name("tcp-world-accept").start(() -> {
            try {
                accept(settings, listener, inbound, links, deadline);
            } catch (RuntimeException e) {
                acceptFailure.set(e);
            }
        });
        try {
            for (var e : peersOf.entrySet()) {
                for (int p : e.getValue()) {
                    if (p < me) {
                        PeerLink link = dial(settings, e.getKey(), p, addresses.get(p), deadline);
                        synchronized (resources) {
                            resources.add(link);
                        }
                        links.get(e.getKey()).put(p, link);
                    }
                }
            }
            acceptor.join(Math.max(1, left(deadline).toMillis() + 1000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UserError("rendezvous: interrupted");
        } finally {
            if (acceptor.isAlive()) {
                inbound.add("stop"); // makes the acceptor give up
            }
        }
        if (acceptFailure.get() != null) {
            throw acceptFailure.get();
        }
        List<Integer> missing = inbound.stream().filter(k -> k.contains("|"))
                .map(k -> Integer.parseInt(k.substring(k.indexOf('|') + 1))).distinct().sorted().toList();
        if (!missing.isEmpty()) {
            throw new UserError("rendezvous: timed out after " + JobLayout.seconds(settings.rendezvousTimeout())
                    + " waiting for connections from " + layout.describeProcesses(missing));
        }
        return links;
    }

    private void accept(JobSettings settings, ServerSocket listener, Set<String> inbound,
                        Map<String, Map<Integer, PeerLink>> links, long deadline) {
        try {
            listener.setSoTimeout(200);
            while (!inbound.isEmpty() && !inbound.contains("stop")) {
                if (System.nanoTime() > deadline) {
                    List<Integer> missing = inbound.stream().map(k -> Integer.parseInt(k.substring(k.indexOf('|') + 1)))
                            .distinct().sorted().toList();
                    throw new UserError("rendezvous: timed out after " + JobLayout.seconds(settings.rendezvousTimeout())
                            + " waiting for connections from " + layout.describeProcesses(missing));
                }
                Socket socket;
                try {
                    socket = listener.accept();
                } catch (SocketTimeoutException e) {
                    continue;
                }
                try {
                    socket.setTcpNoDelay(true);
                    socket.setSoTimeout(10_000);
                    var in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
                    var out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
                    boolean ours = PEER_MAGIC.equals(in.readUTF());
                    String token = ours ? in.readUTF() : "";
                    String group = ours ? in.readUTF() : "";
                    int process = ours ? in.readInt() : -1;
                    String key = group + "|" + process;
                    if (!ours || !JobToken.matches(settings.token(), token) || !inbound.contains(key)) {
                        out.writeByte(PEER_REFUSED);
                        out.flush();
                        socket.close();
                        continue;
                    }
                    out.writeByte(PEER_OK);
                    out.flush();
                    socket.setSoTimeout((int) settings.collectiveTimeout().toMillis());
                    PeerLink link = new PeerLink(process, layout.describeProcess(process), socket, in, out);
                    synchronized (resources) {
                        resources.add(link);
                    }
                    links.get(group).put(process, link);
                    inbound.remove(key);
                } catch (IOException e) {
                    socket.close(); // a stray or broken connection: not one of the peers, keep waiting
                }
            }
        } catch (IOException e) {
            throw new UserError("rendezvous: accepting connections failed: " + e.getMessage(), e);
        }
    }

    private PeerLink dial(JobSettings settings, String group, int process, JobLayout.Address address, long deadline) {
        String who = layout.describeProcess(process);
        String problem = "no answer";
        while (System.nanoTime() < deadline) {
            Socket socket = new Socket();
            try {
                socket.connect(new InetSocketAddress(address.host(), address.port()),
                        Math.clamp(left(deadline).toMillis(), 1, 10_000));
                socket.setTcpNoDelay(true);
                socket.setSoTimeout(Math.clamp(left(deadline).toMillis(), 1, Integer.MAX_VALUE));
                var out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
                out.writeUTF(PEER_MAGIC);
                out.writeUTF(settings.token());
                out.writeUTF(group);
                out.writeInt(layout.process());
                out.flush();
                int reply = socket.getInputStream().read();
                if (reply != PEER_OK) {
                    socket.close();
                    throw new UserError("rendezvous: " + who + " at " + address + " refused the connection for group '"
                            + group + "'");
                }
                socket.setSoTimeout((int) settings.collectiveTimeout().toMillis());
                return PeerLink.over(process, who, socket);
            } catch (ConnectException | SocketTimeoutException e) {
                closeQuietly(socket);
                problem = e.getMessage();
                sleep(100);
            } catch (IOException e) {
                closeQuietly(socket);
                throw new UserError("rendezvous: cannot connect to " + who + " at " + address + ": " + e.getMessage(), e);
            }
        }
        throw new UserError("rendezvous: timed out after " + JobLayout.seconds(settings.rendezvousTimeout())
                + " connecting to " + who + " at " + address + " (" + problem + ")");
    }

    private static Duration left(long deadline) {
        return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
    }

    // ---- LocalRanks --------------------------------------------------------------------------------------

    public JobLayout layout() {
        return layout;
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
        return rank(globalRank, CpuBackend.INSTANCE);
    }

    /** The context of a rank this process hosts, with {@code backend} (a CPU backend: tensors on the heap). */
    public RankContext rank(int globalRank, Backend backend) {
        if (processOf(globalRank) != layout.process()) {
            throw new IllegalArgumentException("rank " + globalRank + " is not hosted by this process (ranks "
                    + ranks() + ")");
        }
        int replica = mesh.replicaOf(globalRank), shardRank = mesh.shardRankOf(globalRank);
        return new RankContext(globalRank, mesh, backend, progress.counted(globalRank, groups.get("world").member(globalRank)),
                progress.counted(globalRank, groups.get("shard." + replica).member(shardRank)),
                progress.counted(globalRank, groups.get("replicate." + shardRank).member(replica)));
    }

    @Override
    public void beginStep(int rank, int step) {
        progress.beginStep(rank, step);
    }

    /**
     * Why {@code what} of rank {@code rank} (the collective it is in) has had no data from a peer for
     * {@code waited}, from every process's progress in the store ({@link JobProgress#explainFromStore}):
     * {@code direct} (what this process saw) when no process is behind, or when the store cannot tell.
     */
    @Override
    public String explainTimeout(int rank, String what, Duration waited, String direct) {
        if (rendezvous == null) {
            return direct;
        }
        long seq = progress.byRank().get(rank).issued();
        String why = JobProgress.explainFromStore(rendezvous.store(), layout, seq, what, waited, direct);
        return why == null ? direct : why + " (" + JobStart.COLLECTIVE_TIMEOUT_ENV + "=" + collectiveTimeout.toSeconds() + ")";
    }

    /** When the last rank of this process is closed, so are its connections (and the store, on the first process). */
    @Override
    public void close(RankContext rank) {
        if (closedRanks.add(rank.rank()) && closedRanks.size() == ranks().size()) {
            close();
        }
    }

    @Override
    public void abort(String reason) {
        groups.values().forEach(g -> g.abort(reason));
    }

    @Override
    public String devices() {
        return "cpu x" + mesh.worldSize() + " (" + layout.processes() + " processes)";
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        progress.close();
        long deadline = System.nanoTime() + 2_000_000_000L; // for aborted connections to hear their peers close
        List<Thread> closing = new ArrayList<>();
        for (Group g : groups.values()) {
            if (g.tcp() != null) {
                closing.add(Thread.ofVirtual().start(() -> g.tcp().close(deadline)));
            }
        }
        for (Thread t : closing) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        List<AutoCloseable> all;
        synchronized (resources) {
            all = new ArrayList<>(resources);
        }
        for (AutoCloseable c : all.reversed()) {
            closeQuietly(c);
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception e) {
            // closing anyway
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UserError("rendezvous: interrupted");
        }
    }
}
