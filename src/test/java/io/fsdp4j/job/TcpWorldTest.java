package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.DecayRule;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ScheduleKind;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.fsdp.FsdpPolicy;
import io.fsdp4j.fsdp.RandomInit;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.optim.AdamW;
import io.fsdp4j.optim.LrSchedule;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.TrainStep;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Processes simulated as {@link TcpWorld}s of one JVM, each with its own sockets: the real rendezvous and wire
 * protocol over loopback. Results must be bitwise those of one {@link InProcessWorld} hosting every rank.
 */
@Timeout(60)
public class TcpWorldTest {
    private static final CpuBackend CPU = CpuBackend.INSTANCE;
    private static final String TOKEN = "tcp-world-test-token";

    /** A job of {@code processes} TcpWorlds of {@code ranksPerProc} ranks each, opened concurrently. */
    public static List<TcpWorld> openJob(int processes, int ranksPerProc, int shardSize, Duration collectiveTimeout) {
        var server = RendezvousServer.start(0, TOKEN, 0);
        var settings = new JobSettings(TOKEN, 0, Duration.ofSeconds(20), collectiveTimeout, null);
        DeviceMesh mesh = DeviceMesh.of(processes * ranksPerProc, shardSize);
        try (var pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<TcpWorld>> opening = new ArrayList<>();
            for (int p = 0; p < processes; p++) {
                var layout = new JobLayout(processes, p, 1, 0, ranksPerProc, "127.0.0.1", server.port(), "test");
                opening.add(pool.submit(() -> TcpWorld.open(layout, mesh, settings, layout.firstProcess() ? server : null)));
            }
            List<TcpWorld> worlds = new ArrayList<>();
            for (var f : opening) {
                worlds.add(f.get());
            }
            return worlds;
        } catch (InterruptedException | ExecutionException e) {
            server.close();
            throw new IllegalStateException(e);
        }
    }

