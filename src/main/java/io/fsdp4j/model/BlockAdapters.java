package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.tensor.Tensor;
import java.util.List;
import java.util.Map;

/**
 * A model's LoRA adapters on its blocks' linears, as the block stages call them: in the forward each targeted
 * product's adapter adds its output, in the backward its input's gradient and its own gradients, with LoRA's dropout
 * on its input in training ({@link LoraLinear.Dropout#of}). Under LoRA a block's gradient buffer holds the adapters'
 * gradients only: the elements of its flat buffer from {@code frozenNumel[layer]} on.
 *
 * @param perLayer    per block, its adapters by module name ({@code q_proj}, {@code query_key_value}, ...); empty
 *                    without LoRA
 * @param dropout     LoRA's dropout probability (0: none)
 * @param frozenNumel per block, the elements of its flat buffer before its adapters (its frozen base)
 */
record BlockAdapters(List<Map<String, LoraLinear>> perLayer, double dropout, long[] frozenNumel) {
    /** No adapters: every weight trains. */
    static final BlockAdapters NONE = new BlockAdapters(List.of(), 0, new long[0]);

    BlockAdapters {
        perLayer = List.copyOf(perLayer);
        frozenNumel = frozenNumel.clone();
    }

    /** Whether the blocks carry adapters (their base frozen). */
    boolean on() {
        return !perLayer.isEmpty();
    }

    /** The adapters of {@code modules} (those targeted) in block {@code layer} add their output to y, x's product. */
    void forward(Backend be, int layer, TokenBatch batch, Tensor w, Tensor y, Tensor x, String... modules) {
        if (!on()) {
            return;
        }
        for (String m : modules) {
            LoraLinear adapter = perLayer.get(layer).get(m);
            if (adapter != null) {
                adapter.forward(be, w, y, x, LoraLinear.Dropout.of(dropout, layer, m, adapter, batch));
            }
        }
    }

    /** Their part of the product's backward: dx += their input gradients, their own gradients into g. */
    void backward(Backend be, int layer, TokenBatch batch, Tensor w, Tensor g, Tensor dx, Tensor dy, Tensor x,
                  boolean acc, String... modules) {
        if (!on()) {
            return;
        }
        for (String m : modules) {
            LoraLinear adapter = perLayer.get(layer).get(m);
            if (adapter != null) {
                adapter.backward(be, w, g, frozenNumel[layer], dx, dy, x, acc,
                        LoraLinear.Dropout.of(dropout, layer, m, adapter, batch));
            }
        }
    }
}
