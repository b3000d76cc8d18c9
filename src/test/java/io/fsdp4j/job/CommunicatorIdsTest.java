package io.fsdp4j.job;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.comm.DeviceMesh;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * NCCL's unique ids handed out through the rendezvous, without NCCL: every process gets the id of each group it has
 * a member in, made once, by the process of the group's first member.
 */
@Timeout(30)
class CommunicatorIdsTest {
    private static final String TOKEN = "communicator-ids-test";

    @Test
    void everyProcessGetsTheSameIdOfEachOfItsGroupsMadeByTheFirstMembersProcess() throws Exception {
        var server = RendezvousServer.start(0, TOKEN, 0);
        var settings = new JobSettings(TOKEN, 0, Duration.ofSeconds(10), Duration.ofSeconds(10), null);
        DeviceMesh mesh = DeviceMesh.of(4, 2); // 2 processes ("nodes") x 2 ranks, hybrid: shard groups inside one
        List<Map<String, byte[]>> ids = new ArrayList<>();
        try (var pool = Executors.newVirtualThreadPerTaskExecutor()) {
            List<Future<Map<String, byte[]>>> exchanges = new ArrayList<>();
            for (int p = 0; p < 2; p++) {
                var layout = new JobLayout(2, p, 1, 0, 2, "127.0.0.1", server.port(), "test");
                int process = p;
                exchanges.add(pool.submit(() -> {
                    try (var rendezvous = JobRendezvous.join(layout, settings, process == 0 ? server : null)) {
                        int[] made = {0};
                        var mine = NcclWorld.communicatorIds(rendezvous, mesh,
                                () -> ("id " + made[0]++ + " of process " + process).getBytes(StandardCharsets.UTF_8));
                        rendezvous.publish("done", ""); // the store stays up until both have their ids
                        rendezvous.awaitAll("done");
                        return mine;
                    }
                }));
            }
            for (var f : exchanges) {
                ids.add(f.get());
            }
        }
        var p0 = ids.get(0);
        var p1 = ids.get(1);
        assertThat(p0.keySet()).containsExactly("world", "shard.0", "replicate.0", "replicate.1");
        assertThat(p1.keySet()).containsExactly("world", "shard.1", "replicate.0", "replicate.1");
        for (String group : List.of("world", "replicate.0", "replicate.1")) {
            assertThat(p1.get(group)).as(group).isEqualTo(p0.get(group));
        }
        assertThat(new String(p0.get("world"), StandardCharsets.UTF_8)).isEqualTo("id 0 of process 0");
        assertThat(new String(p0.get("shard.0"), StandardCharsets.UTF_8)).isEqualTo("id 1 of process 0");
        assertThat(new String(p1.get("shard.1"), StandardCharsets.UTF_8)).isEqualTo("id 0 of process 1");
        assertThat(new String(p0.get("replicate.1"), StandardCharsets.UTF_8)).isEqualTo("id 3 of process 0");
    }
}
