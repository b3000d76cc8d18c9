package io.fsdp4j.checkpoint;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsFile;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A checkpoint directory opened for reading. Everything is validated when opened (the index, every shard file's
 * header, that the ranges of each unit cover it exactly once), so a corrupt or foreign checkpoint fails before any
 * rank has loaded anything. Any element range of a unit can then be read, whatever the world size that saved it:
 * loading onto another number of ranks or another strategy is reading other ranges.
 */
public final class SavedCheckpoint implements AutoCloseable {
    static final ObjectMapper JSON = new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
    public static final String INDEX = "index.json";

    /** The tensors a checkpoint holds for each unit, by their names in the shard files. */
    public enum Kind {
        PARAMS("params"), EXP_AVG("exp_avg"), EXP_AVG_SQ("exp_avg_sq");

        private final String suffix;

        Kind(String suffix) {
            this.suffix = suffix;
        }

        String tensorName(int unit) {
            return "units." + unit + "." + suffix;
        }
    }

    private final Path dir;
    private final CheckpointIndex index;
    private final List<SafetensorsFile> files;

    private SavedCheckpoint(Path dir, CheckpointIndex index, List<SafetensorsFile> files) {
        this.dir = dir;
        this.index = index;
        this.files = files;
    }

    public static SavedCheckpoint open(Path dir) {
        Path indexFile = dir.resolve(INDEX);
        if (!Files.isRegularFile(indexFile)) {
            throw new UserError("checkpoint " + dir + " has no " + INDEX + " (not an fsdp4j checkpoint, or incomplete)");
        }
        CheckpointIndex index;
        try {
            index = JSON.readValue(indexFile.toFile(), CheckpointIndex.class);
        } catch (IOException e) {
            String what = e.getMessage() == null ? e.toString() : e.getMessage().lines().findFirst().orElse("");
            throw new UserError("checkpoint index " + indexFile + " is not valid (" + what.replaceAll(
                    "\\s*\\(for Object starting at.*|\\s*at \\[Source.*", "") + "): the checkpoint is incomplete or"
                    + " corrupt; resume from another one (checkpoint.resume=PATH) or remove it");
        }
        if (!CheckpointIndex.FORMAT.equals(index.format())) {
            throw new UserError(indexFile + " is not an fsdp4j checkpoint (format '" + index.format() + "')");
        }
        if (index.version() != CheckpointIndex.VERSION) {
            throw new UserError(indexFile + " has layout version " + index.version() + "; this fsdp4j reads version "
                    + CheckpointIndex.VERSION);
        }
        if (index.units() == null || index.shards() == null || index.model() == null) {
            throw new UserError(indexFile + " lacks units, shards or model");
        }
        checkCoverage(indexFile, index);
        List<SafetensorsFile> files = new ArrayList<>();
        try {
            for (CheckpointIndex.Shard shard : index.shards()) {
                Path file = dir.resolve(shard.file()).normalize();
                if (!file.getParent().equals(dir.normalize()) || !Files.isRegularFile(file)) {
                    throw new UserError("checkpoint " + dir + " is missing its shard file " + shard.file());
                }
                SafetensorsFile f = SafetensorsFile.open(file);
                files.add(f);
                for (int u = 0; u < index.units().size(); u++) {
                    long count = shard.ranges().get(u).count();
                    for (Kind kind : Kind.values()) {
                        if (count > 0 && (!f.contains(kind.tensorName(u)) || f.info(kind.tensorName(u)).numel() != count)) {
                            throw new UserError("checkpoint shard " + file + " lacks " + kind.tensorName(u)
                                    + " of " + count + " elements");
                        }
                    }
                }
            }
        } catch (RuntimeException e) {
            files.forEach(SafetensorsFile::close);
            throw e;
        }
        return new SavedCheckpoint(dir, index, files);
    }

    /** Each unit's ranges over all shards must tile [0, numel) with no gap and no overlap. */
    private static void checkCoverage(Path indexFile, CheckpointIndex index) {
        for (int u = 0; u < index.units().size(); u++) {
            List<CheckpointIndex.Range> ranges = new ArrayList<>();
            for (CheckpointIndex.Shard s : index.shards()) {
                if (s.ranges() == null || s.ranges().size() != index.units().size()) {
                    throw new UserError(indexFile + ": shard " + s.file() + " does not list a range for every unit");
                }
                if (s.ranges().get(u).count() > 0) {
                    ranges.add(s.ranges().get(u));
                }
            }
            ranges.sort((a, b) -> Long.compare(a.start(), b.start()));
            long next = 0;
            for (CheckpointIndex.Range r : ranges) {
                if (r.start() != next) {
                    throw new UserError(indexFile + ": unit " + index.units().get(u).name() + " has a gap or overlap at "
                            + "element " + Math.min(next, r.start()));
                }
                next = r.start() + r.count();
            }
            if (next != index.units().get(u).numel()) {
                throw new UserError(indexFile + ": unit " + index.units().get(u).name() + " covers " + next + " of "
                        + index.units().get(u).numel() + " elements");
            }
        }
    }

    public Path dir() {
        return dir;
    }

    public CheckpointIndex index() {
        return index;
    }

    /** Refuses a checkpoint of another model than the one being trained. */
    public void requireLayout(List<UnitLayout> layout) {
        boolean same = layout.size() == index.units().size();
        for (int u = 0; same && u < layout.size(); u++) {
            same = layout.get(u).numel() == index.units().get(u).numel();
        }
        if (!same) {
            throw new UserError("checkpoint " + dir + " was saved from a different model (" + index.units().size()
                    + " units of other sizes); point checkpoint.resume at a checkpoint of this model or set it to none");
        }
    }

    /** A reader of any range of one kind of tensor (parameters or a moment) of any unit. */
    public ParamSource source(Kind kind) {
        return (unit, start, dst, dstOffset, count) -> {
            long end = start + count;
            for (int s = 0; s < index.shards().size(); s++) {
                CheckpointIndex.Range r = index.shards().get(s).ranges().get(unit);
                long from = Math.max(start, r.start()), to = Math.min(end, r.start() + r.count());
                if (from < to) {
                    files.get(s).readFloats(kind.tensorName(unit), from - r.start(), dst,
                            dstOffset + (int) (from - start), (int) (to - from));
                }
            }
        };
    }

    @Override
    public void close() {
        files.forEach(SafetensorsFile::close);
    }
}
