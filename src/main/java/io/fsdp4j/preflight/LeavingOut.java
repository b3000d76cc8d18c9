package io.fsdp4j.preflight;

import io.fsdp4j.UserError;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.job.JobLayout;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Starting a job without its unhealthy nodes ({@code dist.exclude_unhealthy}): the nodes of the processes whose GPUs
 * failed the preflight's health test or whose rates are far below the others' ({@link Comparison#healthProblems()})
 * are left out whole, and the others form a job of fewer nodes, renumbered in their order: node ranks 0, 1, ...,
 * each process keeping its place within its node. Every process computes this from the same comparison, so all reach
 * the same plan.
 *
 * @param layout  the job as it was started
 * @param nodes   the nodes left out, ascending
 * @param reasons each left-out node's first problem, by node
 */
record LeavingOut(JobLayout layout, List<Integer> nodes, Map<Integer, String> reasons) {

    /** The nodes that {@code comparison}'s health problems name (none when it has none). */
    static LeavingOut plan(Comparison comparison, JobLayout layout) {
        Map<Integer, String> reasons = new LinkedHashMap<>();
        comparison.healthProblems().forEach((process, why) -> reasons.putIfAbsent(process / layout.procsPerNode(), why));
        return new LeavingOut(layout, List.copyOf(new java.util.TreeSet<>(reasons.keySet())), Map.copyOf(reasons));
    }

    /** "node 2", "nodes 1 and 3", "nodes 0, 1 and 3". */
    String named() {
        List<String> ids = nodes.stream().map(String::valueOf).toList();
        return nodes.size() == 1 ? "node " + ids.getFirst()
                : "nodes " + String.join(", ", ids.subList(0, ids.size() - 1)) + " and " + ids.getLast();
    }

    /** Why, one node after the other: "the GPU health test failed on node 2: ...". */
    String why() {
        return String.join("; ", nodes.stream().map(reasons::get).toList());
    }

    int remaining() {
        return layout.nnodes() - nodes.size();
    }

    /**
     * Why the job cannot start without these nodes, or null when it can: none to leave out, other differences
     * (a node that differs in its model or config is not a health problem), no node left, or a mesh the smaller job
     * cannot have ({@code meshOf} refuses it, e.g. {@code fsdp.shard_size} no longer divides the ranks; null: the
     * command cannot change the size of its job).
     */
    String obstacle(Comparison comparison, Function<JobLayout, DeviceMesh> meshOf) {
        if (nodes.isEmpty() || !comparison.onlyHealthProblems()) {
            return "other differences stop the job too";
        }
        if (remaining() < 1) {
            return "no node would be left";
        }
        if (meshOf == null) {
            return "only train starts a job of fewer nodes than it was started with";
        }
        try {
            meshOf.apply(smaller(0, new JobLayout.Address("localhost", JobLayout.DEFAULT_PORT)));
            return null;
        } catch (UserError e) {
            return e.getMessage();
        }
    }

    /** Whether this process's node is left out. */
    boolean leavesOutThisProcess() {
        return nodes.contains(layout.nodeRank());
    }

    /** This process's place in the smaller job, whose store {@code rdzv} serves. */
    JobLayout smaller(JobLayout.Address rdzv) {
        return smaller(layout.nodeRank() - (int) nodes.stream().filter(n -> n < layout.nodeRank()).count(), rdzv);
    }

    private JobLayout smaller(int nodeRank, JobLayout.Address rdzv) {
        return new JobLayout(remaining(), nodeRank, layout.procsPerNode(), layout.localProc(), layout.ranksPerProc(),
                rdzv.host(), rdzv.port(), layout.source() + ", without " + named());
    }

    /** The process of the old job that is the first of the smaller one (it serves the smaller job's store). */
    int firstRemainingProcess() {
        int node = 0;
        while (nodes.contains(node)) {
            node++;
        }
        return node * layout.procsPerNode();
    }
}
