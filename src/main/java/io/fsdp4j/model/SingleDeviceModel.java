package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * A model whose every unit is whole on one device: the plain forward and backward that the FSDP engine
 * must reproduce, used for scoring and as the reference in tests.
 */
public final class SingleDeviceModel implements ForwardPass {
    private final CausalLM model;
    private final Backend backend;
    private final List<Tensor> params;

    public SingleDeviceModel(CausalLM model, Backend backend, List<Tensor> params) {
        this.model = model;
        this.backend = backend;
        this.params = List.copyOf(params);
    }

    @Override
    public CausalLM model() {
        return model;
    }

    public List<Tensor> params() {
        return params;
    }

    @Override
    public Backend backend() {
        return backend;
    }

    @Override
    public DType activationType() {
        return params.getFirst().dtype();
    }

    @Override
    public Tensor logits(TokenBatch batch, KvCache cache, Tensor rows) {
        Tensor x = model.embedForward(params.get(0), batch);
        for (int layer = 0; layer < model.blockCount(); layer++) {
            x = model.blockForward(layer, params.get(model.blockUnit(layer)), x, batch, cache);
        }
        return model.logits(params.get(model.headUnit()), params.get(0), rowsOf(backend, x, rows));
    }

    /** The rows (R) I32 of x (N,C), as (R,C): a lookup in x as if it were an embedding table. */
    public static Tensor rowsOf(Backend backend, Tensor x, Tensor rows) {
        int C = x.dim(-1);
        Tensor table = x.view(0, Math.toIntExact(x.numel() / C), C);
        Tensor selected = backend.allocateForWrite(x.dtype(), Math.toIntExact(rows.numel()), C);
        backend.embeddingForward(selected, rows, table);
        return selected;
    }

    /**
     * Zeroed gradient buffers, one per unit, of what trains in it (a LoRA block's adapters:
     * {@link CausalLM#frozenNumel}); null for a unit frozen whole.
     */
    public List<Tensor> newGradients() {
        List<Tensor> grads = new ArrayList<>();
        for (int u = 0; u < model.units().size(); u++) {
            long trained = model.units().get(u).numel() - model.frozenNumel(u);
            grads.add(trained == 0 ? null : backend.allocate(DType.F32, Math.toIntExact(trained)));
        }
        return grads;
    }

    /** Sum of the token losses of the batch (no backward). lossPerRow (N) may be null. */
    public double loss(TokenBatch batch, Tensor lossPerRow) {
        Tensor x = forwardBlocks(batch, null);
        return model.headLoss(params.get(model.headUnit()), params.get(0), x, batch, 0f, null, null, null, lossPerRow);
    }

    /** The logits (N,V) of every position of the batch. */
    public Tensor logits(TokenBatch batch) {
        Tensor x = forwardBlocks(batch, null);
        return model.logits(params.get(model.headUnit()), params.get(0), x);
    }

    /**
     * Forward and backward of d(loss sum * gradScale), accumulating into grads (one per unit). Returns the loss sum.
     */
    public double lossAndGradients(TokenBatch batch, float gradScale, List<Tensor> grads) {
        List<BlockActivations> saved = new ArrayList<>();
        Tensor x = forwardBlocks(batch, saved);
        Tensor dx = backend.allocate(DType.F32, x.shape());
        double loss = model.headLoss(params.get(model.headUnit()), params.get(0), x, batch, gradScale,
                grads.get(model.headUnit()), grads.get(0), dx, null);
        for (int layer = model.blockCount() - 1; layer >= 0; layer--) {
            int unit = model.blockUnit(layer);
            dx = model.blockBackward(layer, params.get(unit), grads.get(unit), saved.get(layer), dx, batch, true);
        }
        if (grads.get(0) != null) {
            model.embedBackward(grads.get(0), batch, dx);
        }
        return loss;
    }

    private Tensor forwardBlocks(TokenBatch batch, List<BlockActivations> saved) {
        Tensor x = model.embedForward(params.get(0), batch);
        for (int layer = 0; layer < model.blockCount(); layer++) {
            BlockActivations a = model.blockForward(layer, params.get(model.blockUnit(layer)), x, batch);
            if (saved != null) {
                saved.add(a);
            }
            x = a.output();
        }
        return x;
    }
}
