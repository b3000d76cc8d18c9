package io.fsdp4j.plan;

import io.fsdp4j.UserError;

/**
 * The machines a job runs on: {@code nodes} nodes of {@code gpusPerNode} GPUs. Inside a node the GPUs' collectives
 * run at the NVLink bus bandwidths given (bytes/s, per collective kind, as nccl-tests reports busbw); between nodes
 * each node sends at most {@code interNodeBandwidth} bytes/s, all its NICs together, in each direction.
 */
public record Cluster(GpuSpec gpu, int nodes, int gpusPerNode, double allGatherBusBw, double reduceScatterBusBw,
                      double allReduceBusBw, double interNodeBandwidth) {

    public Cluster {
        if (nodes < 1 || gpusPerNode < 1) {
            throw new UserError("--nodes and --gpus-per-node must be at least 1");
        }
        if (!(allGatherBusBw > 0 && reduceScatterBusBw > 0 && allReduceBusBw > 0 && interNodeBandwidth > 0)) {
            throw new UserError("link bandwidths must be positive");
        }
    }

    /**
     * A cluster with the GPU's measured NVLink bandwidths, or {@code intraBusBw} for all three collectives when it
     * is positive.
     */
    public static Cluster of(GpuSpec gpu, int nodes, int gpusPerNode, double intraBusBw, double interNodeBandwidth) {
        return intraBusBw > 0
                ? new Cluster(gpu, nodes, gpusPerNode, intraBusBw, intraBusBw, intraBusBw, interNodeBandwidth)
                : new Cluster(gpu, nodes, gpusPerNode, gpu.allGatherBusBw(), gpu.reduceScatterBusBw(),
                        gpu.allReduceBusBw(), interNodeBandwidth);
    }

    public int world() {
        return nodes * gpusPerNode;
    }

    /** The same links with another number of GPUs: up to one node's worth on one node, then whole nodes. */
    public Cluster withGpus(int gpus) {
        int perNode = Math.min(gpus, gpusPerNode);
        int n = (int) ModelShape.ceilDiv(gpus, perNode);
        return new Cluster(gpu, n, perNode, allGatherBusBw, reduceScatterBusBw, allReduceBusBw, interNodeBandwidth);
    }

    double intraBusBw(Collective c) {
        return switch (c) {
            case ALL_GATHER -> allGatherBusBw;
            case REDUCE_SCATTER -> reduceScatterBusBw;
            case ALL_REDUCE -> allReduceBusBw;
        };
    }
}
