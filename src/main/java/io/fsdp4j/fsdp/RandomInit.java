package io.fsdp4j.fsdp;

import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import java.util.List;

/**
 * Random initial weights that depend only on (seed, unit, element), never on how the model is sharded
 * ({@link CounterBasedInit}): matrices and embeddings normal(0, std), norm weights 1, biases 0. Each element's normal
 * sample comes from SplitMix64 of its coordinates and a Box-Muller transform.
 */
public record RandomInit(long seed, double std, List<UnitLayout> units) implements CounterBasedInit {

    public RandomInit {
        units = List.copyOf(units);
    }

    @Override
    public ElementValues values(int unit, ParamSpec p) {
        return switch (p.kind()) {
            case NORM -> e -> 1f;
            case BIAS -> e -> 0f;
            case MATRIX, EMBEDDING -> e -> (float) (std * normal(unit, e));
        };
    }

    private double normal(int unit, long element) {
        long a = mix(seed ^ mix(((long) unit << 40) ^ element));
        long b = mix(a ^ 0x9E3779B97F4A7C15L);
        double u1 = ((a >>> 11) + 1) * 0x1.0p-53; // in (0, 1]
        double u2 = (b >>> 11) * 0x1.0p-53;
        return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
    }

    /** SplitMix64's step: the state advanced by the golden gamma, then finalized. */
    private static long mix(long z) {
        return CounterBasedInit.mix64(z + 0x9E3779B97F4A7C15L);
    }
}
