package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.comm.DeviceMesh;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The checks at a job's start: every process must be about to run the same job. */
@Timeout(30)
class JobStartTest {
    private static final String TOKEN = "job-start-test";

    @Test
    void processesStartedForDifferentJobsAreStoppedNamingTheDifference() throws Exception {
        var server = RendezvousServer.start(0, TOKEN, 0);
        var settings = new JobSettings(TOKEN, 0, Duration.ofSeconds(5), Duration.ofSeconds(5), null);
        DeviceMesh mesh = DeviceMesh.of(4, 4);
        try (var pool = Executors.newVirtualThreadPerTaskExecutor()) {
            var futures = new java.util.ArrayList<java.util.concurrent.Future<TcpWorld>>();
            for (int p = 0; p < 2; p++) {
                var layout = new JobLayout(2, p, 1, 0, 2, "127.0.0.1", server.port(), "test");
                Map<String, Object> config = new LinkedHashMap<>();
                config.put("train", Map.of("steps", p == 0 ? 10 : 20));
                String description = JobStart.describe(config, mesh, layout);
                futures.add(pool.submit(() -> TcpWorld.open(layout, mesh, settings, description,
                        layout.firstProcess() ? server : null)));
            }
            for (var f : futures) {
                assertThatThrownBy(f::get).isInstanceOf(ExecutionException.class).cause().isInstanceOf(UserError.class)
                        .hasMessage("job start: node 1 (ranks 2-3) was started for another job than node 0 (ranks 0-1):"
                                + " 'train.steps=20' where the first has 'train.steps=10'; start every node with the same"
                                + " config and the same fsdp4j");
            }
        } finally {
            server.close();
        }
    }

    @Test
    void aDescriptionListsTheSettingsThenTheMeshAndLayout() {
        var layout = new JobLayout(2, 1, 2, 1, 2, "h", 1, "test");
        assertThat(JobStart.describe(Map.of("fsdp", Map.of("strategy", "hybrid_shard")), DeviceMesh.of(8, 4), layout)
                .lines().toList()).containsExactly("fsdp.strategy=hybrid_shard", "fsdp4j=dev", "mesh=2x4",
                "processes=4 (2 a node, 2 ranks each)");
        assertThat(List.of(JobStart.firstDifference("a=1\nb=2", "a=1"))).containsExactly("'(nothing)' where the first has 'b=2'");
    }

    @Test
    void theCollectiveTimeoutComesFromTheEnvironment() {
        assertThat(JobStart.collectiveTimeout(Map.of())).isEqualTo(Duration.ofMinutes(10));
        assertThat(JobStart.collectiveTimeout(Map.of(JobStart.COLLECTIVE_TIMEOUT_ENV, "45"))).isEqualTo(Duration.ofSeconds(45));
        assertThatThrownBy(() -> JobStart.collectiveTimeout(Map.of(JobStart.COLLECTIVE_TIMEOUT_ENV, "soon")))
                .isInstanceOf(UserError.class).hasMessage("FSDP4J_COLLECTIVE_TIMEOUT='soon' is not a number of seconds (at least 1)");
    }
}
