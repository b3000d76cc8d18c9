package io.fsdp4j.checkpoint;

import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.StreamingSafetensorsWriter;
import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A one-rank checkpoint of any model, written without training and without holding it in memory: parameter
 * {@code i} of unit {@code u} is {@link #value}, both moments are zero. For exports of models larger than a test's
 * heap. It is written in index version 1 (one tensor a unit, {@code units.<u>.params}), as fsdp4j saved before
 * tensors were named by parameter: that such checkpoints still export is tested through it.
 */
final class SyntheticCheckpoint {
    private SyntheticCheckpoint() {}

    /** The parameter value the checkpoint holds at element {@code i} of unit {@code u}'s flat buffer. */
    static float value(int u, long i) {
        long h = (i * 2654435761L + u * 40503L) % 2003;
        return (h - 1001) / 1024f;
    }

    static Path write(Path dir, ModelConfig config, String modelPath) throws IOException {
        Files.createDirectories(dir);
        List<UnitLayout> layout = CausalLMs.layout(config);
        List<StreamingSafetensorsWriter.Entry> entries = new ArrayList<>();
        List<CheckpointIndex.Unit> units = new ArrayList<>();
        List<CheckpointIndex.Range> ranges = new ArrayList<>();
        for (int u = 0; u < layout.size(); u++) {
            long n = layout.get(u).numel();
            for (SavedCheckpoint.Kind kind : SavedCheckpoint.Kind.values()) {
                entries.add(new StreamingSafetensorsWriter.Entry(ShardFormat.unitTensorName(kind, u), DType.F32, new long[] {n}));
            }
            units.add(new CheckpointIndex.Unit(layout.get(u).name(), n));
            ranges.add(new CheckpointIndex.Range(0, n));
        }
        String file = "shard-00000.safetensors";
        float[] chunk = new float[1 << 16];
        try (var writer = StreamingSafetensorsWriter.create(dir.resolve(file), entries, Map.of())) {
            for (int u = 0; u < layout.size(); u++) {
                long n = layout.get(u).numel();
                for (SavedCheckpoint.Kind kind : SavedCheckpoint.Kind.values()) {
                    for (long at = 0; at < n; at += chunk.length) {
                        int count = (int) Math.min(chunk.length, n - at);
                        for (int i = 0; i < count; i++) {
                            chunk[i] = kind == SavedCheckpoint.Kind.PARAMS ? value(u, at + i) : 0f;
                        }
                        writer.write(chunk, 0, count);
                    }
                }
            }
            writer.finish();
        }
        var index = new CheckpointIndex(CheckpointIndex.FORMAT, CheckpointIndex.VERSION_UNITS, 1, config, modelPath, units,
                List.of(new CheckpointIndex.Shard(file, ranges)), 1, 1, "full_shard", null, 0L, true);
        SavedCheckpoint.JSON.writeValue(dir.resolve(SavedCheckpoint.INDEX).toFile(), index);
        return dir;
    }
}
