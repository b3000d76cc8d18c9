package io.fsdp4j.plan;

/**
 * The collectives FSDP runs, timed as NCCL's ring algorithm (Simple protocol) runs them: n ranks, a buffer of
 * S bytes (the whole gathered or reduced buffer, not one rank's part).
 *
 * <p>Bandwidth, as nccl-tests defines bus bandwidth: each rank sends {@code busFactor(n) * S} bytes, so
 * t = busFactor(n) * S / busbw, with busFactor (n-1)/n for all-gather and reduce-scatter and 2(n-1)/n for
 * all-reduce. Latency, as NCCL's own tuning model has it for rings ({@code src/graph/tuning.cc}): a base of 8.4 us
 * plus 3.4 us per step inside a node (NVLink) and 9.6 us per step that crosses the network, with n-1 steps for
 * all-gather and reduce-scatter (2(n-1) for all-reduce), of which nodes-1 (2(nodes-1)) cross between nodes.
 */
public enum Collective {
    ALL_GATHER,
    REDUCE_SCATTER,
    ALL_REDUCE;

    static final double BASE_LATENCY = 8.4e-6, NVLINK_STEP = 3.4e-6, NETWORK_STEP = 9.6e-6;

    /** Bytes each rank sends per byte of the buffer: nccl-tests' factor from algorithm to bus bandwidth. */
    public double busFactor(int ranks) {
        double f = (ranks - 1) / (double) ranks;
        return this == ALL_REDUCE ? 2 * f : f;
    }

    int ringSteps(int ranks) {
        return this == ALL_REDUCE ? 2 * (ranks - 1) : ranks - 1;
    }

    /**
     * Seconds for one collective over {@code bytes} in {@code group} on {@code cluster}'s links: latency plus the
     * bytes each rank sends over the slowest link of the ring. A ring inside one node runs at the NVLink bus
     * bandwidth. A ring across nodes leaves each node once: every node sends what one rank sends, times the groups
     * of the same kind running at once on that node (the replica all-reduces of hybrid sharding, one per local
     * rank), through its network bandwidth; and no faster than NVLink where the ring also has hops inside a node.
     */
    public double seconds(long bytes, CommGroup group, Cluster cluster) {
        int n = group.ranks();
        if (n <= 1 || bytes == 0) {
            return 0;
        }
        double perRank = busFactor(n) * bytes;
        double steps = ringSteps(n), networkSteps = group.nodes() > 1 ? ringSteps(group.nodes()) : 0;
        double latency = BASE_LATENCY + (steps - networkSteps) * NVLINK_STEP + networkSteps * NETWORK_STEP;
        double bandwidth;
        if (group.nodes() == 1) {
            bandwidth = cluster.intraBusBw(this);
        } else {
            bandwidth = cluster.interNodeBandwidth() / group.groupsPerNode();
            if (group.ranks() > group.nodes()) {
                bandwidth = Math.min(bandwidth, cluster.intraBusBw(this));
            }
        }
        return latency + perRank / bandwidth;
    }

    /**
     * A communicator: {@code ranks} ranks spread evenly over {@code nodes} nodes, with {@code groupsPerNode} such
     * groups sharing each node's network at the same time.
     */
    public record CommGroup(int ranks, int nodes, int groupsPerNode) {
        public static final CommGroup SINGLE = new CommGroup(1, 1, 1);
    }
}
