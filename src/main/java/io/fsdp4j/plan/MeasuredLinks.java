package io.fsdp4j.plan;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * Link bandwidths measured by {@code fsdp4j nccl-test --json} (one JSON line a measurement, as written or as
 * {@code fsdp4j launch} prefixes it), for {@code plan --nccl-test}. Of each collective, the largest buffer measured
 * counts (the slowest group where several groups ran at once). A group on one node gives that collective's NVLink
 * bus bandwidth; a group across nodes gives the network: its bus bandwidth times the groups that shared each node's
 * network while it ran (the replicate groups of hybrid sharding, one per local rank), which is how {@link Collective}
 * times a ring across nodes, averaged over the collectives measured. Either may be absent (null): a job on one node
 * measures no network.
 *
 * @param intraBusBw bytes/s inside a node by collective, for those measured
 * @param interNodeBandwidth bytes/s each node sends, or null
 */
public record MeasuredLinks(Path file, Map<Collective, Double> intraBusBw, Double interNodeBandwidth) {
    public MeasuredLinks {
        intraBusBw = Map.copyOf(intraBusBw);
    }

    public static MeasuredLinks read(Path file) {
        record Row(boolean acrossNodes, Collective collective, long bytes, double busBw, int groupsPerNode) {}
        List<Row> rows = new ArrayList<>();
        for (JsonLines.Line line : JsonLines.read(file, "--nccl-test")) {
            int number = line.number();
            JsonNode n = line.json();
            if (n == null) {
                throw new UserError("--nccl-test: " + file + " line " + number + " is not JSON");
            }
            if (!n.has("busbw_gbs") || !n.has("collective")) {
                continue; // not a measurement
            }
            if (!n.has("nodes") || !n.has("groups_per_node")) {
                throw new UserError("--nccl-test: " + file + " line " + number + " does not say which nodes its group "
                        + "spans (written by an older fsdp4j); measure again with 'fsdp4j nccl-test --json'");
            }
            Collective c = switch (n.get("collective").asText()) {
                case "all_gather" -> Collective.ALL_GATHER;
                case "reduce_scatter" -> Collective.REDUCE_SCATTER;
                case "all_reduce" -> Collective.ALL_REDUCE;
                default -> throw new UserError("--nccl-test: " + file + " line " + number + ": unknown collective '"
                        + n.get("collective").asText() + "'");
            };
            rows.add(new Row(n.get("nodes").asInt() > 1, c, n.get("bytes").asLong(), n.get("busbw_gbs").asDouble() * 1e9,
                    n.get("groups_per_node").asInt()));
        }
        if (rows.isEmpty()) {
            throw new UserError("--nccl-test: " + file + " has no measurements; write it with "
                    + "'fsdp4j nccl-test --json --max-bytes 512M > FILE' on the job's nodes");
        }
        Map<Collective, Double> intra = new EnumMap<>(Collective.class);
        List<Double> inter = new ArrayList<>();
        for (boolean across : new boolean[] {false, true}) {
            for (Collective c : Collective.values()) {
                long largest = rows.stream().filter(r -> r.acrossNodes() == across && r.collective() == c)
                        .mapToLong(Row::bytes).max().orElse(-1);
                if (largest < 0) {
                    continue;
                }
                double slowest = rows.stream().filter(r -> r.acrossNodes() == across && r.collective() == c
                        && r.bytes() == largest).mapToDouble(r -> across ? r.busBw() * r.groupsPerNode() : r.busBw())
                        .min().orElseThrow();
                if (across) {
                    inter.add(slowest);
                } else {
                    intra.put(c, slowest);
                }
            }
        }
        Double network = inter.isEmpty() ? null : inter.stream().mapToDouble(Double::doubleValue).average().orElseThrow();
        return new MeasuredLinks(file, intra, network);
    }
}
