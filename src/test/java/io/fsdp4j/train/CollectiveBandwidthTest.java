package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.ProcessGroup;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.job.LocalRanks;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.job.TcpWorld;
import io.fsdp4j.job.TcpWorldTest;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.CollectiveBandwidth.Collective;
import io.fsdp4j.train.CollectiveBandwidth.Options;
import io.fsdp4j.train.CollectiveBandwidth.Row;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** nccl-test's measurement on CPU ranks: in one process, and over TCP between processes. */
@Timeout(60)
class CollectiveBandwidthTest {
    private static final Options OPTIONS = new Options(1000, 16_000, 4, 1, 2);

    private static List<Row> measure(LocalRanks world) {
        List<Row> rows = Collections.synchronizedList(new ArrayList<>());
        RankThreads.run(world, r -> {
            RankContext rank = world.open(r);
            try {
                CollectiveBandwidth.measure(rank, OPTIONS, rows::add);
            } finally {
                world.close(rank);
            }
        });
        return rows;
    }

    /** Every group of a 2 x 2 mesh, every collective, every size; sizes and bandwidths as nccl-tests counts them. */
    private static void checkRows(List<Row> rows) {
        assertThat(OPTIONS.sizes()).containsExactly(1000L, 4000L, 16_000L);
        Map<String, Integer> perGroup = new TreeMap<>();
        rows.forEach(r -> perGroup.merge(r.group(), 1, Integer::sum));
        assertThat(perGroup).containsExactly(Map.entry("replicate.0", 9), Map.entry("replicate.1", 9),
                Map.entry("shard.0", 9), Map.entry("shard.1", 9), Map.entry("world", 9));
        for (Row row : rows) {
            int n = row.group().equals("world") ? 4 : 2;
            assertThat(row.ranks()).isEqualTo(n);
            assertThat(row.seconds()).isPositive();
            assertThat(row.bytes()).isEqualTo(row.count() * row.collective().dtype.bytes());
            if (row.collective() != Collective.ALL_REDUCE) {
                assertThat(row.count() % n).as("split evenly").isZero();
            }
            assertThat(row.algBw()).isCloseTo(row.bytes() / row.seconds(), within(1e-9 * row.algBw()));
            double factor = switch (row.collective()) {
                case ALL_GATHER, REDUCE_SCATTER -> (n - 1) / (double) n;
                case ALL_REDUCE -> 2.0 * (n - 1) / n;
            };
            assertThat(row.busBw()).isCloseTo(row.algBw() * factor, within(1e-9 * row.algBw()));
        }
        // 1000 bytes: 500 bf16 elements gathered from 4 ranks (125 each); 250 fp32 reduced; 4000 bytes: 1000 and 1000
        assertThat(rows).anyMatch(r -> r.group().equals("world") && r.collective() == Collective.ALL_GATHER
                && r.count() == 500 && r.bytes() == 1000);
        assertThat(rows).anyMatch(r -> r.group().equals("world") && r.collective() == Collective.REDUCE_SCATTER
                && r.count() == 248 && r.bytes() == 992);
        assertThat(rows).anyMatch(r -> r.group().equals("shard.1") && r.collective() == Collective.ALL_REDUCE
                && r.count() == 1000 && r.bytes() == 4000);
    }

    @Test
    void measuresEveryGroupOfTheMeshInOneProcess() {
        checkRows(measure(new InProcessWorld(DeviceMesh.of(4, 2), Duration.ofSeconds(30))));
    }

    @Test
    void measuresEveryGroupOfTheMeshAcrossProcesses() {
        List<TcpWorld> worlds = TcpWorldTest.openJob(2, 2, 2, Duration.ofSeconds(30));
        List<Row> rows = Collections.synchronizedList(new ArrayList<>());
        assertThat(TcpWorldTest.runJob(worlds, (world, rank) -> CollectiveBandwidth.measure(rank, OPTIONS, rows::add)))
                .containsOnlyNulls();
        checkRows(rows); // only global rank 0 (process 0) reports
    }

    /** A collective that returns wrong values fails the test, not only a slow one. */
    @Test
    void aWrongResultFailsTheTest() {
        ProcessGroup lazy = new ProcessGroup() { // a group of 2 whose all-gather leaves the output as it was
            public int rank() { return 0; }
            public int size() { return 2; }
            public void allGather(Tensor shard, Tensor full) { }
            public void reduceScatter(Tensor full, Tensor shard) { }
            public void allReduce(Tensor t) { }
            public void broadcast(Tensor t, int root) { }
            public double[] allReduce(double[] values) { return values; }
            public void barrier() { }
        };
        var rank = new RankContext(0, new DeviceMesh(1, 2), CpuBackend.INSTANCE, lazy, lazy, lazy);
        assertThatThrownBy(() -> CollectiveBandwidth.measure(rank, OPTIONS, row -> { }))
                .isInstanceOf(IllegalStateException.class)
                .hasMessage("nccl-test: all_gather on the world group of 2 ranks gave 0.0 at element 0 of 500, not 1.0");
    }
}
