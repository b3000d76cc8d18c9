package io.fsdp4j.hf;

import io.fsdp4j.UserError;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsDirectory;
import io.fsdp4j.safetensors.TensorInfo;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The weights of a Hugging Face model directory (model.safetensors or its sharded form) as a {@link ParamSource}:
 * every parameter of the layout is checked for presence, dtype and shape when opened, and any element range of a
 * unit is read straight from the memory-mapped files, so a rank reads only its shard.
 *
 * <p>Names: the layout's are those transformers writes for the causal-LM class ({@code transformer.h.0...} for
 * BLOOM, {@code model.layers.0...} for the Llama family). A checkpoint saved from the base model alone, as
 * bigscience's BLOOM checkpoints are ({@code h.0...}, {@code word_embeddings.weight}), lacks that first segment, the
 * class's base-model prefix; such a tensor is found under the name without it, as transformers finds it.
 */
public final class HfCheckpoint implements ParamSource, AutoCloseable {
    private final SafetensorsDirectory files;
    private final List<UnitLayout> units;
    private final Map<String, String> storedNames; // layout name -> name in the files

    private HfCheckpoint(SafetensorsDirectory files, List<UnitLayout> units, Map<String, String> storedNames) {
        this.files = files;
        this.units = units;
        this.storedNames = storedNames;
    }

    /** Base-model prefixes of the supported classes (transformers' base_model_prefix), with their dot. */
    private static final List<String> BASE_MODEL_PREFIXES = List.of("transformer.", "model.");

    public static HfCheckpoint open(Path dir, List<UnitLayout> units) {
        SafetensorsDirectory files = SafetensorsDirectory.open(dir);
        Map<String, String> storedNames = new HashMap<>();
        try {
            for (UnitLayout unit : units) {
                for (ParamSpec p : unit.params()) {
                    storedNames.put(p.name(), check(files, p));
                }
            }
        } catch (RuntimeException e) {
            files.close();
            throw e;
        }
        return new HfCheckpoint(files, List.copyOf(units), Map.copyOf(storedNames));
    }

    /** The name under which {@code p} is stored: its own, or without the base-model prefix. */
    private static String storedName(SafetensorsDirectory files, ParamSpec p) {
        if (files.contains(p.name())) {
            return p.name();
        }
        for (String prefix : BASE_MODEL_PREFIXES) {
            if (p.name().startsWith(prefix) && files.contains(p.name().substring(prefix.length()))) {
                return p.name().substring(prefix.length());
            }
        }
        throw new UserError("checkpoint " + files.directory() + " has no tensor '" + p.name()
                + "', which config.json implies");
    }

    /** Checks presence, shape and dtype; returns the stored name. */
    private static String check(SafetensorsDirectory files, ParamSpec p) {
        String stored = storedName(files, p);
        TensorInfo info = files.info(stored);
        long[] expected = Arrays.stream(p.shape()).asLongStream().toArray();
        if (!Arrays.equals(info.shape(), expected)) {
            throw new UserError("tensor '" + p.name() + "' has shape " + Arrays.toString(info.shape())
                    + " in the checkpoint but config.json implies " + Arrays.toString(expected));
        }
        String dtype = info.dtype();
        if (!dtype.equals("F32") && !dtype.equals("BF16") && !dtype.equals("F16")) {
            throw new UserError("tensor '" + p.name() + "' is stored as " + dtype
                    + "; model weights must be F32, BF16 or F16");
        }
        return stored;
    }

    @Override
    public void read(int unit, long start, float[] dst, int dstOffset, int count) {
        long end = start + count;
        for (ParamSpec p : units.get(unit).params()) {
            long from = Math.max(start, p.offset()), to = Math.min(end, p.end());
            if (from < to) {
                files.readFloats(storedNames.get(p.name()), from - p.offset(), dst, dstOffset + (int) (from - start), (int) (to - from));
            }
        }
    }

    @Override
    public void close() {
        files.close();
    }
}
