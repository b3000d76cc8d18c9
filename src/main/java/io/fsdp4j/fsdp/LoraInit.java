package io.fsdp4j.fsdp;

import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import java.util.List;

/**
 * PEFT's initial LoRA adapters, over the adapters' layouts ({@link FsdpModel#trainableLayouts}): each A (r, in)
 * uniform in [-1/sqrt(in), 1/sqrt(in)] (PEFT's {@code kaiming_uniform_(a=sqrt(5))}), each B zero, so that the
 * adapted model starts as the base model. Each element is a function of (seed, unit, element) only, never of how the
 * adapters are sharded ({@link CounterBasedInit}, as {@link RandomInit}).
 */
public record LoraInit(long seed, List<UnitLayout> units) implements CounterBasedInit {

    public LoraInit {
        units = List.copyOf(units);
    }

    @Override
    public ElementValues values(int unit, ParamSpec p) {
        boolean a = p.name().endsWith(".lora_A.weight");
        if (!a && !p.name().endsWith(".lora_B.weight")) {
            throw new IllegalArgumentException("not a LoRA adapter: " + p);
        }
        if (!a) {
            return e -> 0f;
        }
        double bound = 1 / Math.sqrt(p.shape()[1]);
        return e -> (float) (bound * (2 * uniform(unit, e) - 1));
    }

    /** In [0, 1). */
    private double uniform(int unit, long element) {
        long z = CounterBasedInit.mix64(seed ^ (((long) unit << 40) ^ element) * 0x9E3779B97F4A7C15L);
        return (z >>> 11) * 0x1.0p-53;
    }
}
