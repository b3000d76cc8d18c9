package io.fsdp4j.comm.tcp;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.AbortableBarrier;
import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.comm.tcp.PeerLink.InFrame;
import io.fsdp4j.comm.tcp.PeerLink.InPiece;
import io.fsdp4j.comm.tcp.PeerLink.OutPiece;
import io.fsdp4j.comm.tcp.PeerLink.Source;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.io.EOFException;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Collectives of a group whose members live in several processes, on CPU tensors. Inside a process the members
 * meet as {@link InProcessGroup}'s do; the first of them (the leader) then trades with the other processes of the
 * group, one {@link PeerLink} each, and every member computes its output. Each output element is the same sum,
 * in the same order (group rank order, from 0f), as {@link InProcessGroup}'s, so both give the same bits:
 * <ul>
 *   <li>all-gather: every process sends its members' shards to every other;</li>
 *   <li>reduce-scatter: every process sends each other process the slices that process's members own; each sums
 *       its own slices over all members;</li>
 *   <li>all-reduce: the elements are cut into one chunk per process; a process sums its chunk over all members
 *       (as reduce-scatter) and sends the sum (fp32) to the others (as all-gather);</li>
 *   <li>broadcast: the root's process sends its tensor to the others; host doubles: all to all.</li>
 * </ul>
 * A peer that fails, disappears or stays silent longer than the timeout aborts the whole world, naming it.
 */
public final class TcpGroup {
    private static final CpuBackend CPU = CpuBackend.INSTANCE;

    /** The collectives; their ordinal travels in each frame, so a peer calling another one is caught. */
    private enum Kind {
        ALL_GATHER("all-gather"), REDUCE_SCATTER("reduce-scatter"), ALL_REDUCE("all-reduce"),
        ALL_REDUCE_SUMS("all-reduce"), BROADCAST("broadcast"), ALL_REDUCE_DOUBLES("all-reduce of host values"),
        BARRIER("barrier");

        final String spelling;

        Kind(String spelling) {
            this.spelling = spelling;
        }
    }

    /** What a group needs of the job it belongs to. */
    public interface Owner {
        /** Aborts every group of the job (this one included), telling the other processes why. */
        void abort(String reason);

        /** Why collective {@code what} of {@code rank} waited {@code waited}, as far as the job knows; else {@code direct}. */
        String explainTimeout(int rank, String what, Duration waited, String direct);
    }

    static String seconds(Duration d) {
        long ms = d.toMillis();
        return (ms % 1000 == 0 ? Long.toString(ms / 1000) : String.format(Locale.ROOT, "%.1f", ms / 1000.0)) + " s";
    }

    private record Op(Kind kind, long count, int root) {}

    private final Owner world;
    private final String name;
    private final List<Integer> globalRanks;
    private final int[] processOf;              // by member (group rank)
    private final List<Integer> processes;       // the processes of the group, ascending
    private final int me;                        // this process
    private final List<Integer> local;           // members hosted here, ascending
    private final Map<Integer, PeerLink> links;  // by process, ascending
    private final Duration timeout;
    private final AbortableBarrier arrive, done, depart;
    private final Object[] inputs;
    private final Op[] ops;
    private final long[] arrivals;
    private volatile String abortReason;
    private long seq;

    // the last exchange's results, read by the members between 'done' and 'depart'
    private Object[] byMember;   // all-gather: Tensor per member; host doubles: double[] sum at 0
    private Tensor rootTensor;
    private float[][] slices;    // reduce-scatter: per member hosted here
    private float[] sums;        // all-reduce

    public TcpGroup(Owner world, String name, List<Integer> globalRanks, int ranksPerProcess, int me,
             Map<Integer, PeerLink> links, Duration timeout) {
        this.world = world;
        this.name = name;
        this.globalRanks = List.copyOf(globalRanks);
        this.processOf = globalRanks.stream().mapToInt(r -> r / ranksPerProcess).toArray();
        this.processes = globalRanks.stream().map(r -> r / ranksPerProcess).distinct().sorted().toList();
        this.me = me;
        List<Integer> mine = new ArrayList<>();
        for (int m = 0; m < processOf.length; m++) {
            if (processOf[m] == me) {
                mine.add(m);
            }
        }
        this.local = List.copyOf(mine);
        this.links = new LinkedHashMap<>();
        processes.stream().filter(p -> p != me).forEach(p -> this.links.put(p, Objects.requireNonNull(links.get(p))));
        this.timeout = timeout;
        this.arrive = new AbortableBarrier(local.size());
        this.done = new AbortableBarrier(local.size());
        this.depart = new AbortableBarrier(local.size());
        this.inputs = new Object[globalRanks.size()];
        this.ops = new Op[globalRanks.size()];
        this.arrivals = new long[globalRanks.size()];
    }

