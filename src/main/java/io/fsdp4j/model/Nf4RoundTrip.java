package io.fsdp4j.model;

import io.fsdp4j.tensor.Nf4;
import java.util.List;

/**
 * A model's weights as a QLoRA run ({@code lora.quantize: nf4}) computes with them: each block linear (a
 * {@code MATRIX} parameter of a unit between the embeddings and the head) quantized to NF4 and dequantized again
 * ({@link Nf4#roundTrip}, fp32), everything else as {@code base} has it. A read of part of a weight quantizes the
 * whole blocks of 64 it touches (a weight is whole blocks), so any range reads the values the run held.
 *
 * @param layouts the units of {@code base} (the model without adapters)
 */
public record Nf4RoundTrip(ParamSource base, List<UnitLayout> layouts) implements ParamSource {
    public Nf4RoundTrip {
        layouts = List.copyOf(layouts);
    }

    @Override
    public void read(int unit, long start, float[] dst, int dstOffset, int count) {
        base.read(unit, start, dst, dstOffset, count);
        if (unit == 0 || unit == layouts.size() - 1) {
            return; // the embeddings, the head: as they are
        }
        long end = start + count;
        for (ParamSpec p : layouts.get(unit).params()) {
            long lo = Math.max(start, p.offset()), hi = Math.min(end, p.end());
            if (p.kind() != ParamSpec.Kind.MATRIX || lo >= hi) {
                continue;
            }
            long first = p.offset() + (lo - p.offset()) / Nf4.BLOCK * Nf4.BLOCK;
            long last = p.offset() + (hi - p.offset() + Nf4.BLOCK - 1) / Nf4.BLOCK * Nf4.BLOCK;
            float[] blocks = new float[Math.toIntExact(last - first)];
            base.read(unit, first, blocks, 0, blocks.length);
            float[] trip = Nf4.roundTrip(blocks);
            System.arraycopy(trip, Math.toIntExact(lo - first), dst, dstOffset + Math.toIntExact(lo - start),
                    Math.toIntExact(hi - lo));
        }
    }
}
