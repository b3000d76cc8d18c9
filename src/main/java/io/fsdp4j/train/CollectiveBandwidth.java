package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Consumer;

/**
 * {@code fsdp4j nccl-test}'s measurement: all-gather, reduce-scatter and all-reduce over a range of sizes on each
 * group of the mesh (the world, the shard groups, the replicate groups; a group that is the world again, or of one
 * rank, is left out), with the figures defined as nccl-tests defines them:
 * <ul>
 *   <li>size: the bytes of the whole buffer: the gathered output of an all-gather, the input of a
 *       reduce-scatter, the buffer of an all-reduce;</li>
 *   <li>time: the mean of {@code iters} back-to-back calls after {@code warmup} (the slowest member's);</li>
 *   <li>algorithm bandwidth = size / time;</li>
 *   <li>bus bandwidth = algbw x (n-1)/n for all-gather and reduce-scatter, x 2(n-1)/n for all-reduce: what each
 *       link carries, comparable with the hardware's peak whatever n is.</li>
 * </ul>
 * The groups of one kind (all shard groups, say) run at once, as in training. The first call of each measurement
 * is checked (every member's input is its group rank + 1), so a wrong collective fails the test, not only a slow
 * one. Types as FSDP uses them: all-gather of bf16 parameters, reduce-scatter and all-reduce of fp32 gradients.
 */
public final class CollectiveBandwidth {
    private CollectiveBandwidth() {}

    /** The collectives measured, each with the dtype FSDP moves through it. */
    public enum Collective {
        ALL_GATHER("all_gather", DType.BF16, io.fsdp4j.plan.Collective.ALL_GATHER),
        REDUCE_SCATTER("reduce_scatter", DType.F32, io.fsdp4j.plan.Collective.REDUCE_SCATTER),
        ALL_REDUCE("all_reduce", DType.F32, io.fsdp4j.plan.Collective.ALL_REDUCE);

        public final String spelling;
        public final DType dtype;
        private final io.fsdp4j.plan.Collective model;

        Collective(String spelling, DType dtype, io.fsdp4j.plan.Collective model) {
            this.spelling = spelling;
            this.dtype = dtype;
            this.model = model;
        }

        /** nccl-tests' factor from algorithm to bus bandwidth for a group of {@code n} (as the planner's). */
        public double busFactor(int n) {
            return model.busFactor(n);
        }
    }

    /** Sizes {@code minBytes}, x {@code factor}, ... up to {@code maxBytes}; calls per size. */
    public record Options(long minBytes, long maxBytes, int factor, int warmup, int iters) {
        public Options {
            if (minBytes < 1 || maxBytes < minBytes || factor < 2 || warmup < 0 || iters < 1) {
                throw new UserError("nccl-test: need 1 <= --min-bytes <= --max-bytes, --factor >= 2, --warmup >= 0, "
                        + "--iters >= 1");
            }
        }

        /** The sizes measured, ascending. */
        public List<Long> sizes() {
            List<Long> sizes = new ArrayList<>();
            for (long s = minBytes; s <= maxBytes; s = Math.multiplyExact(s, (long) factor)) {
                sizes.add(s);
                if (s > Long.MAX_VALUE / factor) {
                    break;
                }
            }
            return sizes;
        }
    }

    /**
     * One measurement on one group. bytes: the whole buffer (as nccl-tests counts it); count: its elements;
     * seconds: the slowest member's mean time per call.
     */
    public record Row(String group, int ranks, Collective collective, long bytes, long count, double seconds) {
        /** Algorithm bandwidth, bytes per second. */
        public double algBw() {
            return bytes / seconds;
        }

        /** Bus bandwidth, bytes per second. */
        public double busBw() {
            return algBw() * collective.busFactor(ranks);
        }

        /** One line of the table (see {@link #TABLE_HEADER}). */
        public String tableLine() {
            return String.format(Locale.ROOT, "%-13s %5d  %-15s %-5s %13d %12d %12.1f %12.3f %12.3f", group, ranks,
                    collective.spelling, collective.dtype.name().toLowerCase(Locale.ROOT), bytes, count, seconds * 1e6,
                    algBw() / 1e9, busBw() / 1e9);
        }
    }

    /** The table's column names (GB = 1e9 bytes, as nccl-tests). */
    public static final String TABLE_HEADER = String.format(Locale.ROOT, "%-13s %5s  %-15s %-5s %13s %12s %12s %12s %12s",
            "# group", "ranks", "collective", "type", "size(B)", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)");

    /** A kind of group and how a rank finds its own of that kind. */
    private record Kind(String prefix, int size) {}