    /** Runs {@code body(world, rank)} on every rank of every process; returns each process's failure or null. */
    public static List<Throwable> runJob(List<TcpWorld> worlds, BiConsumer<TcpWorld, RankContext> body) {
        try (var pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<?>> running = new ArrayList<>();
            for (TcpWorld world : worlds) {
                running.add(pool.submit(() -> RankThreads.run(world, r -> {
                    RankContext rank = world.open(r);
                    try {
                        body.accept(world, rank);
                    } finally {
                        world.close(rank);
                    }
                })));
            }
            List<Throwable> failures = new ArrayList<>();
            for (var f : running) {
                try {
                    f.get();
                    failures.add(null);
                } catch (ExecutionException e) {
                    failures.add(e.getCause());
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }
            return failures;
        } finally {
            worlds.forEach(TcpWorld::close);
        }
    }

    // ---- bitwise equality with the in-process backend ----------------------------------------------------

    /** Values whose sums depend on their order: magnitudes from 1e-3 to 1e6, both signs. */
    private static float[] values(long seed, int n) {
        var random = new SplittableRandom(seed);
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(-3, 7)));
        }
        return v;
    }

    private static Tensor tensor(DType dtype, float[] v) {
        Tensor f32 = CPU.upload(v, v.length);
        if (dtype == DType.F32) {
            return f32;
        }
        Tensor t = CPU.allocate(dtype, v.length);
        CPU.copy(f32, t);
        return t;
    }

    private static List<Integer> bits(Tensor t) {
        List<Integer> bits = new ArrayList<>();
        if (t.dtype() == DType.BF16 || t.dtype() == DType.F16) {
            short[] s = CpuBackend.halves(t);
            for (int i = 0; i < t.numel(); i++) {
                bits.add((int) s[CpuBackend.off(t) + i]);
            }
        } else {
            for (float f : CPU.toFloats(t)) {
                bits.add(Float.floatToRawIntBits(f));
            }
        }
        return bits;
    }

    /** Every collective on every group of the rank, in each float dtype; the outputs as bits, in order. */
    private static List<List<Integer>> script(RankContext ctx) {
        int r = ctx.rank();
        List<List<Integer>> outputs = new ArrayList<>();
        List<ProcessGroup> groups = List.of(ctx.world(), ctx.shardGroup(), ctx.replicateGroup());
        for (int g = 0; g < groups.size(); g++) {
            ProcessGroup group = groups.get(g);
            int s = group.size();
            for (DType dtype : List.of(DType.F32, DType.BF16, DType.F16)) {
                long seed = 1000L * r + 100L * g + dtype.ordinal() * 10L;
                Tensor full = CPU.allocate(dtype, 5 * s);
                group.allGather(tensor(dtype, values(seed, 5)), full);
                outputs.add(bits(full));
                Tensor shard = CPU.allocate(dtype, 3);
                group.reduceScatter(tensor(dtype, values(seed + 1, 3 * s)), shard);
                outputs.add(bits(shard));
                for (int n : new int[] {1, 7, 40_000}) { // fewer elements than processes; uneven chunks; many frames
                    Tensor t = tensor(dtype, values(seed + 2 + n, n));
                    group.allReduce(t);
                    outputs.add(bits(t));
                }
                for (int root : new int[] {0, s - 1}) {
                    Tensor b = tensor(dtype, values(seed + 3 + root, 4));
                    group.broadcast(b, root);
                    outputs.add(bits(b));
                }
            }
            // views at an offset, mixed dtypes: an fp32 shard gathered into bf16, bf16 reduced into an fp32 shard
            Tensor backing = tensor(DType.F32, values(7L * r + g, 20));
            Tensor gathered = CPU.allocate(DType.BF16, 6 * s + 4);
            group.allGather(backing.view(3, 6), gathered.view(4, 6 * s));
            outputs.add(bits(gathered));
            Tensor reduced = CPU.allocate(DType.F32, 9);
            group.reduceScatter(tensor(DType.BF16, values(11L * r + g, 2 * s)), reduced.view(5, 2));
            outputs.add(bits(reduced));
            double[] sums = group.allReduce(new double[] {r + 0.1, 1e-17 * r, -1e17, g});
            List<Integer> doubleBits = new ArrayList<>();
            for (double d : sums) {
                long b = Double.doubleToRawLongBits(d);
                doubleBits.add((int) b);
                doubleBits.add((int) (b >>> 32));
            }
            outputs.add(doubleBits);
            group.barrier();
        }
        return outputs;
    }

    @ParameterizedTest(name = "{0} processes x {1} ranks, shard size {2}")
    @CsvSource({"2,2,4", "2,2,2", "2,2,1", "3,2,3", "2,3,2", "4,1,2"})
    void collectivesGiveTheBitsOfOneProcessHostingEveryRank(int processes, int ranksPerProc, int shardSize) {
        int worldSize = processes * ranksPerProc;
        var reference = new ConcurrentHashMap<Integer, List<List<Integer>>>();
        InProcessWorld inProcess = new InProcessWorld(DeviceMesh.of(worldSize, shardSize), Duration.ofSeconds(30));
        RankThreads.run(inProcess, r -> reference.put(r, script(inProcess.rank(r, CPU))));

        var overTcp = new ConcurrentHashMap<Integer, List<List<Integer>>>();
        List<TcpWorld> worlds = openJob(processes, ranksPerProc, shardSize, Duration.ofSeconds(30));
        assertThat(worlds.get(1).ranks()).hasSize(ranksPerProc).allMatch(r -> r / ranksPerProc == 1);
        assertThat(runJob(worlds, (world, rank) -> overTcp.put(rank.rank(), script(rank)))).containsOnlyNulls();

        assertThat(overTcp.keySet()).isEqualTo(reference.keySet());
        for (int r = 0; r < worldSize; r++) {
            List<List<Integer>> expected = reference.get(r), actual = overTcp.get(r);
            assertThat(actual).hasSameSizeAs(expected);
            for (int i = 0; i < expected.size(); i++) {
                assertThat(actual.get(i)).as("rank %d, output %d", r, i).isEqualTo(expected.get(i));
            }
        }
    }

    /** 2 processes x 2 ranks train exactly as 1 process x 4 ranks: losses and parameters, bit for bit. */
    @ParameterizedTest(name = "{0}, shard size {1}")
    @CsvSource({"full_shard,4", "hybrid_shard,2"})
    void twoProcessesTrainExactlyAsOne(String strategy, int shardSize) {
        var reference = new ConcurrentHashMap<Integer, List<Object>>();
        InProcessWorld inProcess = new InProcessWorld(DeviceMesh.of(4, shardSize), Duration.ofSeconds(30));
        RankThreads.run(inProcess, r -> reference.put(r, train(inProcess.rank(r, CPU), strategy)));
        var overTcp = new ConcurrentHashMap<Integer, List<Object>>();
        assertThat(runJob(openJob(2, 2, shardSize, Duration.ofSeconds(30)),
                (world, rank) -> overTcp.put(rank.rank(), train(rank, strategy)))).containsOnlyNulls();
        for (int r = 0; r < 4; r++) {
            assertThat(overTcp.get(r)).as("rank %d", r).isEqualTo(reference.get(r));
        }
    }

    /** Three steps of a tiny model on this rank's sequences; the losses and the final parameters of rank 0. */
    private static List<Object> train(RankContext rank, String strategy) {
        ModelConfig config = ModelConfig.tiny();
        var policy = new FsdpPolicy(ShardingStrategy.valueOf(strategy.toUpperCase(java.util.Locale.ROOT)), Precision.BF16,
                Precision.FP32, ActivationCheckpointing.NONE);
        var model = FsdpModel.apply(new LlamaModel(config, rank.backend()), rank, policy,
                new RandomInit(5, 0.02, LlamaModel.layout(config)));
        var optimizer = new AdamW(rank.backend(), model.trainableShards(), 0.9f, 0.95f, 1e-8f, 0.1f, DecayRule.MATRICES);
        var trainer = new TrainStep(model, optimizer, new LrSchedule(ScheduleKind.CONSTANT, 1e-3, 0, 3, 0), 1.0);
        List<Object> out = new ArrayList<>();
        for (int step = 1; step <= 3; step++) {
            var random = new SplittableRandom(100L * step + rank.rank());
            var batch = List.of(List.of(Sequence.unmasked(random.ints(12, 0, config.vocabSize()).toArray())));
            var result = trainer.step(step, batch);
            out.add(Double.doubleToRawLongBits(result.loss()));
            out.add(Double.doubleToRawLongBits(result.gradNorm()));
        }
        for (int u = 0; u < model.units().size(); u++) {
            float[] full = model.fullParameters(u);
            out.add(java.util.Arrays.hashCode(full));
        }
        return out;
    }

    // ---- failures -----------------------------------------------------------------------------------------

    @Test
    void aMissingNodeFailsTheOthersWithinTheTimeoutNamingIt() throws Exception {
        var server = RendezvousServer.start(0, TOKEN, 0);
        var settings = new JobSettings(TOKEN, 0, Duration.ofSeconds(1), Duration.ofSeconds(30), null);
        DeviceMesh mesh = DeviceMesh.of(6, 2);
        long start = System.nanoTime();
        try (var pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<TcpWorld>> present = new ArrayList<>();
            for (int p = 0; p < 2; p++) { // node 2 never comes
                var layout = new JobLayout(3, p, 1, 0, 2, "127.0.0.1", server.port(), "test");
                present.add(pool.submit(() -> TcpWorld.open(layout, mesh, settings, layout.firstProcess() ? server : null)));
            }
            assertThatThrownBy(present.get(0)::get).hasCauseInstanceOf(UserError.class).cause()
                    .hasMessage("rendezvous: timed out after 1 s waiting for node(s) 2 of 3 (ranks 4-5)");
            // node 1 times out too, or first sees node 0 give up; either way it names the missing node
            assertThatThrownBy(present.get(1)::get).hasCauseInstanceOf(UserError.class).cause()
                    .hasMessageStartingWith("rendezvous: ").hasMessageEndingWith("waiting for node(s) 2 of 3 (ranks 4-5)");
        }
        assertThat((System.nanoTime() - start) / 1e9).isLessThan(15);
    }

    @Test
    void aProcessWithTheWrongTokenIsRefused() throws Exception {
        var server = RendezvousServer.start(0, TOKEN, 0);
        DeviceMesh mesh = DeviceMesh.of(4, 4);
        try (var pool = Executors.newVirtualThreadPerTaskExecutor()) {
            var first = pool.submit(() -> TcpWorld.open(new JobLayout(2, 0, 1, 0, 2, "127.0.0.1", server.port(), "test"),
                    mesh, new JobSettings(TOKEN, 0, Duration.ofSeconds(1), Duration.ofSeconds(30), null), server));
            var intruder = pool.submit(() -> TcpWorld.open(new JobLayout(2, 1, 1, 0, 2, "127.0.0.1", server.port(), "test"),
                    mesh, new JobSettings("not-the-token", 0, Duration.ofSeconds(1), Duration.ofSeconds(30), null)));
            assertThatThrownBy(intruder::get).cause().isInstanceOf(UserError.class)
                    .hasMessage("rendezvous at 127.0.0.1:" + server.port()
                            + " refused this process: wrong job token (FSDP4J_JOB_TOKEN); every node of a job must"
                            + " have the same one, and the others were told");
            assertThatThrownBy(first::get).cause().hasMessageContaining("wrong job token")
                    .hasMessageContaining("node(s) 1 of 2 (ranks 2-3) will not join");
        }
    }

    @Test
    void twoProcessesClaimingOneNodeAreCaught() throws Exception {
        var server = RendezvousServer.start(0, TOKEN, 0);
        var settings = new JobSettings(TOKEN, 0, Duration.ofSeconds(1), Duration.ofSeconds(30), null);
        DeviceMesh mesh = DeviceMesh.of(4, 2);
        try (var pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<TcpWorld>> opening = new ArrayList<>();
            for (int p : new int[] {0, 1, 1}) {
                var layout = new JobLayout(2, p, 1, 0, 2, "127.0.0.1", server.port(), "test");
                opening.add(pool.submit(() -> TcpWorld.open(layout, mesh, settings, p == 0 ? server : null)));
            }
            List<String> messages = new ArrayList<>();
            List<TcpWorld> opened = new ArrayList<>();
            for (var f : opening) {
                try {
                    opened.add(f.get());
                } catch (ExecutionException e) {
                    messages.add(e.getCause().getMessage());
                }
            }
            opened.forEach(w -> pool.execute(w::close)); // together: node 0's store waits for the others to leave
            assertThat(messages).anyMatch(m -> m.contains("two processes joined as node 1 (ranks 2-3)"));
        } finally {
            server.close();
        }
    }

    @Test
    void aPeerThatDisappearsFailsTheCollectiveAtOnceNamingIt() {
        List<TcpWorld> worlds = openJob(2, 2, 4, Duration.ofSeconds(60));
        long[] failedAfter = new long[1];
        List<Throwable> failures = runJob(worlds, (world, rank) -> {
            rank.world().allReduce(CPU.upload(new float[] {1}, 1));
            if (world.layout().process() == 1) {
                world.close(); // as if the process were killed: its sockets close, no goodbye
                return;
            }
            long start = System.nanoTime();
            try {
                rank.world().allReduce(CPU.upload(new float[] {1}, 1));
            } finally {
                failedAfter[0] = System.nanoTime() - start;
            }
        });
        assertThat(failures.get(0)).as("%s", failures).isInstanceOf(CollectiveAbortedException.class)
                .hasMessageContaining("all-reduce on group 'world' failed").hasMessageContaining("node 1 (ranks 2-3)");
        assertThat(failedAfter[0] / 1e9).as("well before the 60 s timeout").isLessThan(30);
    }

    @Test
    void aSilentPeerTimesOutNamingIt() {
        List<TcpWorld> worlds = openJob(2, 2, 2, Duration.ofSeconds(1));
        List<Throwable> failures = runJob(worlds, (world, rank) -> {
            if (world.layout().process() == 1) {
                sleep(2500); // busy elsewhere, past the timeout
            }
            rank.replicateGroup().allReduce(CPU.upload(new float[] {1, 2}, 2));
        });
        assertThat(failures.get(0)).as("%s", failures).isInstanceOf(CollectiveAbortedException.class)
                .hasMessageMatching("node 1 \\(ranks 2-3\\) has not progressed for [0-9.]+ s \\(last at step 0, collective 0;"
                        + " it has not called collective 1\\); node 0 \\(ranks 0-1\\) waits for it in all-reduce on group"
                        + " 'replicate\\.[01]' \\(collective 1\\) for 1 s \\(FSDP4J_COLLECTIVE_TIMEOUT=1\\)");
        // the late process learns that the job stopped when it gets there (why, unless the connection is gone)
        assertThat(failures.get(1)).as("%s", failures).isInstanceOf(CollectiveAbortedException.class)
                .hasMessageContaining("node 0 (ranks 0-1)");
    }

    @Test
    void aRankThatFailsStopsTheOtherProcessesWithItsReason() {
        List<TcpWorld> worlds = openJob(2, 2, 4, Duration.ofSeconds(60));
        long start = System.nanoTime();
        List<Throwable> failures = runJob(worlds, (world, rank) -> {
            rank.world().barrier();
            if (rank.rank() == 3) {
                throw new IllegalStateException("boom");
            }
            rank.world().allGather(CPU.upload(new float[] {1}, 1), CPU.allocate(DType.F32, 4));
        });
        assertThat(failures.get(1)).as("%s", failures).isInstanceOf(RankThreads.RankFailedException.class)
                .hasMessageContaining("rank 3 failed");
        assertThat(failures.get(0)).as("%s", failures).isInstanceOf(CollectiveAbortedException.class)
                .hasMessageContaining("node 1 (ranks 2-3) stopped the job: rank 3 failed: java.lang.IllegalStateException: boom");
        assertThat((System.nanoTime() - start) / 1e9).as("well before the 60 s timeout").isLessThan(30);
    }

    @Test
    void anAbortingProcessDoesNotWaitLongForASilentPeer() {
        List<TcpWorld> worlds = openJob(2, 2, 2, Duration.ofSeconds(60));
        long start = System.nanoTime();
        double[] released = new double[1];
        List<Throwable> failures = runJob(worlds, (world, rank) -> {
            switch (rank.rank()) {
                case 0 -> { // aborts process 0 once rank 1 waits
                    sleep(500);
                    throw new IllegalStateException("boom");
                }
                case 1 -> { // waits for rank 3 in replicate.1, and is released by the abort
                    try {
                        rank.replicateGroup().allReduce(CPU.upload(new float[] {1}, 1));
                    } finally {
                        released[0] = (System.nanoTime() - start) / 1e9;
                    }
                }
                default -> sleep(5000); // process 1: busy, reads nothing
            }
        });
        assertThat(failures.get(0)).as("%s", failures).isInstanceOf(RankThreads.RankFailedException.class);
        assertThat(released[0]).as("released after the abort's grace, not the 60 s timeout").isBetween(1.5, 4.9);
    }

    @Test
    void aProcessOfTheJobAloneNeedsNoNetwork() {
        TcpWorld world = TcpWorld.open(JobLayout.singleProcess(3), DeviceMesh.of(3, 3),
                new JobSettings(TOKEN, 0, Duration.ofSeconds(1), Duration.ofSeconds(5), null));
        assertThat(world.ranks()).containsExactly(0, 1, 2);
        assertThat(runJob(List.of(world), (w, rank) -> {
            Tensor t = CPU.upload(new float[] {rank.rank()}, 1);
            rank.world().allReduce(t);
            assertThat(CPU.toFloats(t)).containsExactly(3f);
        })).containsOnlyNulls();
        assertThat(world.devices()).startsWith("cpu x3");
    }

    @Test
    void settingsComeFromTheEnvironment() {
        var s = JobSettings.fromEnv(Map.of("FSDP4J_JOB_TOKEN", " t ", "FSDP4J_RESTART", "2",
                "FSDP4J_RDZV_TIMEOUT", "45"), Duration.ofMinutes(10));
        assertThat(s).isEqualTo(new JobSettings("t", 2, Duration.ofSeconds(45), Duration.ofMinutes(10), null));
        assertThatThrownBy(() -> JobSettings.fromEnv(Map.of(), Duration.ofMinutes(1))).isInstanceOf(UserError.class)
                .hasMessageContaining("FSDP4J_JOB_TOKEN");
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
