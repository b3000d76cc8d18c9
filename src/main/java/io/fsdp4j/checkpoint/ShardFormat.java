package io.fsdp4j.checkpoint;

import io.fsdp4j.checkpoint.SavedCheckpoint.Kind;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.StreamingSafetensorsWriter;
import io.fsdp4j.tensor.DType;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * How a checkpoint's shard files name and cut their tensors (index version {@value CheckpointIndex#VERSION}): a
 * rank's shard of a unit is the element range [start, start + count) of the unit's flat buffer; it is saved as one
 * 1-D fp32 tensor for each parameter with elements in that range, holding those elements (a slice of the flattened
 * parameter), under the parameter's own name ({@code model.layers.0.mlp.down_proj.weight}); the AdamW moments under
 * {@code optimizer.exp_avg.<name>} and {@code optimizer.exp_avg_sq.<name>}. The index records each unit's parameters
 * ({@link CheckpointIndex.Param}) and, per shard, which slice of each parameter it holds.
 */
final class ShardFormat {
    private ShardFormat() {}

    /** The name of {@code kind}'s tensor of parameter {@code param} in a shard file. */
    static String tensorName(Kind kind, String param) {
        return switch (kind) {
            case PARAMS -> param;
            case EXP_AVG -> "optimizer.exp_avg." + param;
            case EXP_AVG_SQ -> "optimizer.exp_avg_sq." + param;
        };
    }

    /** The name of {@code kind}'s tensor of unit {@code unit} in a shard file of index version 1. */
    static String unitTensorName(Kind kind, int unit) {
        return "units." + unit + "." + switch (kind) {
            case PARAMS -> "params";
            case EXP_AVG -> "exp_avg";
            case EXP_AVG_SQ -> "exp_avg_sq";
        };
    }

    /** A unit of the index: its name, size and parameters. */
    static CheckpointIndex.Unit unit(UnitLayout layout) {
        List<CheckpointIndex.Param> params = layout.params().stream()
                .map(p -> new CheckpointIndex.Param(p.name(), p.offset(), p.shape().clone())).toList();
        return new CheckpointIndex.Unit(layout.name(), layout.numel(), params);
    }

    /**
     * A shard of the index: the range of each unit it holds, and the slice of each parameter in those ranges, by
     * name, in layout order.
     */
    static CheckpointIndex.Shard shard(String file, List<UnitLayout> layouts, List<CheckpointIndex.Range> ranges) {
        Map<String, CheckpointIndex.Range> tensors = new LinkedHashMap<>();
        for (int u = 0; u < layouts.size(); u++) {
            CheckpointIndex.Range r = ranges.get(u);
            for (ParamSpec p : layouts.get(u).params()) {
                long from = Math.max(p.offset(), r.start()), to = Math.min(p.end(), r.start() + r.count());
                if (from < to) {
                    tensors.put(p.name(), new CheckpointIndex.Range(from - p.offset(), to - from));
                }
            }
        }
        return new CheckpointIndex.Shard(file, ranges, tensors);
    }

    /**
     * The pieces of one unit's shard that a shard file holds, in layout order: the shard begins at element
     * {@code start} of the unit and its first {@code owned} elements are parameters (the rest is padding, not saved).
     * Each piece is the slice of one parameter, as offsets into the shard's values.
     */
    static List<Slice> slices(UnitLayout layout, long start, int owned) {
        List<Slice> slices = new ArrayList<>();
        long end = start + owned;
        for (ParamSpec p : layout.params()) {
            long from = Math.max(p.offset(), start), to = Math.min(p.end(), end);
            if (from < to) {
                slices.add(new Slice(p.name(), (int) (from - start), (int) (to - from)));
            }
        }
        return slices;
    }

    /** A parameter's slice within a rank's shard of a unit: values [offset, offset + count) of the shard. */
    record Slice(String param, int offset, int count) {
        /** The 1-D fp32 tensor {@code kind}'s values of this slice are saved as. */
        StreamingSafetensorsWriter.Entry entry(Kind kind) {
            return new StreamingSafetensorsWriter.Entry(tensorName(kind, param), DType.F32, new long[] {count});
        }
    }
}
