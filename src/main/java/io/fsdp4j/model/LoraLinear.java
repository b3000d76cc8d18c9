package io.fsdp4j.model;

import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.DropoutMask;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;

/**
 * The adapter of one linear, y += scaling * x A^T B^T, as views of a block's flat buffers: A (r, in) and B (out, r),
 * where the linear's output is the rows [row, row + out) of a wider product of width W (q, k and v are one product
 * of width (NH+2NKV)*HS, gate and up one of 2F). Written with the backend's linear ops only: B is placed in a zeroed
 * (W, r) matrix when the product is wider, so its output lands in its columns of y, and the backward takes its rows
 * back. Shapes: N rows, I = in, O = out, R = r.
 *
 * @param aOffset A's offset in the block's flat buffer
 * @param bOffset B's offset
 * @param in      I, the linear's input width
 * @param out     O, the linear's output width
 * @param row     first row of the linear's output in the product it is part of
 * @param width   W, the width of that product
 */
record LoraLinear(long aOffset, long bOffset, int in, int out, int row, int width, int rank, float scaling) {

    /**
     * Dropout on the adapter's input x (N,I) in training: the backend's {@link Backend#dropout} with these arguments,
     * so that the forward, a recomputed forward and the backward draw one mask.
     *
     * @param p          the probability of dropping an element, in (0, 1)
     * @param seed       the mask's seed (of the run, step, layer and module)
     * @param firstIndex the index of x's first element in the mask (its row in the global batch times I)
     */
    record Dropout(double p, long seed, long firstIndex) {
        /** dst = dropout(src), over equal sizes (dst may be src). */
        void apply(Backend be, Tensor dst, Tensor src) {
            be.dropout(dst, src, p, seed, firstIndex);
        }

        /**
         * LoRA's dropout (probability p) on the input of the adapter of {@code module} in layer {@code layer}: none
         * (null) outside training or at p 0; else a mask of its own for each (seed, step, layer, module), indexed by
         * the input's element in the step's global batch (so ranks and micro-batches draw as one batch would, and a
         * recompute as the forward did).
         */
        static Dropout of(double p, int layer, String module, LoraLinear adapter, TokenBatch batch) {
            TokenBatch.Training t = batch.training();
            if (p == 0 || t == null) {
                return null;
            }
            long seed = DropoutMask.seed(t.seed(), t.step(), layer, module.hashCode()); // String.hashCode: specified
            return new Dropout(p, seed, t.firstSequence() * batch.seqLen() * adapter.in());
        }

        /** The adapter's input: x itself without dropout (null), else a new dropout(x). */
        static Tensor input(Backend be, Dropout dropout, Tensor x) {
            if (dropout == null) {
                return x;
            }
            Tensor dropped = be.allocateForWrite(x.dtype(), x.shape());
            dropout.apply(be, dropped, x);
            return dropped;
        }
    }

    private Tensor a(Tensor block) {
        return block.view(aOffset, rank, in);
    }

    private Tensor b(Tensor block) {
        return block.view(bOffset, out, rank);
    }

    /** B, or B in its rows of a zeroed (W, R) matrix when the product is wider than the linear. */
    private Tensor placedB(Backend be, Tensor block) {
        Tensor b = b(block);
        if (out == width) {
            return b;
        }
        Tensor placed = be.allocate(b.dtype(), width, rank);
        be.copy(b, placed.view((long) row * rank, out, rank));
        return placed;
    }

    /** u (N,R) = scaling * x A^T: the adapter's inner activations. */
    private Tensor inner(Backend be, Tensor block, Tensor x, int n) {
        Tensor u = be.allocateForWrite(x.dtype(), n, rank);
        be.linearForward(u, x, a(block), null);
        be.scale(u, scaling);
        return u;
    }

    /** y (N,W) += scaling * dropout(x (N,I)) A^T B^T, in y's columns [row, row + O); dropout null: none. */
    void forward(Backend be, Tensor block, Tensor y, Tensor x, Dropout dropout) {
        int n = Math.toIntExact(x.numel() / in);
        Tensor u = inner(be, block, Dropout.input(be, dropout, x), n);
        Tensor delta = be.allocateForWrite(y.dtype(), n, width);
        be.linearForward(delta, u, placedB(be, block), null);
        be.add(y, delta);
    }

    /**
     * The adapter's part of the linear's backward: dx (N,I) += the adapter's input gradient; into g, A's and B's
     * gradients (written, or added with {@code accumulate}), where g holds the block's gradients from element
     * {@code gStart} of its buffer on (the adapters', the frozen base's before them having none); dy (N,W) is the
     * product's output gradient. The inner activations are recomputed from x (N*I*R multiply-adds) instead of kept,
     * with the forward's {@code dropout} (null: none) drawn again: the same mask, which the input's gradient goes
     * through too.
     */
    void backward(Backend be, Tensor block, Tensor g, long gStart, Tensor dx, Tensor dy, Tensor x,
                  boolean accumulate, Dropout dropout) {
        int n = Math.toIntExact(x.numel() / in);
        x = Dropout.input(be, dropout, x);
        Tensor u = inner(be, block, x, n);
        // du (N,R) = dy B_placed; dB_placed (W,R) = dy^T u, of which B's rows are dB
        Tensor du = be.allocateForWrite(x.dtype(), n, rank);
        Tensor dPlaced = be.allocateForWrite(DType.F32, width, rank);
        be.linearBackward(du, dPlaced, null, dy, u, placedB(be, block), false);
        Tensor dB = dPlaced.view((long) row * rank, out, rank), gB = g.view(bOffset - gStart, out, rank);
        if (accumulate) {
            be.add(gB, dB);
        } else {
            be.copy(dB, gB);
        }
        // u = scaling * t with t = x A^T: dt = scaling * du; dA (R,I) = dt^T x; the input's part dt A
        be.scale(du, scaling);
        Tensor dxAdapter = be.allocateForWrite(dx.dtype(), n, in);
        be.linearBackward(dxAdapter, g.view(aOffset - gStart, rank, in), null, du, x, a(block), accumulate);
        if (dropout != null) { // through the mask: d dropout(x) / dx = mask / (1 - p)
            dropout.apply(be, dxAdapter, dxAdapter);
        }
        be.add(dx, dxAdapter);
    }
}
