package io.fsdp4j.job;

import io.fsdp4j.comm.CollectiveProgress;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.tensor.Tensor;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.IntFunction;
import java.util.function.LongSupplier;

/**
 * How far the ranks of this process have come, for the message of a job that hangs: per rank, its training step and
 * how many collectives it has issued, started (its own work before them done) and completed. Collectives are
 * counted from 1 in the order a rank calls them, over all its groups; every rank of a job calls the same ones in
 * the same order, so the counts of different ranks compare.
 *
 * <p>In a job of several processes, a daemon thread publishes this process's summary (its least advanced rank) to
 * the rendezvous store a few times a second ({@link #publish}). When a collective does not finish in time, the
 * process that noticed reads everyone's ({@link #explainFromStore}) and names the ones holding the others up
 * ({@link #explain}): a process that stopped publishing (stopped, frozen, unreachable), one that has not issued
 * the collective (stuck on its host: a deadlock, a long pause), or one whose own work before it has not finished
 * (a kernel that hangs).
 */
final class JobProgress implements AutoCloseable, CollectiveProgress {
    /** How often a process publishes its progress. */
    static final Duration PUBLISH_EVERY = Duration.ofMillis(250);
    /** How long a reader waits for every process to publish again: one that does not has stopped publishing. */
    static final Duration SILENCE = Duration.ofMillis(2000);
    private static final String KEY = "progress/";

    /**
     * One rank's or one process's progress. {@code idleMillis}: how long its counts have not moved, when
     * {@code wallMillis} (its clock) was read; {@code beat} counts its publications.
     */
    record Progress(int step, long issued, long started, long completed, long idleMillis, long beat, long wallMillis) {
        String encode() {
            return step + " " + issued + " " + started + " " + completed + " " + idleMillis + " " + beat + " " + wallMillis;
        }

