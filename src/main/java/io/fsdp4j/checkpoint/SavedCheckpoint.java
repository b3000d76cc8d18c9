package io.fsdp4j.checkpoint;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.SafetensorsFile;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A checkpoint directory opened for reading. Everything is validated when opened (the index, every shard file's
 * header, that the ranges of each unit cover it exactly once), so a corrupt or foreign checkpoint fails before any
 * rank has loaded anything. Any element range of a unit can then be read, whatever the world size that saved it:
 * loading onto another number of ranks or another strategy is reading other ranges.
 */
public final class SavedCheckpoint implements AutoCloseable {
    static final ObjectMapper JSON = new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
    public static final String INDEX = "index.json";

    /** What a checkpoint holds of each parameter ({@link ShardFormat} names their tensors in the shard files). */
    public enum Kind {
        PARAMS, EXP_AVG, EXP_AVG_SQ
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
        if (index.version() != CheckpointIndex.VERSION && index.version() != CheckpointIndex.VERSION_UNITS) {
            throw new UserError(indexFile + " has layout version " + index.version() + "; this fsdp4j reads versions "
                    + CheckpointIndex.VERSION_UNITS + " and " + CheckpointIndex.VERSION + " (a newer fsdp4j saved it?)");
        }
        if (index.units() == null || index.shards() == null || index.model() == null) {
            throw new UserError(indexFile + " lacks units, shards or model");
        }
        checkCoverage(indexFile, index);
        if (index.version() == CheckpointIndex.VERSION) {
            checkNames(indexFile, index);
        }
        List<SafetensorsFile> files = new ArrayList<>();
        try {
            for (CheckpointIndex.Shard shard : index.shards()) {
                Path file = dir.resolve(shard.file()).normalize();
                if (!file.getParent().equals(dir.normalize()) || !Files.isRegularFile(file)) {
                    throw new UserError("checkpoint " + dir + " is missing its shard file " + shard.file());
                }
                SafetensorsFile f = SafetensorsFile.open(file);
                files.add(f);
                Map<String, Long> expected = new LinkedHashMap<>(); // tensor name -> elements
                if (index.version() == CheckpointIndex.VERSION_UNITS) {
                    for (int u = 0; u < index.units().size(); u++) {
                        for (Kind kind : Kind.values()) {
                            expected.put(ShardFormat.unitTensorName(kind, u), shard.ranges().get(u).count());
                        }
                    }
                } else {
                    shard.tensors().forEach((param, slice) -> {
                        for (Kind kind : Kind.values()) {
                            expected.put(ShardFormat.tensorName(kind, param), slice.count());
                        }
                    });
                }
                expected.forEach((name, count) -> {
                    if (count > 0 && (!f.contains(name) || f.info(name).numel() != count)) {
                        throw new UserError("checkpoint shard " + file + " lacks " + name + " of " + count + " elements");
                    }
                });
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

    /**
     * Version 2: each shard names the slices of exactly the parameters its unit ranges cover, as {@link
     * ShardFormat#shard} derives them from the units' parameters, which lie back to back in their unit.
     */
    private static void checkNames(Path indexFile, CheckpointIndex index) {
        List<UnitLayout> layouts = new ArrayList<>();
        for (CheckpointIndex.Unit unit : index.units()) {
            if (unit.params() == null) {
                throw new UserError(indexFile + ": unit " + unit.name() + " lists no parameters");
            }
            var params = new ArrayList<ParamSpec>();
            long next = 0;
            for (CheckpointIndex.Param p : unit.params()) {
                if (p.name() == null || p.shape() == null || p.offset() != next) {
                    throw new UserError(indexFile + ": unit " + unit.name() + " has a malformed parameter entry "
                            + (p.name() == null ? "#" + params.size() : p.name()));
                }
                params.add(new ParamSpec(p.name(), p.offset(), p.shape(),
                        ParamSpec.Kind.MATRIX));
                next += p.numel();
            }
            if (next != unit.numel()) {
                throw new UserError(indexFile + ": the parameters of unit " + unit.name() + " hold " + next + " of its "
                        + unit.numel() + " elements");
            }
            layouts.add(new UnitLayout(unit.name(), params, unit.numel()));
        }
        for (CheckpointIndex.Shard s : index.shards()) {
            if (s.tensors() == null || !s.tensors().equals(ShardFormat.shard(s.file(), layouts, s.ranges()).tensors())) {
                throw new UserError(indexFile + ": shard " + s.file() + " does not name the parameter slices of its"
                        + " ranges: the index is corrupt; resume from another checkpoint or remove it");
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
            List<CheckpointIndex.Param> saved = index.units().get(u).params(); // null in version 1: sizes only
            same = layout.get(u).numel() == index.units().get(u).numel() && (saved == null
                    || saved.stream().map(CheckpointIndex.Param::name).toList()
                    .equals(layout.get(u).params().stream().map(ParamSpec::name).toList()));
        }
        if (!same) {
            throw new UserError("checkpoint " + dir + " was saved from a different model (" + index.units().size()
                    + " units of other sizes or parameter names); point checkpoint.resume at a checkpoint of this model or set it to none");
        }
    }

    /**
     * A reader of any range of one kind of tensor (parameters or a moment) of any unit: from the slices of the
     * parameters in that range (version 2), or from the unit's one tensor in each shard (version 1).
     */
    public ParamSource source(Kind kind) {
        return (unit, start, dst, dstOffset, count) -> {
            long end = start + count;
            for (int s = 0; s < index.shards().size(); s++) {
                CheckpointIndex.Shard shard = index.shards().get(s);
                CheckpointIndex.Range r = shard.ranges().get(unit);
                if (index.version() == CheckpointIndex.VERSION_UNITS) {
                    read(s, ShardFormat.unitTensorName(kind, unit), r.start(), start, end, dst, dstOffset);
                    continue;
                }
                if (Math.max(start, r.start()) >= Math.min(end, r.start() + r.count())) {
                    continue;
                }
                for (CheckpointIndex.Param p : index.units().get(unit).params()) {
                    CheckpointIndex.Range slice = shard.tensors().get(p.name());
                    if (slice != null) { // unit elements [p.offset + slice.start, + slice.count) of this shard
                        read(s, ShardFormat.tensorName(kind, p.name()), p.offset() + slice.start(), start, end, dst,
                                dstOffset);
                    }
                }
            }
        };
    }

    /**
     * Reads what tensor {@code name} of shard file {@code s}, which holds the unit's elements from {@code first} on,
     * has of the unit's elements [start, end) into dst (whose element dstOffset is the unit's element start).
     */
    private void read(int s, String name, long first, long start, long end, float[] dst, int dstOffset) {
        if (!files.get(s).contains(name)) {
            return; // a shard with nothing of it
        }
        long held = files.get(s).info(name).numel();
        long from = Math.max(start, first), to = Math.min(end, first + held);
        if (from < to) {
            files.get(s).readFloats(name, from - first, dst, dstOffset + (int) (from - start), (int) (to - from));
        }
    }

    @Override
    public void close() {
        files.forEach(SafetensorsFile::close);
    }
}
