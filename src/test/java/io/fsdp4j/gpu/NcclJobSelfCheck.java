package io.fsdp4j.gpu;

import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobStart;
import io.fsdp4j.job.LocalRanks;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.List;
import java.util.Map;

/**
 * A child of {@link GpuMultiProcessTest}, one per emulated node: joins the job on GPUs from the variables the
 * launcher set ({@code args[0]}: GPUs a node), shard groups inside a node and replicate groups across, then checks
 * an all-reduce and an all-gather on every group and prints one line. With a second argument, process P fails
 * after the first collectives, while the others wait in the next one:
 * <ul>
 *   <li>{@code fail=P}: it vanishes (halts with status 0, so that the launcher keeps waiting for the others, which
 *       must stop by themselves);</li>
 *   <li>{@code stop=P}: it stops itself (SIGSTOP): alive, connected, silent;</li>
 *   <li>{@code hang=P}: its ranks sleep (as a deadlock would hold them) while the process lives on.</li>
 * </ul>
 */
public final class NcclJobSelfCheck {
    private NcclJobSelfCheck() {}

    public static void main(String[] args) {
        Map<String, String> env = System.getenv();
        int perNode = Integer.parseInt(args[0]);
        String how = args.length > 1 ? args[1].substring(0, args[1].indexOf('=')) : "";
        int failing = args.length > 1 ? Integer.parseInt(args[1].substring(args[1].indexOf('=') + 1)) : -1;
        JobLayout layout = JobLayout.resolve(perNode, 1, 0, null, env);
        DeviceMesh mesh = DeviceMesh.of(layout.worldSize(), layout.ranksPerNode());
        LocalRanks world = JobStart.join(layout, mesh, JobStart.Device.CUDA, JobStart.describe(mesh, layout), env);
        try {
            runRanks(world, layout, how, failing);
        } catch (CollectiveAbortedException e) { // as fsdp4j's command line reports it
            System.err.println("error: the job stopped: " + e.getMessage());
            System.exit(1);
        }
        System.out.println("process " + layout.process() + " ok: ranks " + world.ranks() + " of " + layout.worldSize()
                + " on " + world.devices() + ", NCCL_HOSTID=" + env.get("NCCL_HOSTID"));
        System.exit(0);
    }

    private static void runRanks(LocalRanks world, JobLayout layout, String how, int failing) {
        RankThreads.run(world, r -> {
            RankContext rank = world.open(r);
            try {
                for (ProcessGroup group : List.of(rank.world(), rank.shardGroup(), rank.replicateGroup())) {
                    check(rank, group);
                }
                if (layout.process() == failing) {
                    fail(how, r == layout.firstRank());
                }
                if (failing >= 0) {
                    check(rank, rank.world()); // waits for the dead process until the job is stopped
                }
            } finally {
                world.close(rank);
            }
        });
    }

    private static void fail(String how, boolean firstRank) {
        switch (how) {
            case "fail" -> {
                System.err.println("this process vanishes now");
                Runtime.getRuntime().halt(0);
            }
            case "stop" -> {
                if (firstRank) {
                    System.err.println("this process stops now (SIGSTOP)");
                    try {
                        new ProcessBuilder("kill", "-STOP", Long.toString(ProcessHandle.current().pid())).start();
                    } catch (java.io.IOException e) {
                        throw new java.io.UncheckedIOException(e);
                    }
                }
                sleepForever();
            }
            case "hang" -> {
                if (firstRank) {
                    System.err.println("this process's ranks hang now");
                }
                sleepForever();
            }
            default -> throw new IllegalArgumentException("fail=P, stop=P or hang=P, not " + how);
        }
    }

    private static void sleepForever() {
        try {
            Thread.sleep(Long.MAX_VALUE);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** All-reduce of (group rank + 1) and all-gather of 10 x group rank, over 1M elements. */
    private static void check(RankContext rank, ProcessGroup group) {
        var backend = rank.backend();
        int n = group.size(), count = 1 << 20;
        Tensor t = backend.allocate(DType.F32, count);
        backend.fill(t, group.rank() + 1);
        group.allReduce(t);
        Tensor shard = backend.allocate(DType.BF16, count / n), full = backend.allocate(DType.BF16, count / n * n);
        backend.fill(shard, 10 * group.rank());
        group.allGather(shard, full);
        float[] sums = backend.toFloats(t), gathered = backend.toFloats(full);
        for (int i = 0; i < count; i += 4099) {
            if (sums[i] != n * (n + 1) / 2f) {
                throw new IllegalStateException("rank " + rank.rank() + ": all-reduce over " + n + " gave " + sums[i]);
            }
        }
        for (int m = 0; m < n; m++) {
            if (gathered[m * (count / n)] != 10 * m) {
                throw new IllegalStateException("rank " + rank.rank() + ": all-gather block " + m + " holds "
                        + gathered[m * (count / n)]);
            }
        }
    }
}
