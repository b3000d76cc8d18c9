package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.CollectiveAbortedException;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import io.fsdp4j.tensor.Tensor;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class InProcessGroupTest {
    private static final CpuBackend CPU = CpuBackend.INSTANCE;

    private static float[] values(int rank, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = rank * 100 + i + 0.25f;
        }
        return v;
    }

    @Test
    void collectivesOnA2x3Mesh() {
        DeviceMesh mesh = new DeviceMesh(2, 3);
        InProcessWorld world = new InProcessWorld(mesh, Duration.ofSeconds(30));
        float[][] gathered = new float[6][], scattered = new float[6][], reduced = new float[6][], broadcast = new float[6][];
        RankThreads.run(world, r -> {
            RankContext ctx = world.rank(r, CPU);
            assertThat(ctx.shardGroup().size()).isEqualTo(3);
            assertThat(ctx.replicateGroup().size()).isEqualTo(2);
            assertThat(ctx.shardGroup().rank()).isEqualTo(r % 3);
            assertThat(ctx.replicateGroup().rank()).isEqualTo(r / 3);
            Tensor full = CPU.allocate(DType.F32, 6);
            ctx.shardGroup().allGather(CPU.upload(values(r, 2), 2), full);
            gathered[r] = CPU.toFloats(full);
            Tensor shard = CPU.allocate(DType.F32, 2);
            ctx.shardGroup().reduceScatter(CPU.upload(values(r, 6), 6), shard);
            scattered[r] = CPU.toFloats(shard);
            Tensor t = CPU.upload(values(r, 4), 4);
            ctx.replicateGroup().allReduce(t);
            reduced[r] = CPU.toFloats(t);
            Tensor b = CPU.upload(values(r, 3), 3);
            ctx.world().broadcast(b, 4);
            broadcast[r] = CPU.toFloats(b);
            ctx.world().barrier();
            assertThat(ctx.world().allReduce(new double[] {r, 1})).containsExactly(15.0, 6.0);
        });
        for (int r = 0; r < 6; r++) {
            int first = r / 3 * 3; // the shard group's first global rank
            List<Float> expected = new ArrayList<>();
            for (int s = 0; s < 3; s++) {
                for (float v : values(first + s, 2)) {
                    expected.add(v);
                }
            }
            for (int i = 0; i < 6; i++) {
                assertThat(gathered[r][i]).isEqualTo(expected.get(i));
            }
            for (int i = 0; i < 2; i++) {
                int element = (r % 3) * 2 + i;
                float sum = values(first, 6)[element] + values(first + 1, 6)[element] + values(first + 2, 6)[element];
                assertThat(scattered[r][i]).isEqualTo(sum);
            }
            for (int i = 0; i < 4; i++) {
                assertThat(reduced[r][i]).isEqualTo(values(r % 3, 4)[i] + values(r % 3 + 3, 4)[i]);
            }
            assertThat(broadcast[r]).containsExactly(values(4, 3));
        }
    }

    /**
     * The shard may be a view of the member's own input (reduce-scatter in place): the sums of every element, over
     * more than one chunk of the in-process sum, are those of the inputs as they were, in rank order from zero.
     */
    @Test
    void reduceScatterIntoAViewOfItsOwnInputSumsTheInputsAsTheyWere() {
        int ranks = 3, n = 10_000; // a shard of 10,000 values: three chunks of the sum
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, ranks), Duration.ofSeconds(30));
        float[][] inputs = new float[ranks][], out = new float[ranks][];
        java.util.SplittableRandom random = new java.util.SplittableRandom(7);
        for (int r = 0; r < ranks; r++) {
            inputs[r] = new float[ranks * n];
            for (int i = 0; i < ranks * n; i++) {
                inputs[r][i] = (float) random.nextDouble(-1, 1);
            }
        }
        RankThreads.run(world, r -> {
            Tensor full = CPU.upload(inputs[r], ranks * n);
            Tensor shard = full.view((long) r * n, n);
            world.rank(r, CPU).shardGroup().reduceScatter(full, shard);
            out[r] = CPU.toFloats(shard);
        });
        for (int r = 0; r < ranks; r++) {
            for (int i = 0; i < n; i++) {
                float sum = 0f;
                for (int q = 0; q < ranks; q++) {
                    sum += inputs[q][r * n + i];
                }
                assertThat(out[r][i]).as("rank %d value %d", r, i).isEqualTo(sum);
            }
        }
    }

    @Test
    void bf16ReductionSumsInFp32AndRoundsOnce() {
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, 2), Duration.ofSeconds(30));
        float[][] out = new float[2][];
        RankThreads.run(world, r -> {
            RankContext ctx = world.rank(r, CPU);
            Tensor full = CPU.allocate(DType.BF16, 2);
            CPU.copy(CPU.upload(new float[] {1f, 1f + (r == 0 ? 0.00390625f : 0f)}, 2), full);
            Tensor shard = CPU.allocate(DType.BF16, 1);
            ctx.shardGroup().reduceScatter(full, shard);
            out[r] = CPU.toFloats(shard);
        });
        assertThat(out[0][0]).isEqualTo(2f);
        assertThat(out[1][0]).isEqualTo(Half.roundBf16(1f + Half.roundBf16(1f + 0.00390625f)));
    }

    @Test
    void aFailingRankReleasesTheOthersWithItsNameAndCause() {
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, 3), Duration.ofMinutes(5));
        AtomicInteger released = new AtomicInteger();
        long start = System.nanoTime();
        assertThatThrownBy(() -> RankThreads.run(world, r -> {
            if (r == 1) {
                throw new IllegalStateException("disk on fire");
            }
            try {
                world.rank(r, CPU).world().barrier();
            } catch (CollectiveAbortedException e) {
                released.incrementAndGet();
                throw e;
            }
        })).hasMessageContaining("rank 1").hasMessageContaining("disk on fire");
        assertThat(released.get()).isEqualTo(2);
        assertThat((System.nanoTime() - start) / 1e9).isLessThan(10);
    }

    @Test
    void aMissingRankTimesOutNamingTheGroup() {
        InProcessWorld world = new InProcessWorld(new DeviceMesh(1, 2), Duration.ofMillis(300));
        assertThatThrownBy(() -> RankThreads.run(world, r -> {
            if (r == 0) {
                world.rank(r, CPU).shardGroup().barrier(); // rank 1 never arrives
            }
        })).isInstanceOf(CollectiveAbortedException.class).hasMessageContaining("shard.0").hasMessageContaining("timed out");
    }
}