        static Progress decode(String text) {
            String[] f = text.strip().split(" ");
            if (f.length != 7) {
                throw new IllegalArgumentException("not a progress record: '" + text + "'");
            }
            return new Progress(Integer.parseInt(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]),
                    Long.parseLong(f[4]), Long.parseLong(f[5]), Long.parseLong(f[6]));
        }
    }

    private final List<Integer> ranks;
    private final LongSupplier clock; // nanoseconds
    private final AtomicIntegerArray step;
    private final AtomicLongArray issued, started, completed, lastMove;
    private volatile boolean closed;
    private Thread publisher;

    /** The progress of {@code ranks} (global ranks, this process's), timed by {@link System#nanoTime}. */
    JobProgress(List<Integer> ranks) {
        this(ranks, System::nanoTime);
    }

    JobProgress(List<Integer> ranks, LongSupplier clock) {
        this.ranks = List.copyOf(ranks);
        this.clock = clock;
        int n = ranks.size();
        this.step = new AtomicIntegerArray(n);
        this.issued = new AtomicLongArray(n);
        this.started = new AtomicLongArray(n);
        this.completed = new AtomicLongArray(n);
        this.lastMove = new AtomicLongArray(n);
        long now = clock.getAsLong();
        for (int i = 0; i < n; i++) {
            lastMove.set(i, now);
        }
    }

    private int index(int rank) {
        int i = ranks.indexOf(rank);
        if (i < 0) {
            throw new IllegalArgumentException("rank " + rank + " is not one of " + ranks);
        }
        return i;
    }

    /** Rank {@code rank} begins training step {@code s}. */
    void beginStep(int rank, int s) {
        step.set(index(rank), s);
    }

    /** Rank {@code rank} issues its next collective: returns its number (from 1). */
    @Override
    public Set<Integer> ranks() {
        return byRank().keySet();
    }

    @Override
    public long issue(int rank) {
        int i = index(rank);
        lastMove.set(i, clock.getAsLong());
        return issued.incrementAndGet(i);
    }

    /** The work before collective {@code seq} of {@code rank} is done: the collective can run. */
    @Override
    public void start(int rank, long seq) {
        started.accumulateAndGet(index(rank), seq, Math::max);
    }

    /** Collective {@code seq} of {@code rank} (and every one before it) has completed. */
    @Override
    public void complete(int rank, long seq) {
        int i = index(rank);
        started.accumulateAndGet(i, seq, Math::max);
        completed.accumulateAndGet(i, seq, Math::max);
        lastMove.set(i, clock.getAsLong());
    }

    /** Each rank's progress now, by global rank. */
    Map<Integer, Progress> byRank() {
        Map<Integer, Progress> all = new TreeMap<>();
        long now = clock.getAsLong(), wall = System.currentTimeMillis();
        for (int i = 0; i < ranks.size(); i++) {
            all.put(ranks.get(i), new Progress(step.get(i), issued.get(i), started.get(i), completed.get(i),
                    Duration.ofNanos(now - lastMove.get(i)).toMillis(), 0, wall));
        }
        return all;
    }

    /** This process's progress: that of its least advanced rank, idle since the last move of any of them. */
    Progress summary(long beat) {
        var all = byRank().values();
        return new Progress(all.stream().mapToInt(Progress::step).min().orElse(0),
                all.stream().mapToLong(Progress::issued).min().orElse(0),
                all.stream().mapToLong(Progress::started).min().orElse(0),
                all.stream().mapToLong(Progress::completed).min().orElse(0),
                all.stream().mapToLong(Progress::idleMillis).min().orElse(0), beat, System.currentTimeMillis());
    }

    /**
     * Publishes this process's summary as {@code progress/PROCESS} every {@link #PUBLISH_EVERY} from a daemon thread,
     * until {@link #close} or until the store goes away (which {@link JobWatch} reports).
     */
    void publish(RendezvousClient store, int process) {
        publisher = Thread.ofPlatform().daemon().name("job-progress").start(() -> {
            long beat = 0;
            while (!closed) {
                try {
                    store.set(KEY + process, summary(++beat).encode());
                    Thread.sleep(PUBLISH_EVERY);
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    return; // the store is gone: nothing to publish to
                }
            }
        });
    }

    /**
     * Reads every process's published progress twice, {@link #SILENCE} apart, and explains why collective
     * {@code seq} ({@code what}) of this process has waited {@code waited} ({@link #explain}) from the first reading
     * (where each was when the wait ran out); processes that published nothing new in between are silent. Null when
     * the store cannot be read; {@code ifNobody} (when not null) when no process is behind.
     */
    static String explainFromStore(RendezvousClient store, JobLayout layout, long seq, String what, Duration waited,
                                   String ifNobody) {
        try {
            Map<Integer, Progress> before = read(store, layout.processes());
            Thread.sleep(SILENCE);
            Map<Integer, Progress> after = read(store, layout.processes());
            Set<Integer> silent = new java.util.TreeSet<>();
            Map<Integer, Progress> then = new TreeMap<>(after);
            then.putAll(before);
            for (int p = 0; p < layout.processes(); p++) {
                Progress a = before.get(p), b = after.get(p);
                if (b == null || a != null && a.beat() == b.beat()) {
                    silent.add(p);
                }
            }
            return explain(layout.process(), seq, what, waited, then, silent, layout::describeProcess, ifNobody);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } catch (RuntimeException e) {
            return null;
        }
    }

    private static Map<Integer, Progress> read(RendezvousClient store, int processes) {
        Map<Integer, Progress> all = new TreeMap<>();
        for (int p = 0; p < processes; p++) {
            int process = p;
            store.getString(KEY + p, Duration.ZERO).ifPresent(s -> all.put(process, Progress.decode(s)));
        }
        return all;
    }

    /**
     * One line on why collective {@code seq} ({@code what}, e.g. "all-gather on group 'world'") of {@code waiter}
     * has not finished after {@code waited}, from the progress of every participant (process or rank; absent: it
     * never published), {@code silent} those that stopped publishing, and how each is named. Participants that hold
     * it up: the silent ones, those that have not issued collective {@code seq}, and those whose own work before it
     * has not finished. When none does, every one has issued it with its inputs ready: a network or NCCL fault.
     */
    static String explain(int waiter, long seq, String what, Duration waited, Map<Integer, Progress> all,
                          Set<Integer> silent, IntFunction<String> name) {
        return explain(waiter, seq, what, waited, all, silent, name, null);
    }

    /** {@link #explain}, saying {@code ifNobody} (when not null) where no participant is behind. */
    static String explain(int waiter, long seq, String what, Duration waited, Map<Integer, Progress> all,
                          Set<Integer> silent, IntFunction<String> name, String ifNobody) {
        List<String> culprits = new ArrayList<>();
        List<Integer> named = new ArrayList<>();
        long nowWall = System.currentTimeMillis();
        for (var e : new TreeMap<>(all).entrySet()) {
            int who = e.getKey();
            Progress p = e.getValue();
            String idle = JobLayout.seconds(Duration.ofMillis(p.idleMillis()
                    + (silent.contains(who) ? Math.max(0, nowWall - p.wallMillis()) : 0)));
            String at = "step " + p.step() + ", collective " + p.issued();
            if (silent.contains(who)) {
                culprits.add(name.apply(who) + " has not progressed for " + idle + " and stopped reporting (last at "
                        + at + "; is it stopped, frozen or unreachable?)");
            } else if (p.issued() < seq) {
                culprits.add(name.apply(who) + " has not progressed for " + idle + " (last at " + at
                        + "; it has not called collective " + seq + ")");
            } else if (p.started() < seq) {
                culprits.add(name.apply(who) + "'s own work before collective " + seq + " has not finished for " + idle
                        + " (at step " + p.step() + "; a kernel that hangs?)");
            } else {
                continue;
            }
            named.add(who);
        }
        for (int who : silent) {
            if (!all.containsKey(who)) {
                culprits.add(name.apply(who) + " never reported its progress");
                named.add(who);
            }
        }
        String waiting = what + " (collective " + seq + ") for " + JobLayout.seconds(waited);
        if (culprits.isEmpty()) {
            return ifNobody != null ? ifNobody : name.apply(waiter) + " has waited in " + waiting
                    + ", which every rank has called with its inputs ready (a network or NCCL fault?)";
        }
        long others = named.stream().filter(w -> w != waiter).count();
        return String.join("; ", culprits) + "; " + name.apply(waiter) + " waits "
                + (others == 0 ? "" : others == 1 ? "for it " : "for them ") + "in " + waiting;
    }

    /**
     * {@code group} as rank {@code rank} uses it, its collectives counted here: for groups whose collectives return
     * when done (on CPU ranks), so that a collective is started when called and completed when it returns.
     */
    ProcessGroup counted(int rank, ProcessGroup group) {
        index(rank);
        return new ProcessGroup() {
            private long begin() {
                long seq = issue(rank);
                start(rank, seq);
                return seq;
            }

            @Override
            public int rank() {
                return group.rank();
            }

            @Override
            public int size() {
                return group.size();
            }

            @Override
            public void allGather(Tensor shard, Tensor full) {
                long seq = begin();
                group.allGather(shard, full);
                complete(rank, seq);
            }

            @Override
            public void reduceScatter(Tensor full, Tensor shard) {
                long seq = begin();
                group.reduceScatter(full, shard);
                complete(rank, seq);
            }

            @Override
            public void allReduce(Tensor t) {
                long seq = begin();
                group.allReduce(t);
                complete(rank, seq);
            }

            @Override
            public void broadcast(Tensor t, int root) {
                long seq = begin();
                group.broadcast(t, root);
                complete(rank, seq);
            }

            @Override
            public double[] allReduce(double[] values) {
                long seq = begin();
                double[] sums = group.allReduce(values);
                complete(rank, seq);
                return sums;
            }

            @Override
            public void barrier() {
                long seq = begin();
                group.barrier();
                complete(rank, seq);
            }
        };
    }

    /** Stops publishing. */
    @Override
    public void close() {
        closed = true;
        if (publisher != null) {
            publisher.interrupt();
        }
    }
}
