package io.fsdp4j.plan;

import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.cuda.DeviceAllocator;
import io.fsdp4j.model.ActivationSizes;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Per-GPU memory of one training step, buffer by buffer as the FSDP engine ({@code FsdpModel.microBatch},
 * {@code ShardedUnit}) allocates them, and what fsdp4j's caching allocator reserves for them.
 *
 * <p>For the whole job each rank holds, per unit, its fp32 master shard, gradient shard and two AdamW moments
 * (16 bytes per shard element; shards are ceil(numel / S) with padding at the unit's end), and with
 * {@code fsdp.param_copy: kept} ({@link Workload#keptCopy}) the master shard's copy in the parameter dtype (2 bytes
 * more). During the step it holds gathered units (in the parameter dtype, with the bf16 shard they were sent from,
 * rounded for the gather unless a kept copy is sent), full-size fp32 gradient
 * accumulators (an fp32 reduce-scatter writes into the zeroed gradient shard in place; a bf16 one needs the rounded
 * accumulator and a bf16 shard), activations and the head's logits. Under LoRA ({@link ModelShape#lora}) the frozen
 * base (the embeddings, the head, each block's base) is held as its shard in the parameter dtype only, on the device
 * even when offloaded: no master, gradient or optimizer state; only the adapters have fp32 masters, gradients and
 * AdamW moments ({@link #state}). A LoRA block is gathered into one buffer of its numel (base and adapters side by
 * side, {@code LoraUnit}), its backward writes the fp32 gradients of that whole buffer (the base's dropped) and the
 * adapters' go to their accumulator; a frozen head (or tied embedding) gets a zeroed fp32 buffer to write its
 * gradients into, dropped after the head. On a shard group of one rank nothing is gathered
 * or reduced: a unit computes on its master rounded to bf16 (or on its kept copy itself) and backward accumulates
 * into the gradient shard. The step is walked
 * through the moments where these peak: the end of forward, the head, the first and a middle block of backward,
 * and the embedding's backward.
 *
 * <p>The caching allocator ({@link DeviceAllocator}) rounds every request to a size class (512 bytes under 1 MiB,
 * 2 MiB above) and keeps freed blocks for later requests of the same class, or of a class up to 1/8 smaller; it
 * never splits a block. What it reserves is replayed moment by moment ({@link #reserved}); it exceeds the peak
 * allocation because blocks cached for one kind of buffer (the logits, a block's activations, the head's
 * accumulator) stay reserved while other kinds peak. The difference is reported as the allocator's overhead.
 */
public final class MemoryModel {
    /** Where a buffer's bytes are reported. */
    public enum Part { PARAMS, GRADS, OPTIMIZER, GATHERED, GRAD_BUFFERS, ACTIVATIONS, LOGITS }

    private MemoryModel() {}

    /**
     * Predicted memory of one GPU.
     *
     * @param parts bytes of each part at the moment of the step when the most is allocated (rounded to size classes)
     * @param peakPhase that moment
     * @param allocated bytes allocated at that moment: the sum of the parts
     * @param reserved what the caching allocator holds at its peak (the figure {@code bench} reports)
     * @param hostStateBytes offloaded: the fp32 master and gradient shards and AdamW moments in host memory (16
     *     bytes per shard element, {@code bench}'s {@code state_host_gib}); else 0
     */
    public record Estimate(Map<Part, Long> parts, String peakPhase, long allocated, long reserved, long hostStateBytes) {
        public Estimate {
            parts = Map.copyOf(parts);
        }

        public long part(Part p) {
            return parts.getOrDefault(p, 0L);
        }

        /** What the allocator reserves beyond the peak allocation: blocks cached for other size classes. */
        public long allocatorOverhead() {
            return reserved - allocated;
        }
    }

    /** One moment of the step: the buffers live then. */
    private static final class Phase {
        final String name;
        final List<Part> parts = new ArrayList<>();
        final List<Long> sizes = new ArrayList<>();

        Phase(String name) {
            this.name = name;
        }

        void add(Part part, long bytes) {
            if (bytes > 0) {
                parts.add(part);
                sizes.add(DeviceAllocator.sizeClass(bytes));
            }
        }

        void add(Part part, long[] bytes) {
            for (long b : bytes) {
                add(part, b);
            }
        }

        void add(Part part, long bytes, long count) {
            for (long i = 0; i < count; i++) {
                add(part, bytes);
            }
        }
    }

    public static Estimate estimate(ModelShape m, Workload w, Sharding sharding) {
        return new Walk(m, w, sharding).estimate();
    }

    /**
     * The state a rank holds for the whole job, in bytes, before the allocator's size classes: the shards of the
     * parameters (fp32 masters, and their kept copies in the parameter dtype with {@code fsdp.param_copy: kept};
     * LoRA's frozen base in the parameter dtype, its block linears in NF4 under QLoRA), of the gradients and of the
     * AdamW moments
     * (the part that trains only), and how many of those bytes are in host memory (offloaded: the masters,
     * gradients and moments; a frozen base stays on the device). What {@code FsdpModel.shardBytes} and AdamW's
     * {@code stateBytes} count on a rank of the same job.
     */
    public record State(long params, long grads, long optimizer, long hostBytes) {}

    public static State state(ModelShape m, Workload w, Sharding sharding) {
        int s = sharding.shardSize();
        long params = 0, grads = 0;
        for (int u = 0; u <= m.headUnit(); u++) {
            params += m.frozenShardBytes(u, s, w.paramBytes()) + 4 * m.trainableShardNumel(u, s);
            grads += 4 * m.trainableShardNumel(u, s);
        }
        long host = w.cpuOffload() ? 4 * grads : 0; // masters, gradients, two moments: 16 bytes a trained element
        long kept = w.keptCopy() ? grads / 2 : 0; // the masters' copies for the gathers: 2 bytes a trained element
        return new State(params + kept, grads, 2 * grads, host);
    }

    /** The walk through one step, for one model, workload and sharding. */
    private static final class Walk {
        final ModelShape m;
        final Workload w;
        final ActivationSizes a; // the model's own statement of its activations
        final int groupSize, blocks, head;
        final boolean unsharded; // a shard group of one rank: the shard is the unit, nothing is gathered or reduced
        final boolean offload; // the job's state in host memory; units staged to the device in fp32 to be gathered
        final boolean keep; // SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD_ZERO2: gathered units stay from forward to backward
        final int ahead; // fsdp.prefetch: units whose gather is started before they compute
        final boolean lora; // a frozen base (embeddings, head, each block's base) and trained adapters
        final boolean keptCopy; // fsdp.param_copy kept: each trained shard's copy in the parameter dtype, sent as it is

        Walk(ModelShape m, Workload w, Sharding sharding) {
            this.m = m;
            this.w = w;
            this.a = m.activations(w);
            this.groupSize = sharding.shardSize();
            this.offload = w.cpuOffload();
            this.unsharded = groupSize == 1 && !offload; // offloaded, a one-rank group still stages and gathers
            this.blocks = m.blocks();
            this.head = m.headUnit();
            this.keep = !sharding.reshardAfterForward();
            this.ahead = w.prefetch();
            this.lora = m.lora() != null;
            this.keptCopy = w.keptCopy();
        }

        long shard(int u) {
            return m.shardNumel(u, groupSize);
        }

        /** The shard of unit u's part that trains (the unit's without LoRA, its adapters' with it). */
        long trainShard(int u) {
            return m.trainableShardNumel(u, groupSize);
        }

        /** That part padded to the group: what is reduced. */
        long trainPadded(int u) {
            return trainShard(u) * groupSize;
        }

        long padded(int u) {
            return m.paddedNumel(u, groupSize);
        }

        Phase phase(String name) {
            Phase p = new Phase(name);
            for (int u = 0; u <= head; u++) { // the whole job's state (state() sums it)
                p.add(Part.PARAMS, m.frozenShardBytes(u, groupSize, w.paramBytes())); // LoRA's frozen base (NF4, QLoRA's)
                if (!offload) {
                    p.add(Part.PARAMS, 4 * trainShard(u));
                    p.add(Part.GRADS, 4 * trainShard(u));
                    p.add(Part.OPTIMIZER, 4 * trainShard(u), 2);
                }
                if (keptCopy) { // the master's copy that the gathers send (LoRA's adapters have one too)
                    p.add(Part.PARAMS, 2 * trainShard(u));
                }
            }
            return p;
        }

        /**
         * Unit u gathered: the full buffer in the parameter dtype, and the bf16 copy of the shard it was sent from
         * (none when a kept copy is sent). Unsharded, the unit computes on its master shard rounded to bf16 (in
         * fp32 on the master itself, with a kept copy on that copy itself: nothing allocated).
         */
        void gathered(Phase p, int u) {
            if (lora) { // a block: base and adapters laid side by side in one buffer; embeddings, head: frozen whole
                if (m.trainableNumel(u) > 0) {
                    p.add(Part.GATHERED, w.paramBytes() * m.numel(u));
                } else if (groupSize > 1) { // a group of one computes on the frozen shard itself
                    p.add(Part.GATHERED, w.paramBytes() * padded(u));
                }
                return;
            }
            boolean rounded = w.paramBytes() == 2 && !keptCopy; // the shard rounded for this gather
            if (unsharded) {
                p.add(Part.GATHERED, rounded ? 2 * shard(u) : 0);
                return;
            }
            p.add(Part.GATHERED, w.paramBytes() * padded(u));
            if (rounded) {
                p.add(Part.GATHERED, 2 * shard(u));
            }
        }

        void gatheredBlocks(Phase p, int from, int to) {
            for (int l = from; l <= to; l++) {
                if (l >= 0 && l < blocks) {
                    gathered(p, 1 + l);
                }
            }
        }

        /** Unit u's full-size fp32 gradient accumulator (unsharded, backward accumulates into the gradient shard). */
        void accumulating(Phase p, int u) {
            if (lora && m.trainableNumel(u) == 0) {
                return; // frozen whole: its gradients go to a buffer dropped after the head (discarded())
            }
            if (lora) { // the block's backward writes its whole buffer's gradients; the adapters' are accumulated
                p.add(Part.GRAD_BUFFERS, 4 * m.numel(u));
            }
            if (!unsharded) {
                p.add(Part.GRAD_BUFFERS, 4 * trainPadded(u));
            }
        }

        /** Under LoRA, the frozen unit u's gradients written by the head and dropped: a zeroed fp32 buffer. */
        void discarded(Phase p, int u) {
            if (lora && m.trainableNumel(u) == 0) {
                p.add(Part.GRAD_BUFFERS, 4 * m.numel(u));
            }
        }

        /**
         * Unit u's gradient being reduced: the accumulator and, reducing in bf16, its bf16 rounding and the bf16
         * shard the reduce-scatter writes (in fp32 it writes into the zeroed gradient shard in place). Unsharded,
         * nothing but the bf16 rounding of the gradient shard when reducing in bf16.
         */
        void reducing(Phase p, int u) {
            if (m.trainableNumel(u) == 0) {
                return; // frozen: nothing reduced
            }
            if (unsharded) {
                p.add(Part.GRAD_BUFFERS, w.reduceBytes() == 2 ? 2 * trainShard(u) : 0);
                return;
            }
            p.add(Part.GRAD_BUFFERS, 4 * trainPadded(u)); // the accumulator
            if (w.reduceBytes() == 2) {
                p.add(Part.GRAD_BUFFERS, 2 * trainPadded(u));
                p.add(Part.GRAD_BUFFERS, 2 * trainShard(u));
            }
            if (offload) { // never in place: the reduced fp32 shard, kept until its copy to the host is done
                p.add(Part.GRAD_BUFFERS, 4 * trainShard(u));
            }
        }

        /** Offloaded: unit u's fp32 master shard copied to the device ahead of its gather. */
        void staged(Phase p, int u) {
            if (offload && u >= 0 && u <= head) { // a frozen base is gathered from the device
                p.add(Part.GATHERED, 4 * trainShard(u));
            }
        }

        /** Offloaded: the staged shards of blocks {@code from} to {@code to} (those that exist). */
        void stagedBlocks(Phase p, int from, int to) {
            for (int l = Math.max(0, from); l <= to && l < blocks; l++) {
                staged(p, 1 + l);
            }
        }

        /**
         * Blocks whose forward is recomputed in their backward: all but those left out of checkpointing and those
         * checkpointed selectively before them ({@code fsdp.blocks_selective}), the first ones; none where the mode
         * recomputes no block.
         */
        int recomputedBlocks() {
            int recomputed = 0;
            while (recomputed < blocks && w.checkpointing(recomputed, blocks).recomputesBlocks()) {
                recomputed++;
            }
            return recomputed;
        }

        /**
         * Activations kept across blocks: under full checkpointing the embedding output and a copy of every block's
         * output (the next block's input, the head's input), keeping attention every block's attention output and
         * log-sum-exp as well; otherwise the embedding output and {@code scopes} blocks' forward scopes (under
         * selective checkpointing only what it keeps of them). Of the first {@code scopes} blocks, those not recomputed
         * ({@link #recomputedBlocks}: the last; selective, then left out of checkpointing) hold their forward scopes,
         * whole or what selective keeps.
         */
        void kept(Phase p, int scopes) {
            long residual = a.residual();
            int checkpointed = recomputedBlocks();
            if (checkpointed > 0) {
                p.add(Part.ACTIVATIONS, residual, checkpointed + 1);
                if (w.keepsAttention()) { // every checkpointed block's attention output and log-sum-exp
                    for (int i = 0; i < checkpointed; i++) {
                        p.add(Part.ACTIVATIONS, a.attention());
                    }
                }
                for (int i = checkpointed; i < Math.min(scopes, blocks); i++) {
                    p.add(Part.ACTIVATIONS, scope(i));
                }
            } else {
                p.add(Part.ACTIVATIONS, residual);
                for (int i = 0; i < scopes; i++) {
                    p.add(Part.ACTIVATIONS, scope(i));
                }
                if (scopes > 0) { // what the first block alone keeps (BLOOM's normalised embeddings)
                    p.add(Part.ACTIVATIONS, a.firstBlockExtra());
                }
            }
        }

        /** What block {@code layer}, not recomputed, keeps of its forward scope: what selective keeps, or all of it. */
        private long[] scope(int layer) {
            return w.checkpointing(layer, blocks) == ActivationCheckpointing.SELECTIVE ? a.kept() : a.forward();
        }

        /** Block {@code layer}'s backward scope: what checkpointing dropped of its forward, recomputed, and its gradients. */
        void backwardScope(Phase p, int layer) {
            ActivationCheckpointing mode = w.checkpointing(layer, blocks);
            if (mode.recomputesBlocks()) {
                p.add(Part.ACTIVATIONS, mode == ActivationCheckpointing.FULL_KEEP_ATTENTION ? a.forwardLessAttention()
                        : a.forward());
            } else if (mode == ActivationCheckpointing.SELECTIVE) {
                p.add(Part.ACTIVATIONS, a.recomputed());
            }
            p.add(Part.ACTIVATIONS, a.backward());
        }

        List<Phase> phases() {
            List<Phase> phases = new ArrayList<>();
            long residual = a.residual();
            int last = blocks - 1;

            // forward order: embeddings (unit 0), blocks (units 1 to blocks), head (unit blocks + 1 = head); the
            // backward order of the blocks is last first. `ahead` units of each order are gathered (prefetched)
            // while one computes, and, offloaded, one more is staged.
            Phase start = phase("forward, embeddings"); // embeddings computing, the next `ahead` units prefetched
            gathered(start, 0);
            for (int u = 1; u <= Math.min(ahead, head); u++) {
                gathered(start, u);
            }
            for (int u = 0; u <= Math.min(ahead + 1, head); u++) { // offloaded: their staged shards, and the next one's
                staged(start, u);
            }
            start.add(Part.ACTIVATIONS, residual);
            phases.add(start);

            if (blocks > 0) {
                Phase forward = phase("forward, last block"); // the last block computing, the head prefetched
                if (keep) {
                    gathered(forward, 0);
                    gatheredBlocks(forward, 0, last);
                } else {
                    gathered(forward, 1 + last);
                }
                if (ahead > 0) {
                    gathered(forward, head);
                }
                staged(forward, head);
                ActivationCheckpointing lastMode = w.checkpointing(last, blocks);
                if (lastMode.recomputesBlocks()) { // the last block's forward scope, freed when its forward returns
                    kept(forward, 0);
                    forward.add(Part.ACTIVATIONS, a.forward());
                } else {
                    kept(forward, blocks);
                    if (lastMode == ActivationCheckpointing.SELECTIVE) { // its recomputable ones, freed likewise
                        forward.add(Part.ACTIVATIONS, a.recomputed());
                    }
                }
                phases.add(forward);
            }

            Phase atHead = phase("head"); // loss and its backward; the first `ahead` blocks of backward prefetched
            gathered(atHead, head);
            if (keep) {
                gathered(atHead, 0);
                gatheredBlocks(atHead, 0, last);
            } else {
                gatheredBlocks(atHead, Math.min(last, last - ahead + 1), last); // the last block kept from its forward
                if (m.tied()) {
                    gathered(atHead, 0);
                }
            }
            if (!keep) { // offloaded: the prefetched blocks' staged shards, and the next one's
                stagedBlocks(atHead, last - ahead, last);
            }
            accumulating(atHead, head);
            discarded(atHead, head);
            if (m.tied()) {
                accumulating(atHead, 0);
                discarded(atHead, 0);
            }
            kept(atHead, blocks);
            atHead.add(Part.ACTIVATIONS, residual); // dx, the gradient flowing into the last block
            atHead.add(Part.LOGITS, a.head());
            phases.add(atHead);

            if (blocks > 0) {
                Phase first = phase("backward, last block"); // the head's reduction still running
                gatheredBlocks(first, keep ? 0 : last - ahead, last);
                if (!keep) {
                    stagedBlocks(first, last - ahead - 1, last - 1);
                }
                accumulating(first, 1 + last);
                reducing(first, head);
                if (m.tied()) {
                    accumulating(first, 0);
                }
                kept(first, blocks);
                first.add(Part.ACTIVATIONS, residual);
                backwardScope(first, last);
                phases.add(first);
            }

            if (blocks > 1) {
                int l = last - 1;
                Phase middle = phase("backward, block " + l); // the block above's gradient reducing
                gatheredBlocks(middle, keep ? 0 : l - ahead, l);
                if (!keep) {
                    stagedBlocks(middle, l - ahead - 1, l - 1);
                }
                accumulating(middle, 1 + l);
                reducing(middle, 2 + l);
                if (offload) { // the unit above: its accumulator and reduced shard held until its copy to the host is done
                    reducing(middle, 3 + l);
                }
                if (m.tied()) {
                    accumulating(middle, 0);
                }
                kept(middle, blocks - 1);
                middle.add(Part.ACTIVATIONS, 2 * residual); // the two input-gradient buffers: read one, write the other
                backwardScope(middle, l); // the block above's was freed when its input gradient was copied out
                phases.add(middle);
            }

            Phase embedding = phase("backward, embeddings"); // block 0's gradient still reducing
            accumulating(embedding, 0);
            if (blocks > 0) {
                reducing(embedding, 1);
                if (offload && blocks > 1) {
                    reducing(embedding, 2);
                }
                kept(embedding, 0);
                embedding.add(Part.ACTIVATIONS, blocks > 1 ? 2 * residual : residual); // block 0's scope freed
            }
            phases.add(embedding);

            Phase reduceEmbedding = phase("embedding reduction");
            reducing(reduceEmbedding, 0);
            phases.add(reduceEmbedding);
            return phases;
        }

        Estimate estimate() {
            List<Phase> phases = phases();
            Phase peak = null;
            long peakBytes = -1;
            for (Phase p : phases) {
                long total = p.sizes.stream().mapToLong(Long::longValue).sum();
                if (total > peakBytes) {
                    peakBytes = total;
                    peak = p;
                }
            }
            Map<Part, Long> parts = new EnumMap<>(Part.class);
            for (int i = 0; i < peak.sizes.size(); i++) {
                parts.merge(peak.parts.get(i), peak.sizes.get(i), Long::sum);
            }
            long host = 0;
            for (int u = 0; u <= head && offload; u++) {
                host += 16 * trainShard(u);
            }
            return new Estimate(parts, peak.name, peakBytes, reserved(phases), host);
        }
    }

    /**
     * What the caching allocator reserves over two steps of these moments: going from one moment to the next,
     * blocks no longer needed go to the cache, and each new block is taken from the cache (a block of its own
     * size class first, then the smallest cached block at most 1/8 + 2 MiB larger, as {@link DeviceAllocator}
     * does for requests of 1 MiB and more) or else newly reserved. Buffers are matched between moments by size.
     */
    static long reserved(List<Phase> phases) {
        Map<Long, ArrayDeque<Long>> live = new HashMap<>(); // requested size -> blocks handed out
        TreeMap<Long, Integer> cached = new TreeMap<>(); // block size -> count
        long reserved = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (Phase p : phases) {
                Map<Long, Integer> target = new HashMap<>();
                p.sizes.forEach(size -> target.merge(size, 1, Integer::sum));
                for (var e : live.entrySet()) { // frees
                    var blocks = e.getValue();
                    while (blocks.size() > target.getOrDefault(e.getKey(), 0)) {
                        cached.merge(blocks.pop(), 1, Integer::sum);
                    }
                }
                List<Long> needed = new ArrayList<>(); // allocations, largest first
                target.forEach((size, n) -> {
                    for (int i = live.getOrDefault(size, new ArrayDeque<>()).size(); i < n; i++) {
                        needed.add(size);
                    }
                });
                needed.sort(Comparator.reverseOrder());
                for (long size : needed) {
                    long limit = size < (1L << 20) ? size : size + size / 8 + (2L << 20);
                    Long block = cached.ceilingKey(size);
                    if (block != null && block <= limit) {
                        if (cached.merge(block, -1, Integer::sum) == 0) {
                            cached.remove(block);
                        }
                    } else {
                        block = size;
                        reserved += size;
                    }
                    live.computeIfAbsent(size, k -> new ArrayDeque<>()).push(block);
                }
            }
        }
        return reserved;
    }
}
