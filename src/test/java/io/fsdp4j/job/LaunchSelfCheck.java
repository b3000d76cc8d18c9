package io.fsdp4j.job;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.time.Duration;
import java.util.Map;

/**
 * A child of {@link LauncherTest}: joins the job from the variables the launcher set (2 ranks a process), checks an
 * all-reduce and an all-gather across the processes, and prints one line per process. With {@code fail=P} as its
 * argument, process P exits with status 3 at once on the job's first attempt.
 */
public final class LaunchSelfCheck {
    private LaunchSelfCheck() {}

    public static void main(String[] args) {
        Map<String, String> env = System.getenv();
        JobLayout layout = JobLayout.resolve(2 * Integer.parseInt(env.get("LOCAL_WORLD_SIZE")), 1, 0, null, env);
        int attempt = Integer.parseInt(env.getOrDefault(JobSettings.RESTART_ENV, "0"));
        if (args.length > 0 && args[0].equals("fail=" + layout.process()) && attempt == 0) {
            System.err.println("failing on purpose");
            System.exit(3);
        }
        DeviceMesh mesh = DeviceMesh.of(layout.worldSize(), layout.worldSize());
        var world = TcpWorld.open(layout, mesh, JobSettings.fromEnv(env, Duration.ofSeconds(20)));
        var cpu = CpuBackend.INSTANCE;
        RankThreads.run(world, r -> {
            RankContext rank = world.open(r);
            try {
                Tensor t = cpu.upload(new float[] {r + 1}, 1);
                rank.world().allReduce(t);
                Tensor all = cpu.allocate(DType.F32, layout.worldSize());
                rank.world().allGather(cpu.upload(new float[] {10 * r}, 1), all);
                float expected = layout.worldSize() * (layout.worldSize() + 1) / 2f;
                if (cpu.toFloats(t)[0] != expected || cpu.toFloats(all)[layout.worldSize() - 1] != 10 * (layout.worldSize() - 1)) {
                    throw new IllegalStateException("wrong sums on rank " + r);
                }
            } finally {
                world.close(rank);
            }
        });
        System.out.println("process " + layout.process() + " ok: ranks " + world.ranks() + " of " + layout.worldSize()
                + ", attempt " + attempt);
        System.exit(0);
    }
}