    /**
     * Runs every measurement on {@code rank} (call it on every rank of the job, each on its own thread); the
     * rows reach {@code rows} on global rank 0, in order, as they are measured.
     */
    public static void measure(RankContext rank, Options options, Consumer<Row> rows) {
        DeviceMesh mesh = rank.mesh();
        List<Kind> kinds = new ArrayList<>();
        if (mesh.worldSize() > 1) {
            kinds.add(new Kind("world", mesh.worldSize()));
        }
        if (mesh.shardSize() > 1 && mesh.replicas() > 1) {
            kinds.add(new Kind("shard", mesh.shardSize()));
        }
        if (mesh.replicas() > 1 && mesh.shardSize() > 1) {
            kinds.add(new Kind("replicate", mesh.replicas()));
        }
        if (kinds.isEmpty()) {
            throw new UserError("nccl-test: a job of one rank has no collective to measure; set dist.ranks to 2 or more");
        }
        for (Kind kind : kinds) {
            ProcessGroup group = switch (kind.prefix()) {
                case "world" -> rank.world();
                case "shard" -> rank.shardGroup();
                default -> rank.replicateGroup();
            };
            for (Collective collective : Collective.values()) {
                for (long size : options.sizes()) {
                    double seconds = time(rank.backend(), group, collective, size, options, kind.prefix());
                    report(rank, kind, collective, size, seconds, rows);
                }
            }
        }
    }

    /** Elements of the whole buffer for about {@code bytes}: a multiple of the group size where it is split. */
    static long count(Collective collective, long bytes, int n) {
        long elements = Math.max(1, bytes / collective.dtype.bytes());
        return collective == Collective.ALL_REDUCE ? elements : Math.max(1, elements / n) * n;
    }

    private static double time(Backend backend, ProcessGroup group, Collective collective, long bytes, Options options,
                               String kind) {
        int n = group.size();
        int count = Math.toIntExact(count(collective, bytes, n));
        MemoryScope scope = backend.newScope();
        try (scope; var entered = scope.enter()) {
            Tensor input, output;
            switch (collective) {
                case ALL_GATHER -> {
                    input = backend.allocate(collective.dtype, count / n);
                    output = backend.allocate(collective.dtype, count);
                }
                case REDUCE_SCATTER -> {
                    input = backend.allocate(collective.dtype, count);
                    output = backend.allocate(collective.dtype, count / n);
                }
                default -> {
                    input = backend.allocate(collective.dtype, count);
                    output = input; // in place
                }
            }
            backend.fill(input, group.rank() + 1);
            call(group, collective, input, output);
            check(backend, group, collective, output, kind);
            for (int i = 1; i < options.warmup(); i++) {
                call(group, collective, input, output);
            }
            group.barrier();
            long start = System.nanoTime();
            for (int i = 0; i < options.iters(); i++) {
                call(group, collective, input, output);
            }
            if (backend instanceof CudaBackend gpu) {
                gpu.synchronize(); // the calls were queued: wait for the last
            }
            return (System.nanoTime() - start) / 1e9 / options.iters();
        }
    }

    private static void call(ProcessGroup group, Collective collective, Tensor input, Tensor output) {
        switch (collective) {
            case ALL_GATHER -> group.allGather(input, output);
            case REDUCE_SCATTER -> group.reduceScatter(input, output);
            case ALL_REDUCE -> group.allReduce(input);
        }
    }

    /** After the first call: gathered blocks r hold r + 1; sums hold 1 + 2 + ... + n. */
    private static void check(Backend backend, ProcessGroup group, Collective collective, Tensor output, String kind) {
        int n = group.size();
        float[] values = backend.toFloats(output);
        int block = collective == Collective.ALL_GATHER ? values.length / n : values.length;
        float sum = n * (n + 1) / 2f;
        for (int i = 0; i < values.length; i++) {
            float expected = collective == Collective.ALL_GATHER ? i / block + 1 : sum;
            if (values[i] != expected) {
                throw new IllegalStateException("nccl-test: " + collective.spelling + " on the " + kind + " group of "
                        + n + " ranks gave " + values[i] + " at element " + i + " of " + values.length + ", not "
                        + expected);
            }
        }
    }

    /** Every rank's time, gathered on the world; rank 0 reports each group's slowest member. */
    private static void report(RankContext rank, Kind kind, Collective collective, long bytes, double seconds,
                               Consumer<Row> rows) {
        DeviceMesh mesh = rank.mesh();
        double[] times = new double[mesh.worldSize()];
        times[rank.rank()] = seconds;
        times = rank.world().allReduce(times);
        if (rank.rank() != 0) {
            return;
        }
        long count = count(collective, bytes, kind.size());
        long actualBytes = count * collective.dtype.bytes();
        int groups = kind.prefix().equals("world") ? 1 : mesh.worldSize() / kind.size();
        for (int g = 0; g < groups; g++) {
            double slowest = 0;
            for (int r = 0; r < mesh.worldSize(); r++) {
                int index = switch (kind.prefix()) {
                    case "world" -> 0;
                    case "shard" -> mesh.replicaOf(r);
                    default -> mesh.shardRankOf(r);
                };
                if (index == g) {
                    slowest = Math.max(slowest, times[r]);
                }
            }
            String name = kind.prefix().equals("world") ? "world" : kind.prefix() + "." + g;
            rows.accept(new Row(name, kind.size(), collective, actualBytes, count, slowest));
        }
    }
}
