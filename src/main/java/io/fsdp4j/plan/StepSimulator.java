package io.fsdp4j.plan;

/**
 * One step on one rank as two streams, replaying the order in which {@code FsdpModel.microBatch} issues work: the
 * compute stream runs stages one after another; the communication stream runs collectives one after another, each
 * starting once the compute queued before it was issued has finished (it sends what compute produced) and waited
 * for by compute only where the engine awaits it.
 *
 * <p>What overlaps: at each stage the gather of what computes now is issued first (when not prefetched), then those
 * of the next units ({@code fsdp.prefetch} of them, 1 by default), which run during this unit's compute; a unit's
 * reduce-scatter (and, for replicas, its all-reduce) is issued after its backward and awaited after the next block's
 * backward. What is exposed: the embeddings' gather, before anything computes, the embeddings' reduction after the
 * last backward, any collective longer than the compute it hides behind, and the small all-reduces of the step
 * (token counts, loss, gradient norm), which are all latency.
 */
public final class StepSimulator {
    private StepSimulator() {}

    /**
     * Seconds of each unit's collectives, per step and rank.
     *
     * @param allGather one all-gather of unit u's parameters
     * @param reduceScatter the reduce-scatter of unit u's gradient
     * @param allReduce the all-reduce of unit u's gradient shard across replicas
     * @param smallCollectives the step's scalar all-reduces over the whole world
     */
    public record CommTimes(double[] allGather, double[] reduceScatter, double[] allReduce, double smallCollectives) {

        public static CommTimes of(ModelShape m, Workload w, Sharding s, Cluster cluster) {
            int units = m.headUnit() + 1;
            double[] ag = new double[units], rs = new double[units], ar = new double[units];
            for (int u = 0; u < units; u++) {
                // under LoRA only the adapters' gradients are reduced (and offloaded): the part that trains
                long shard = m.trainableShardNumel(u, s.shardSize());
                ag[u] = Collective.ALL_GATHER.seconds(m.gatheredBytes(u, s.shardSize(), w.paramBytes()), s.shard(),
                        cluster); // QLoRA's blocks: their linears' packed NF4 codes and absmax
                if (shard == 0) {
                    continue; // frozen whole: nothing reduced
                }
                rs[u] = Collective.REDUCE_SCATTER.seconds(w.reduceBytes() * shard * s.shardSize(), s.shard(), cluster);
                if (w.cpuOffload()) { // the fp32 master shard to the device before, the reduced shard back after
                    ag[u] += 4.0 * shard / ComputeModel.PCIE_BYTES_PER_SECOND;
                    rs[u] += 4.0 * shard / ComputeModel.PCIE_BYTES_PER_SECOND;
                }
                ar[u] = Collective.ALL_REDUCE.seconds(w.reduceBytes() * shard, s.replicas(), cluster);
            }
            // two all-reduces of the step (target and token counts, the loss) over the world, and the gradient
            // norm's over the shard group
            var world = new Collective.CommGroup(cluster.world(), cluster.nodes(), 1);
            double small = 2 * Collective.ALL_REDUCE.seconds(16, world, cluster)
                    + Collective.ALL_REDUCE.seconds(8, s.shard(), cluster);
            return new CommTimes(ag, rs, ar, small);
        }
    }

    /**
     * Predicted step of one rank.
     *
     * @param stepSeconds from the first collective to the optimizer's end
     * @param computeSeconds the compute stream's busy time
     * @param allGatherSeconds all-gathers, summed (they overlap compute where they can)
     * @param reduceScatterSeconds reduce-scatters, summed
     * @param allReduceSeconds gradient all-reduces across replicas, summed
     */
    public record StepTime(double stepSeconds, double computeSeconds, double allGatherSeconds,
                           double reduceScatterSeconds, double allReduceSeconds, double smallCollectivesSeconds) {

        /** Time the compute stream waits for communication (never below zero: sums of the same times may differ in
         * their last bit). */
        public double exposedSeconds() {
            return Math.max(0, stepSeconds - computeSeconds);
        }

        public double commSeconds() {
            return allGatherSeconds + reduceScatterSeconds + allReduceSeconds + smallCollectivesSeconds;
        }
    }

    /**
     * The step of one rank.
     *
     * @param replicaStream run each replica all-reduce on a communication stream of its own, after its unit's
     *     reduce-scatter (a what-if: fsdp4j queues it behind the reduce-scatter on the one stream, so that the
     *     next all-gather waits for it)
     * @param prefetch how many units ahead of the computing one have their all-gather issued
     */
    public static StepTime simulate(ModelShape m, Sharding s, ComputeModel.StageTimes compute, CommTimes comm,
                                    boolean replicaStream, int prefetch) {
        return new Replay(m, s, compute, comm, replicaStream, prefetch).run();
    }

    /** With the default prefetch depth. */
    public static StepTime simulate(ModelShape m, Sharding s, ComputeModel.StageTimes compute, CommTimes comm,
                                    boolean replicaStream) {
        return simulate(m, s, compute, comm, replicaStream, io.fsdp4j.config.FsdpSection.DEFAULT_PREFETCH);
    }

