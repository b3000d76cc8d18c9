package io.fsdp4j.fsdp;

import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import java.util.List;

/**
 * PEFT's initial LoRA adapters, over the adapters' layouts ({@link FsdpModel#trainableLayouts}): each A (r, in)
 * uniform in [-1/sqrt(in), 1/sqrt(in)] (PEFT's {@code kaiming_uniform_(a=sqrt(5))}), each B zero, so that the
 * adapted model starts as the base model. Each element is a function of (seed, unit, element) only, never of how the
 * adapters are sharded (a counter-based generator, as {@link RandomInit}).
 */
public record LoraInit(long seed, List<UnitLayout> units) implements ParamSource {

    public LoraInit {
        units = List.copyOf(units);
    }

    @Override
    public void read(int unit, long start, float[] dst, int dstOffset, int count) {
        long end = start + count;
        for (ParamSpec p : units.get(unit).params()) {
            long from = Math.max(start, p.offset()), to = Math.min(end, p.end());
            boolean a = p.name().endsWith(".lora_A.weight");
            if (!a && !p.name().endsWith(".lora_B.weight")) {
                throw new IllegalArgumentException("not a LoRA adapter: " + p);
            }
            double bound = 1 / Math.sqrt(p.shape()[1]);
            for (long e = from; e < to; e++) {
                dst[dstOffset + (int) (e - start)] = a ? (float) (bound * (2 * uniform(unit, e) - 1)) : 0f;
            }
        }
    }

    /** In [0, 1). */
    private double uniform(int unit, long element) {
        long z = seed ^ (((long) unit << 40) ^ element) * 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        z ^= z >>> 31;
        return (z >>> 11) * 0x1.0p-53;
    }
}
