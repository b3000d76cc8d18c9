package io.fsdp4j.fsdp;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.MemoryScope;
import io.fsdp4j.config.Precision;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.ForwardPass;
import io.fsdp4j.model.KvCache;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * The forward pass alone through a sharded model's units, for evaluation and generation on the training ranks: each
 * unit gathered (in {@code fsdp.param_dtype}, prefetched as the policy says, offloaded shards copied in a unit
 * ahead) just before its stage and freed after it, whatever the strategy; nothing is kept for a backward, each block's
 * activations freed once the next block has read its output. Every rank of a shard group must run the same
 * sequence of forwards, since they gather together; a rank with nothing to compute passes a null batch and only
 * takes part in the gathers. The master shards are read, never changed.
 */
public final class ShardedForward implements ForwardPass {
    private final FsdpModel fsdp;
    private final List<FsdpUnit> order = new ArrayList<>(); // embeddings, blocks, head: the order they compute

    public ShardedForward(FsdpModel fsdp) {
        this.fsdp = fsdp;
        CausalLM model = fsdp.model();
        order.add(fsdp.units().get(0));
        for (int layer = 0; layer < model.blockCount(); layer++) {
            order.add(fsdp.units().get(model.blockUnit(layer)));
        }
        order.add(fsdp.units().get(model.headUnit()));
    }

    @Override
    public CausalLM model() {
        return fsdp.model();
    }

    @Override
    public Backend backend() {
        return fsdp.rank().backend();
    }

    @Override
    public DType activationType() {
        DType gathered = precision().dtype();
        return backend().computesIn(gathered) ? gathered : DType.F32;
    }

    private Precision precision() {
        return fsdp.policy().paramDtype();
    }

    /**
     * The sum of the batch's token losses (as {@link SingleDeviceModel#loss}), lossPerRow (N) receiving each
     * row's when not null; 0 for a null batch (this rank only takes part in the gathers).
     */
    public double loss(TokenBatch batch, Tensor lossPerRow) {
        Double sum = run(batch, null, (head, embedding, x) -> fsdp.model().headLoss(head, embedding, x, batch, 0f,
                null, null, null, lossPerRow));
        return sum == null ? 0 : sum;
    }

    @Override
    public Tensor logits(TokenBatch batch, KvCache cache, Tensor rows) {
        return run(batch, cache, (head, embedding, x) ->
                fsdp.model().logits(head, embedding, SingleDeviceModel.rowsOf(backend(), x, rows)));
    }

    /** The head's stage: from the gathered head (and, when tied, embedding) parameters and the final hidden states. */
    private interface HeadStage<R> {
        R apply(Tensor head, Tensor embedding, Tensor x);
    }

    /**
     * Embeddings, blocks and head over the batch (null: gathers only), each unit gathered before its stage and freed
     * after; returns what the head stage makes, allocated in the caller's scope.
     */
    private <R> R run(TokenBatch batch, KvCache cache, HeadStage<R> headStage) {
        CausalLM model = fsdp.model();
        Backend be = backend();
        Precision dtype = precision();
        boolean tied = model.headUsesEmbedding();
        FsdpUnit embedding = order.getFirst(), head = order.getLast();
        MemoryScope holding = be.newScope(); // the activations the next stage reads
        try {
            embedding.startGather(dtype);
            prefetchAfter(0);
            Tensor x = null;
            try (var entered = holding.enter()) {
                Tensor params = embedding.gather(dtype);
                if (batch != null) {
                    x = model.embedForward(params, batch);
                }
            }
            if (!tied) {
                embedding.free();
            }
            for (int layer = 0; layer < model.blockCount(); layer++) {
                FsdpUnit unit = order.get(1 + layer);
                unit.startGather(dtype);
                prefetchAfter(1 + layer);
                MemoryScope next = be.newScope();
                try (var entered = next.enter()) {
                    Tensor params = unit.gather(dtype);
                    if (batch != null) {
                        x = cache == null ? model.blockForward(layer, params, x, batch).output()
                                : model.blockForward(layer, params, x, batch, cache);
                    }
                } catch (RuntimeException | Error e) {
                    next.close();
                    throw e;
                }
                unit.free();
                holding.close(); // the block's input, read
                holding = next;
            }
            head.startGather(dtype);
            Tensor headParams = head.gather(dtype), embeddingParams = tied ? embedding.gather(dtype) : null;
            R result = batch == null ? null : headStage.apply(headParams, embeddingParams, x);
            head.free();
            embedding.free();
            return result;
        } finally {
            holding.close();
        }
    }

    /** Starts the gathers of the next {@code fsdp.prefetch} units after {@code at}, and the host copy of the one after. */
    private void prefetchAfter(int at) {
        int depth = fsdp.policy().prefetch();
        for (int i = at + 1; i <= at + depth && i < order.size(); i++) {
            order.get(i).startGather(precision());
        }
        if (at + depth + 1 < order.size()) {
            order.get(at + depth + 1).startHostCopy();
        }
    }
}
