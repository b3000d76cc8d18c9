package io.fsdp4j.backend;

import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Fp8;
import io.fsdp4j.tensor.Storage;
import io.fsdp4j.tensor.Tensor;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/**
 * The fp8 casts of a block's forward recomputed for its backward (full activation checkpointing), kept for that
 * backward (or, {@link #amaxesOnly}, only amaxes, for a block not checkpointed), and the amaxes that kernels writing a
 * product's operand computed on the way ({@link Fp8Amax}): a forward product given this store
 * ({@link Backend#fp8LinearForward(Tensor, Tensor, Tensor, Tensor, Fp8Casts)}) casts its weight into both layouts the
 * products take, row-major for itself and transposed for the input gradient, and its input into row-major and, when
 * the backward computes weight gradients, transposed for the weight gradient's product, each with one amax; the
 * backward given the same store takes them from here instead of casting again, so that a weight is cast once per
 * gather and an activation once. The numbers are those of the casts made anew: a cast depends only on the tensor's
 * elements (its amax, then each element scaled and rounded).
 *
 * <p>The caller's promise: every tensor cast through a store keeps its elements, and its memory, while the store is
 * in use (a block's gathered parameters and its recomputed activations, from the recompute to the end of the block's
 * backward). A cast lives in the memory scope entered when its product ran (on the CPU: the heap); the store is
 * dropped with that scope. A tensor is known by its storage (the object: {@link Same}), offset, shape and type: a
 * weight's view made again from the same gathered buffer is the same tensor. Used by one rank's thread.
 */
public final class Fp8Casts {
    /** A tensor's elements as this store knows them, and the format they were cast to. */
    private record Key(Same storage, long offset, List<Integer> shape, DType dtype, Fp8 format) {
        static Key of(Tensor t, Fp8 format) {
            return new Key(new Same(t.storage()), t.offset(), Arrays.stream(t.shape()).boxed().toList(), t.dtype(),
                    format);
        }
    }

    /**
     * A storage known by its identity, not its value: a device allocation is a record of its address, and a later
     * allocation at a freed tensor's address must not find that tensor's casts or amaxes. Views of one tensor share
     * its storage object.
     */
    private record Same(Storage storage) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Same other && other.storage == storage;
        }

        @Override
        public int hashCode() {
            return System.identityHashCode(storage);
        }
    }

    private final boolean weightGradients;
    private final boolean amaxesOnly;
    private final Map<Key, Object> casts = new HashMap<>();
    private int made;
    private int reused;

    /**
     * @param weightGradients whether the backward computes the weight gradients (not under LoRA: the base is frozen),
     *                        the products that read an input's transposed cast
     */
    public Fp8Casts(boolean weightGradients) {
        this(weightGradients, false);
    }

    private Fp8Casts(boolean weightGradients, boolean amaxesOnly) {
        this.weightGradients = weightGradients;
        this.amaxesOnly = amaxesOnly;
    }

    /**
     * A store for a forward whose activations its backward reads as they are (a block not checkpointed): its products
     * keep only their inputs' amaxes (a few bytes each, on the GPU), so that the backward's transposed casts of those
     * inputs skip their amax passes; the casts themselves are made anew (kept, a weight's fp8 copies would be held from
     * the forward to the backward: the memory of a block's activations). The same numbers: an input's amax is that of
     * the same elements. The CPU backend keeps nothing in it (its casts read their tensor once anyway).
     */
    public static Fp8Casts amaxesOnly(boolean weightGradients) {
        return new Fp8Casts(weightGradients, true);
    }

    /** Whether this store keeps only its inputs' amaxes ({@link #amaxesOnly(boolean)}). */
    public boolean amaxesOnly() {
        return amaxesOnly;
    }

    /** Whether the backward computes weight gradients: a forward casts its input transposed too. */
    boolean weightGradients() {
        return weightGradients;
    }

    /**
     * The backend's cast of {@code t} in {@code format} made by an earlier product, if it is there and
     * {@code usable} (it holds the layouts the product takes), counted as reused; else null.
     */
    <C> C find(Tensor t, Fp8 format, Class<C> type, Predicate<C> usable) {
        Object cast = casts.get(Key.of(t, format));
        if (type.isInstance(cast) && usable.test(type.cast(cast))) {
            reused++;
            return type.cast(cast);
        }
        return null;
    }

    /** {@code cast} of {@code t} in {@code format}, for later products over {@code t}. */
    void keep(Tensor t, Fp8 format, Object cast) {
        casts.put(Key.of(t, format), cast);
    }

    /** Counts a cast made by a product given this store (kept or not). */
    void made() {
        made++;
    }

    /** How many casts products given this store made (each an amax and a cast of one tensor). */
    public int castsMade() {
        return made;
    }

    /** How many casts products given this store took from it instead of casting again. */
    public int castsReused() {
        return reused;
    }
}