    public ProcessGroup member(int groupRank) {
        if (processOf[groupRank] != me) {
            throw new IllegalArgumentException("rank " + globalRanks.get(groupRank) + " is not hosted by this process");
        }
        return new Member(groupRank);
    }

    /** Releases every member waiting now or later, and tells the other processes of the group. */
    public void abort(String reason) {
        String first;
        synchronized (this) {
            if (abortReason == null) {
                abortReason = reason;
            }
            first = abortReason;
        }
        // the other processes first: a member released here may be the process's last to close its rank, which
        // closes the connections, and a peer must read the reason before it sees them closed
        links.values().forEach(l -> l.abort(first));
        arrive.abort(first);
        done.abort(first);
        depart.abort(first);
    }

    /** Closes the connections; after an abort, each waits until {@code deadline} (nanoTime) for its peer's close. */
    public void close(long deadline) {
        List<Thread> closing = new ArrayList<>();
        for (PeerLink link : links.values()) {
            closing.add(Thread.ofVirtual().start(() -> link.close(deadline)));
        }
        for (Thread t : closing) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                links.values().forEach(PeerLink::close);
                return;
            }
        }
    }

    // ---- the members' side ----------------------------------------------------------------------------

    private final class Member implements ProcessGroup {
        private final int rank;

        Member(int rank) {
            this.rank = rank;
        }

        @Override
        public int rank() {
            return rank;
        }

        @Override
        public int size() {
            return globalRanks.size();
        }

        @Override
        public void allGather(Tensor shard, Tensor full) {
            long n = shard.numel();
            if (full.numel() != n * size()) {
                throw new IllegalArgumentException("all-gather of " + shard + " into " + full);
            }
            collective(new Op(Kind.ALL_GATHER, n, -1), shard);
            for (int r = 0; r < size(); r++) {
                CPU.copy((Tensor) byMember[r], full.view(r * n, Math.toIntExact(n)));
            }
            await(depart, "depart");
        }

        @Override
        public void reduceScatter(Tensor full, Tensor shard) {
            int n = Math.toIntExact(shard.numel());
            if (full.numel() != (long) n * size()) {
                throw new IllegalArgumentException("reduce-scatter of " + full + " into " + shard);
            }
            collective(new Op(Kind.REDUCE_SCATTER, n, -1), full);
            float[] sum = slices[rank];
            for (int i = 0; i < n; i++) {
                set(shard, i, sum[i]);
            }
            await(depart, "depart");
        }

        @Override
        public void allReduce(Tensor t) {
            collective(new Op(Kind.ALL_REDUCE, t.numel(), -1), t);
            float[] sum = sums;
            for (int i = 0; i < sum.length; i++) {
                set(t, i, sum[i]);
            }
            await(depart, "depart");
        }

        @Override
        public void broadcast(Tensor t, int root) {
            if (root < 0 || root >= size()) {
                throw new IllegalArgumentException("broadcast root " + root + " outside a group of " + size());
            }
            collective(new Op(Kind.BROADCAST, t.numel(), root), t);
            if (rank != root) {
                CPU.copy(rootTensor, t);
            }
            await(depart, "depart");
        }

        @Override
        public double[] allReduce(double[] values) {
            collective(new Op(Kind.ALL_REDUCE_DOUBLES, values.length, -1), values);
            double[] sum = ((double[]) byMember[0]).clone();
            await(depart, "depart");
            return sum;
        }

        @Override
        public void barrier() {
            collective(new Op(Kind.BARRIER, 0, -1), null);
            await(depart, "depart");
        }

        /** Publishes this member's input; the leader trades with the other processes; all wait for the results. */
        private void collective(Op op, Object input) {
            inputs[rank] = input;
            ops[rank] = op;
            arrivals[rank]++;
            await(arrive, "arrive");
            if (rank == local.getFirst()) {
                try {
                    exchange();
                } catch (RuntimeException | Error e) {
                    String reason = e instanceof CollectiveAbortedException ? e.getMessage()
                            : "collective on group '" + name + "' failed in process " + me + ": " + e;
                    world.abort(reason);
                    throw e instanceof CollectiveAbortedException c ? c : new CollectiveAbortedException(reason);
                }
            }
            // the leader's trade is bounded by the links' timeouts; this wait only guards against a lost leader
            await(done, "done", timeout.multipliedBy(4).plusSeconds(60));
        }
    }

    private void await(AbortableBarrier barrier, String phase) {
        await(barrier, phase, timeout);
    }

    private void await(AbortableBarrier barrier, String phase, Duration limit) {
        if (!barrier.await(limit)) {
            String reason = "collective on group '" + name + "' timed out after " + seconds(limit) + ": "
                    + (phase.equals("arrive") ? lateMembers() : "the ranks of this process did not all finish it");
            world.abort(reason);
            throw new CollectiveAbortedException(abortReason != null ? abortReason : reason);
        }
    }

    /** "rank(s) 3 did not arrive": this process's members that have called fewer collectives than the others. */
    private String lateMembers() {
        long most = local.stream().mapToLong(m -> arrivals[m]).max().orElse(0);
        List<Integer> late = local.stream().filter(m -> arrivals[m] < most).map(globalRanks::get).toList();
        return (late.isEmpty() ? "a rank of " + local.stream().map(globalRanks::get).toList() : "rank(s) " + late)
                + " did not arrive";
    }

    private static void set(Tensor t, int i, float v) {
        if (t.dtype() != DType.F32) {
            CpuBackend.halves(t)[CpuBackend.off(t) + i] = Half.toBits(t.dtype(), v);
        } else {
            CpuBackend.f32(t)[CpuBackend.off(t) + i] = v;
        }
    }

    private static float get(Tensor t, int i) {
        return t.dtype() != DType.F32 ? Half.fromBits(t.dtype(), CpuBackend.halves(t)[CpuBackend.off(t) + i])
                : CpuBackend.f32(t)[CpuBackend.off(t) + i];
    }

    // ---- the leader's side ----------------------------------------------------------------------------

    private void exchange() {
        Op op = ops[local.getFirst()];
        for (int m : local) {
            if (!op.equals(ops[m])) {
                throw new IllegalStateException("ranks of group '" + name + "' called different collectives: "
                        + describe(op) + " and " + describe(ops[m]));
            }
        }
        seq++;
        switch (op.kind()) {
            case ALL_GATHER -> allGather(op);
            case REDUCE_SCATTER -> reduceScatter(op);
            case ALL_REDUCE -> allReduce(op);
            case BROADCAST -> broadcast(op);
            case ALL_REDUCE_DOUBLES -> allReduceDoubles(op);
            case BARRIER -> trade(Kind.BARRIER, op.count(), all(List.of()), links.keySet());
            default -> throw new IllegalStateException(op.kind().toString());
        }
    }

    private static String describe(Op op) {
        return op.kind().spelling + " of " + op.count() + (op.root() >= 0 ? " from " + op.root() : "");
    }

    private Map<Integer, List<OutPiece>> all(List<OutPiece> pieces) {
        Map<Integer, List<OutPiece>> out = new LinkedHashMap<>();
        links.keySet().forEach(p -> out.put(p, pieces));
        return out;
    }

    private void allGather(Op op) {
        int n = Math.toIntExact(op.count());
        List<OutPiece> mine = new ArrayList<>();
        for (int m : local) {
            mine.add(new OutPiece(m, 0, new Source.TensorRange((Tensor) inputs[m], 0, n)));
        }
        Object[] result = new Object[inputs.length];
        for (int m : local) {
            result[m] = inputs[m];
        }
        for (List<InPiece> pieces : trade(Kind.ALL_GATHER, n, all(mine), links.keySet()).values()) {
            for (InPiece p : pieces) {
                result[p.member()] = p.tensor();
            }
        }
        byMember = result;
    }

    private void broadcast(Op op) {
        int n = Math.toIntExact(op.count()), root = op.root();
        if (processOf[root] == me) {
            trade(Kind.BROADCAST, n, all(List.of(new OutPiece(root, 0, new Source.TensorRange((Tensor) inputs[root], 0, n)))),
                    List.of());
            rootTensor = (Tensor) inputs[root];
        } else {
            var received = trade(Kind.BROADCAST, n, Map.of(), List.of(processOf[root]));
            rootTensor = received.get(processOf[root]).getFirst().tensor();
        }
    }

    private void reduceScatter(Op op) {
        int n = Math.toIntExact(op.count()), size = inputs.length;
        Map<Integer, List<OutPiece>> out = new LinkedHashMap<>();
        for (int p : links.keySet()) {
            List<OutPiece> pieces = new ArrayList<>();
            for (int m : local) {
                for (int owner = 0; owner < size; owner++) {
                    if (processOf[owner] == p) {
                        pieces.add(new OutPiece(m, owner, new Source.TensorRange((Tensor) inputs[m], (long) owner * n, n)));
                    }
                }
            }
            out.put(p, pieces);
        }
        float[][][] remote = new float[size][][]; // [owner][member] -> the member's slice for owner
        for (List<InPiece> pieces : trade(Kind.REDUCE_SCATTER, n, out, links.keySet()).values()) {
            for (InPiece p : pieces) {
                remote[p.slot()] = remote[p.slot()] == null ? new float[size][] : remote[p.slot()];
                remote[p.slot()][p.member()] = p.floats();
            }
        }
        float[][] result = new float[size][];
        for (int owner : local) {
            float[] sum = new float[n];
            int base = owner * n;
            for (int m = 0; m < size; m++) { // rank order, as InProcessGroup sums
                if (processOf[m] == me) {
                    Tensor t = (Tensor) inputs[m];
                    for (int i = 0; i < n; i++) {
                        sum[i] += get(t, base + i);
                    }
                } else {
                    float[] v = remote[owner][m];
                    for (int i = 0; i < n; i++) {
                        sum[i] += v[i];
                    }
                }
            }
            result[owner] = sum;
        }
        slices = result;
    }

    private void allReduce(Op op) {
        int n = Math.toIntExact(op.count()), size = inputs.length, chunks = processes.size();
        int myChunk = processes.indexOf(me);
        int lo = chunkStart(n, chunks, myChunk), len = chunkStart(n, chunks, myChunk + 1) - lo;
        // 1. each process sums its own chunk over every member
        Map<Integer, List<OutPiece>> out = new LinkedHashMap<>();
        for (int p : links.keySet()) {
            int c = processes.indexOf(p), from = chunkStart(n, chunks, c), count = chunkStart(n, chunks, c + 1) - from;
            List<OutPiece> pieces = new ArrayList<>();
            for (int m : local) {
                pieces.add(new OutPiece(m, 0, new Source.TensorRange((Tensor) inputs[m], from, count)));
            }
            out.put(p, pieces);
        }
        float[][] remote = new float[size][];
        for (List<InPiece> pieces : trade(Kind.ALL_REDUCE, n, out, links.keySet()).values()) {
            for (InPiece p : pieces) {
                if (p.count() != len) {
                    throw new IllegalStateException("group '" + name + "': a peer sent " + p.count() + " elements of an "
                            + "all-reduce chunk of " + len + " (ranks called it with different sizes)");
                }
                remote[p.member()] = p.floats();
            }
        }
        float[] chunk = new float[len];
        for (int m = 0; m < size; m++) {
            if (processOf[m] == me) {
                Tensor t = (Tensor) inputs[m];
                for (int i = 0; i < len; i++) {
                    chunk[i] += get(t, lo + i);
                }
            } else {
                float[] v = remote[m];
                for (int i = 0; i < len; i++) {
                    chunk[i] += v[i];
                }
            }
        }
        // 2. every process gathers the summed chunks
        float[] sum = new float[n];
        System.arraycopy(chunk, 0, sum, lo, len);
        var received = trade(Kind.ALL_REDUCE_SUMS, n, all(List.of(new OutPiece(local.getFirst(), 0, new Source.Floats(chunk)))),
                links.keySet());
        for (var e : received.entrySet()) {
            float[] v = e.getValue().getFirst().floats();
            System.arraycopy(v, 0, sum, chunkStart(n, chunks, processes.indexOf(e.getKey())), v.length);
        }
        sums = sum;
    }

    private static int chunkStart(int n, int chunks, int c) {
        return (int) ((long) n * c / chunks);
    }

    private void allReduceDoubles(Op op) {
        int size = inputs.length;
        List<OutPiece> mine = new ArrayList<>();
        double[][] all = new double[size][];
        for (int m : local) {
            mine.add(new OutPiece(m, 0, new Source.Doubles((double[]) inputs[m])));
            all[m] = (double[]) inputs[m];
        }
        for (List<InPiece> pieces : trade(Kind.ALL_REDUCE_DOUBLES, op.count(), all(mine), links.keySet()).values()) {
            for (InPiece p : pieces) {
                all[p.member()] = (double[]) p.data();
            }
        }
        double[] sum = new double[Math.toIntExact(op.count())];
        for (double[] other : all) { // rank order
            for (int i = 0; i < sum.length; i++) {
                sum[i] += other[i];
            }
        }
        byMember = new Object[] {sum};
    }

    /**
     * Sends each peer its pieces (each on its own thread, so that two processes sending to each other cannot
     * both block on full buffers) while reading one frame from each of {@code from}, in process order.
     */
    private Map<Integer, List<InPiece>> trade(Kind kind, long count, Map<Integer, List<OutPiece>> out,
                                              Iterable<Integer> from) {
        List<Thread> senders = new ArrayList<>();
        AtomicReference<String> sendFailure = new AtomicReference<>();
        for (var e : out.entrySet()) {
            PeerLink link = links.get(e.getKey());
            senders.add(Thread.ofVirtual().name("send-" + name + "-" + link.process).start(() -> {
                try {
                    link.write(kind.ordinal(), seq, e.getValue());
                } catch (IOException ex) {
                    sendFailure.compareAndSet(null, lost(link, kind, ex));
                }
            }));
        }
        Map<Integer, List<InPiece>> received = new LinkedHashMap<>();
        for (int p : from) {
            PeerLink link = links.get(p);
            InFrame frame;
            try {
                frame = link.read();
            } catch (IOException ex) {
                throw new CollectiveAbortedException(abortReason != null ? abortReason : lost(link, kind, ex));
            }
            if (frame.abortReason() != null) {
                throw new CollectiveAbortedException(link.who + " stopped the job: " + frame.abortReason());
            }
            if (frame.kind() != kind.ordinal() || frame.seq() != seq) {
                String theirs = frame.kind() >= 0 && frame.kind() < Kind.values().length
                        ? Kind.values()[frame.kind()].spelling : "kind " + frame.kind();
                throw new IllegalStateException("group '" + name + "': " + link.who + " called " + theirs + " (collective #"
                        + frame.seq() + ") where this process called " + kind.spelling + " (#" + seq + ")");
            }
            for (InPiece piece : frame.pieces()) {
                long expected = kind == Kind.ALL_REDUCE || kind == Kind.ALL_REDUCE_SUMS ? piece.count() : count;
                if (piece.count() != expected || piece.member() < 0 || piece.member() >= inputs.length) {
                    throw new IllegalStateException("group '" + name + "': " + link.who + " sent " + piece.count()
                            + " elements for a " + kind.spelling + " of " + count + " (ranks called it with different sizes)");
                }
            }
            received.put(p, frame.pieces());
        }
        for (Thread t : senders) {
            try {
                if (!t.join(timeout)) {
                    throw new CollectiveAbortedException("collective on group '" + name + "': sending to a peer took"
                            + " longer than " + seconds(timeout));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CollectiveAbortedException("interrupted while sending on group '" + name + "'");
            }
        }
        if (sendFailure.get() != null) {
            throw new CollectiveAbortedException(abortReason != null ? abortReason : sendFailure.get());
        }
        return received;
    }

    private String lost(PeerLink link, Kind kind, IOException e) {
        String what = e instanceof SocketTimeoutException ? "no data from " + link.who + " for " + seconds(timeout)
                : e instanceof EOFException ? link.who + " closed the connection (did it stop?)"
                : "lost the connection to " + link.who + " (" + e.getMessage() + ")";
        String direct = kind.spelling + " on group '" + name + "' failed: " + what;
        if (e instanceof SocketTimeoutException) { // a peer alive but stuck, or waiting for another: the store tells
            return world.explainTimeout(globalRanks.get(local.getFirst()), kind.spelling + " on group '" + name + "'",
                    timeout, direct);
        }
        return direct;
    }
}
