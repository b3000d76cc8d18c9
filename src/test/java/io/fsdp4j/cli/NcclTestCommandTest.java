package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.TestThreads;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** {@code fsdp4j nccl-test} on CPU ranks: the table, the JSON lines, and bad sizes. */
class NcclTestCommandTest {
    private record Run(int status, List<String> out, List<String> err) {}

    private static Run run(String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int status = Main.execute(args, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8), false);
        return new Run(status, out.toString(StandardCharsets.UTF_8).lines().toList(),
                err.toString(StandardCharsets.UTF_8).lines().toList());
    }

    @Test
    void printsATableOfEveryCollectiveOnTheWorldOfTwoCpuRanks() {
        Run r = run("nccl-test", "--set", "dist.device=cpu", "--set", "dist.ranks=2", "--min-bytes", "1K",
                "--max-bytes", "4K", "--iters", "2", "--warmup", "1");
        assertThat(r.status()).as("%s", r.err()).isZero();
        assertThat(r.out().get(0)).startsWith("# nccl-test: 2 ranks on cpu x2, mesh 1 x 2");
        assertThat(r.out().get(1).split("\\s+")).containsExactly("#", "group", "ranks", "collective", "type", "size(B)",
                "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)");
        List<String> rows = r.out().subList(2, r.out().size());
        assertThat(rows).hasSize(6); // 3 collectives x 2 sizes, on the world only (a 1-D mesh)
        String[] first = rows.getFirst().trim().split("\\s+");
        assertThat(first).startsWith("world", "2", "all_gather", "bf16", "1024", "512");
        double algbw = Double.parseDouble(first[7]), busbw = Double.parseDouble(first[8]);
        assertThat(busbw).isCloseTo(algbw / 2, org.assertj.core.api.Assertions.within(0.0015));
    }

    @Test
    void printsJsonLinesOnAHybridMesh() throws Exception {
        Run r = run("nccl-test", "--set", "dist.device=cpu", "--set", "dist.ranks=4", "--set",
                "fsdp.strategy=hybrid_shard", "--set", "fsdp.shard_size=2", "--max-bytes", "1K", "--iters", "1", "--json");
        assertThat(r.status()).as("%s", r.err()).isZero();
        var json = new ObjectMapper();
        assertThat(r.out()).hasSize(15); // (world + 2 shard + 2 replicate groups) x 3 collectives x 1 size
        for (String line : r.out()) {
            var node = json.readTree(line);
            assertThat(node.fieldNames()).toIterable().containsExactly("group", "ranks", "nodes", "groups_per_node",
                    "collective", "dtype", "bytes", "count", "time_us", "algbw_gbs", "busbw_gbs");
            assertThat(node.get("nodes").asInt()).isEqualTo(1); // one process: every rank on one node
            // the groups of a kind that run at once on the node: the world alone, 2 shard groups, 2 replicate groups
            assertThat(node.get("groups_per_node").asInt()).isEqualTo(node.get("group").asText().equals("world") ? 1 : 2);
            double factor = switch (node.get("collective").asText()) {
                case "all_reduce" -> 2.0 * (node.get("ranks").asInt() - 1) / node.get("ranks").asInt();
                default -> (node.get("ranks").asInt() - 1) / (double) node.get("ranks").asInt();
            };
            assertThat(node.get("busbw_gbs").asDouble())
                    .isCloseTo(node.get("algbw_gbs").asDouble() * factor, org.assertj.core.api.Assertions.within(1e-12));
        }
    }

    /**
     * Under {@code fsdp4j launch --emulate-nodes 2} (2 CPU ranks a node, hybrid: a shard group a node), each line says
     * where its group lies: the world on both nodes, each shard group on one, each replicate group across both with
     * the node's two replicate groups sharing its network. That is what {@code plan --nccl-test} reads.
     */
    @Test
    void underLaunchEachLineSaysWhichNodesItsGroupSpans() throws Exception {
        List<String> command = new java.util.ArrayList<>(io.fsdp4j.job.Launcher.javaCommand(Main.class.getName()));
        command.addAll(1, List.of("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"));
        command.addAll(List.of("launch", "--emulate-nodes", "2", "--", "nccl-test", "--set", "dist.device=cpu", "--set",
                "dist.ranks=2", "--set", "fsdp.strategy=hybrid_shard", "--max-bytes", "1K", "--iters", "1", "--json"));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        var output = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                return new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }, TestThreads.OWN_THREAD);
        assertThat(p.waitFor(150, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(output.get()).isZero();
        var spans = new java.util.TreeMap<String, String>();
        for (String line : output.get().lines().filter(l -> l.contains("{\"group\"")).toList()) {
            var node = new ObjectMapper().readTree(line.substring(line.indexOf('{')));
            spans.put(node.get("group").asText(), node.get("nodes").asInt() + " nodes, " + node.get("groups_per_node")
                    .asInt() + " a node");
        }
        assertThat(spans).containsExactlyEntriesOf(new java.util.TreeMap<>(java.util.Map.of(
                "world", "2 nodes, 1 a node", "shard.0", "1 nodes, 1 a node", "shard.1", "1 nodes, 1 a node",
                "replicate.0", "2 nodes, 2 a node", "replicate.1", "2 nodes, 2 a node")));
    }

    @Test
    void refusesABadSize() {
        Run r = run("nccl-test", "--set", "dist.device=cpu", "--max-bytes", "lots");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.err()).containsExactly("error: --max-bytes 'lots' is not a size: give bytes, or a number with K, M "
                + "or G (e.g. 64M)");
    }
}
