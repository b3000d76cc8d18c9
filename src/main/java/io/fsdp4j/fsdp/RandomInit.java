package io.fsdp4j.fsdp;

import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import java.util.List;

/**
 * Random initial weights that depend only on (seed, unit, element), never on how the model is sharded:
 * matrices and embeddings normal(0, std), norm weights 1, biases 0. Each element's normal sample comes from a
 * counter-based generator (SplitMix64 of its coordinates and a Box-Muller transform).
 */
public record RandomInit(long seed, double std, List<UnitLayout> units) implements ParamSource {

    public RandomInit {
        units = List.copyOf(units);
    }

    @Override
    public void read(int unit, long start, float[] dst, int dstOffset, int count) {
        long end = start + count;
        for (ParamSpec p : units.get(unit).params()) {
            long from = Math.max(start, p.offset()), to = Math.min(end, p.end());
            // every element is a function of its own coordinates: fill in parallel chunks
            int chunks = (int) Math.max(1, (to - from) / 65536);
            java.util.stream.IntStream.range(0, chunks).parallel().forEach(c -> {
                long lo = from + (to - from) * c / chunks, hi = from + (to - from) * (c + 1) / chunks;
                for (long e = lo; e < hi; e++) {
                    dst[dstOffset + (int) (e - start)] = switch (p.kind()) {
                        case NORM -> 1f;
                        case BIAS -> 0f;
                        case MATRIX, EMBEDDING -> (float) (std * normal(unit, e));
                    };
                }
            });
        }
    }

    private double normal(int unit, long element) {
        long a = mix(seed ^ mix(((long) unit << 40) ^ element));
        long b = mix(a ^ 0x9E3779B97F4A7C15L);
        double u1 = ((a >>> 11) + 1) * 0x1.0p-53; // in (0, 1]
        double u2 = (b >>> 11) * 0x1.0p-53;
        return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    }

    private static long mix(long z) {
        z += 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
