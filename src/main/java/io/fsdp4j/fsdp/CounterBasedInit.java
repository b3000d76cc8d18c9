package io.fsdp4j.fsdp;

import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import java.util.List;
import java.util.stream.IntStream;

/**
 * Initial weights each of which is a function of (seed, unit, element) alone, never of how the model is sharded: a
 * range of a unit is read by walking the parameters it overlaps and computing each element's value on its own, in
 * parallel chunks. Random numbers come from a counter-based generator: SplitMix64's finalizer ({@link #mix64}) of the
 * element's coordinates.
 */
interface CounterBasedInit extends ParamSource {

    /** The units, as the model lays them out. */
    List<UnitLayout> units();

    /** The values of parameter {@code p} of unit {@code unit}, by element (its offset in the unit's buffer). */
    ElementValues values(int unit, ParamSpec p);

    /** A parameter's initial values. */
    @FunctionalInterface
    interface ElementValues {
        float at(long element);
    }

    @Override
    default void read(int unit, long start, float[] dst, int dstOffset, int count) {
        long end = start + count;
        for (ParamSpec p : units().get(unit).params()) {
            ElementValues values = values(unit, p);
            long from = Math.max(start, p.offset()), to = Math.min(end, p.end());
            // every element is a function of its own coordinates: fill in parallel chunks
            int chunks = (int) Math.max(1, (to - from) / 65536);
            IntStream.range(0, chunks).parallel().forEach(c -> {
                long lo = from + (to - from) * c / chunks, hi = from + (to - from) * (c + 1) / chunks;
                for (long e = lo; e < hi; e++) {
                    dst[dstOffset + (int) (e - start)] = values.at(e);
                }
            });
        }
    }

    /** SplitMix64's finalizer: 64 well-mixed bits of {@code z}. */
    static long mix64(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
