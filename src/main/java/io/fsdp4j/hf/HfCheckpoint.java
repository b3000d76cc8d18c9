package io.fsdp4j.hf;

import io.fsdp4j.UserError;
import io.fsdp4j.fsdp.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsDirectory;
import io.fsdp4j.safetensors.TensorInfo;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * The weights of a Hugging Face model directory (model.safetensors or its sharded form) as a {@link ParamSource}:
 * every parameter of the layout is checked for presence, dtype and shape when opened, and any element range of a
 * unit is read straight from the memory-mapped files, so a rank reads only its shard.
 */
public final class HfCheckpoint implements ParamSource, AutoCloseable {
    private final SafetensorsDirectory files;
    private final List<UnitLayout> units;

    private HfCheckpoint(SafetensorsDirectory files, List<UnitLayout> units) {
        this.files = files;
        this.units = units;
    }

    public static HfCheckpoint open(Path dir, List<UnitLayout> units) {
        SafetensorsDirectory files = SafetensorsDirectory.open(dir);
        try {
            for (UnitLayout unit : units) {
                for (ParamSpec p : unit.params()) {
                    check(files, p);
                }
            }
        } catch (RuntimeException e) {
            files.close();
            throw e;
        }
        return new HfCheckpoint(files, List.copyOf(units));
    }

    private static void check(SafetensorsDirectory files, ParamSpec p) {
        if (!files.contains(p.name())) {
            throw new UserError("checkpoint " + files.directory() + " has no tensor '" + p.name()
                    + "', which config.json implies");
        }
        TensorInfo info = files.info(p.name());
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
    }

    @Override
    public void read(int unit, long start, float[] dst, int dstOffset, int count) {
        long end = start + count;
        for (ParamSpec p : units.get(unit).params()) {
            long from = Math.max(start, p.offset()), to = Math.min(end, p.end());
            if (from < to) {
                files.readFloats(p.name(), from - p.offset(), dst, dstOffset + (int) (from - start), (int) (to - from));
            }
        }
    }

    @Override
    public void close() {
        files.close();
    }
}
