package io.fsdp4j.config;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code dist.*}: the ranks of the job. These are the config's values; a launcher may override them from
 * torchrun-style or Slurm environment variables.
 *
 * @param device   {@code dist.device}
 * @param ranks    {@code dist.ranks}: ranks on this node (CPU: threads; CUDA: GPUs), >= 1
 * @param nnodes   {@code dist.nnodes}: nodes in the job, >= 1
 * @param nodeRank {@code dist.node_rank}: this node's index, in [0, nnodes)
 * @param rdzv     {@code dist.rdzv}: the rendezvous address ({@code host:port}) of a multi-node job, or null
 * @param preflight {@code dist.preflight}: a job of several processes compares them before its first step
 *                  ({@code train --skip-preflight} sets it false)
 * @param excludeUnhealthy {@code dist.exclude_unhealthy}: when the preflight finds nodes whose GPUs failed the health
 *                  test or are far slower than the others', the job starts without them if its layout allows
 *                  ({@code train --exclude-unhealthy} sets it true); false: the job stops naming them
 * @param shareGpu {@code dist.share_gpu}: every CUDA rank of the process on one GPU, their collectives copies and sums
 *                  on it instead of NCCL (which allows one rank a GPU): to check a configuration of several ranks, a
 *                  sharding strategy or a mesh, on a machine with one GPU; ignored on CPU ranks
 */
public record DistSection(DeviceKind device, int ranks, int nnodes, int nodeRank, String rdzv, boolean preflight,
                          boolean excludeUnhealthy, boolean shareGpu) {
    public DistSection {
        Check.present("dist.device", device);
        Check.atLeast("dist.ranks", ranks, 1);
        Check.atLeast("dist.nnodes", nnodes, 1);
        Check.between("dist.node_rank", nodeRank, 0, nnodes - 1);
    }

    /** With the preflight on, stopping at an unhealthy node. */
    public DistSection(DeviceKind device, int ranks, int nnodes, int nodeRank, String rdzv) {
        this(device, ranks, nnodes, nodeRank, rdzv, true, false, false);
    }

    public static DistSection defaults() {
        return new DistSection(DeviceKind.AUTO, 2, 1, 0, null, true, false, false);
    }

    /**
     * The devices that do the work of {@code ranks} ranks, for per-device rates (tokens/s per GPU, MFU): one when the
     * ranks share a GPU ({@code dist.share_gpu}), else one a rank.
     */
    public int devicesFor(int ranks, boolean onGpu) {
        return onGpu && shareGpu ? 1 : ranks;
    }

    /** Ranks in the whole job: {@code ranks * nnodes}. */
    public int worldSize() {
        return Math.multiplyExact(ranks, nnodes);
    }

    static DistSection bind(ConfigSection s, int ranksDefault) {
        var d = defaults();
        var device = s.choice("device", DeviceKind.class, d.device());
        int ranks = s.integer("ranks", ranksDefault);
        int nnodes = s.integer("nnodes", d.nnodes());
        int nodeRank = s.integer("node_rank", d.nodeRank());
        String rdzv = s.optionalString("rdzv");
        boolean preflight = s.bool("preflight", d.preflight());
        boolean excludeUnhealthy = s.bool("exclude_unhealthy", d.excludeUnhealthy());
        boolean shareGpu = s.bool("share_gpu", d.shareGpu());
        s.finish();
        return new DistSection(device, ranks, nnodes, nodeRank, rdzv, preflight, excludeUnhealthy, shareGpu);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("device", device.spelling());
        m.put("ranks", ranks);
        m.put("nnodes", nnodes);
        m.put("node_rank", nodeRank);
        m.put("rdzv", rdzv);
        m.put("preflight", preflight);
        m.put("exclude_unhealthy", excludeUnhealthy);
        m.put("share_gpu", shareGpu);
        return m;
    }
}