    /** The replay: a cursor per stream, and each unit's gather state as {@code ShardedUnit} keeps it. */
    private static final class Replay {
        final ModelShape m;
        final Sharding s;
        final ComputeModel.StageTimes t;
        final CommTimes comm;
        final boolean replicaStream;
        final int prefetch;
        final boolean[] gathered;
        final double[] gatherDone;
        double computeEnd, commEnd, replicaEnd, agTotal, rsTotal, arTotal;

        Replay(ModelShape m, Sharding s, ComputeModel.StageTimes t, CommTimes comm, boolean replicaStream,
               int prefetch) {
            this.m = m;
            this.prefetch = prefetch;
            this.s = s;
            this.t = t;
            this.comm = comm;
            this.replicaStream = replicaStream;
            this.gathered = new boolean[m.headUnit() + 1];
            this.gatherDone = new double[m.headUnit() + 1];
        }

        /** Queues a collective; it starts after the communication stream's previous one and the compute queued so far. */
        double collective(double seconds) {
            commEnd = Math.max(commEnd, computeEnd) + seconds;
            return commEnd;
        }

        /** {@code ShardedUnit.startGather}: nothing if gathered or on its way. */
        void prefetch(int u) {
            if (!gathered[u]) {
                gathered[u] = true;
                gatherDone[u] = collective(comm.allGather()[u]);
                agTotal += comm.allGather()[u];
            }
        }

        /** {@code FsdpModel.prefetchAfter}: the gathers of the {@code prefetch} units after {@code at} of {@code order}. */
        void prefetchAfter(int[] order, int at) {
            for (int i = at + 1; i <= at + prefetch && i < order.length; i++) {
                prefetch(order[i]);
            }
        }

        /** {@code ShardedUnit.gather}: compute waits for the unit's parameters. */
        void gather(int u) {
            prefetch(u);
            computeEnd = Math.max(computeEnd, gatherDone[u]);
        }

        void free(int u) {
            gathered[u] = false;
        }

        void compute(double seconds) {
            computeEnd += seconds;
        }

        /** {@code startReduction}: the reduce-scatter, then the all-reduce across replicas, queued; returns when done. */
        double reduce(int u) {
            rsTotal += comm.reduceScatter()[u];
            arTotal += comm.allReduce()[u];
            if (!replicaStream) {
                return collective(comm.reduceScatter()[u] + comm.allReduce()[u]);
            }
            double scattered = collective(comm.reduceScatter()[u]);
            replicaEnd = Math.max(replicaEnd, scattered) + comm.allReduce()[u];
            return replicaEnd;
        }

        StepTime run() {
            boolean reshard = s.reshardAfterForward();
            int blocks = m.blocks(), head = m.headUnit();
            double small = comm.smallCollectives();

            // the units in the order the forward computes them, and the blocks in the order the backward does
            int[] forwardOrder = new int[blocks + 2], backwardOrder = new int[blocks];
            for (int u = 0; u < forwardOrder.length; u++) {
                forwardOrder[u] = u == blocks + 1 ? head : u;
            }
            for (int i = 0; i < blocks; i++) {
                backwardOrder[i] = blocks - i;
            }
            // forward; at each stage what computes now is gathered first, then what comes next
            prefetch(0);
            prefetchAfter(forwardOrder, 0);
            gather(0);
            compute(t.forward()[0]);
            if (reshard) {
                free(0);
            }
            for (int l = 0; l < blocks; l++) {
                prefetch(1 + l);
                prefetchAfter(forwardOrder, 1 + l);
                gather(1 + l);
                compute(t.forward()[1 + l]);
                if (reshard && l < blocks - 1) { // the last block keeps its parameters for its backward
                    free(1 + l);
                }
            }
            // head: loss and its backward; the last block still gathered from its forward
            prefetch(head);
            if (m.tied()) {
                prefetch(0);
            }
            prefetchAfter(backwardOrder, -1);
            gather(head);
            if (m.tied()) {
                gather(0);
            }
            compute(t.forward()[head]);
            free(head);
            free(0);
            double reducing = reduce(head);
            // backward, last block first; each block's reduction awaited after the next block's backward
            for (int l = blocks - 1; l >= 0; l--) {
                prefetch(1 + l);
                prefetchAfter(backwardOrder, blocks - 1 - l);
                gather(1 + l);
                compute(t.backward()[1 + l]);
                free(1 + l);
                computeEnd = Math.max(computeEnd, reducing);
                reducing = reduce(1 + l);
            }
            compute(t.backward()[0]);
            computeEnd = Math.max(computeEnd, reducing);
            computeEnd = Math.max(computeEnd, reduce(0)); // the embeddings' reduction, awaited at once
            // the step's scalar all-reduces (counts, loss, gradient norm: the host waits for each), the optimizer
            computeEnd += small;
            compute(t.tail());
            return new StepTime(computeEnd, t.total(), agTotal, rsTotal, arTotal, small);
        }
    }
}
