package io.fsdp4j.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.optim.AdamW;
import io.fsdp4j.optim.TrainableShard;
import io.fsdp4j.safetensors.StreamingSafetensorsWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Saving sharded checkpoints and finding them. A checkpoint is a directory {@code step-NNNNNNNN} under
 * {@code checkpoint.dir}: one safetensors file per rank of the first replica holding that rank's ranges of every
 * unit (fp32 parameters and both AdamW moments), and {@code index.json}. It is written under a temporary name and
 * renamed only when complete, so a crash never leaves a partial checkpoint that looks whole, and older checkpoints
 * are pruned only after the new one exists. The index records whether every saved value is finite; pruning never
 * deletes the newest finite checkpoint, so a run that diverged leaves the one to go back to. A run holds its
 * directory with a {@link DirectoryLock} for its whole life.
 */
public final class Checkpoints {
    private static final Pattern STEP_DIR = Pattern.compile("step-(\\d{8})");

    private Checkpoints() {}

    public static Path stepDir(Path root, int step) {
        return root.resolve(String.format("step-%08d", step));
    }

    /**
     * How a shard file is written: {@link StreamingSafetensorsWriter}, or in tests one that fails as a full disk does.
     * The file's tensors are named before their values, which are then given unit by unit, so that a rank holds one
     * unit's values on its heap at a time, not its whole shard of the model and both moments.
     */
    @FunctionalInterface
    public interface ShardWriter {
        /** Creates {@code file} for {@code entries}' values, or throws a {@link UserError}. */
        ShardFile open(Path file, List<StreamingSafetensorsWriter.Entry> entries, Map<String, String> metadata);
    }

    /** A shard file being written: the entries' values in their order, then {@link #finish}. */
    public interface ShardFile extends AutoCloseable {
        /** The next {@code count} values, from {@code values[offset..]}; throws a {@link UserError} when it fails. */
        void write(float[] values, int offset, int count);

        /** Completes the file on disk. */
        void finish();

        /** Closes the file; without {@link #finish}, deletes what was written. */
        @Override
        void close();
    }

    /** The shard files of a checkpoint as safetensors, written piece by piece. */
    public static ShardFile safetensors(Path file, List<StreamingSafetensorsWriter.Entry> entries,
                                        Map<String, String> metadata) {
        StreamingSafetensorsWriter writer = StreamingSafetensorsWriter.create(file, entries, metadata);
        return new ShardFile() {
            @Override
            public void write(float[] values, int offset, int count) {
                writer.write(values, offset, count);
            }

            @Override
            public void finish() {
                writer.finish();
            }

            @Override
            public void close() {
                writer.close();
            }
        };
    }

    /**
     * Where and how a run saves its checkpoints.
     *
     * @param root            the checkpoint directory ({@code checkpoint.dir}): one {@code step-NNNNNNNN} per save
     * @param keep            how many of the newest to keep (the newest finite one is never pruned)
     * @param modelPath       the Hugging Face directory the run started from (recorded for export), or null
     * @param effectiveConfig the run's config as recorded in the index (compared when resuming), or null
     */
    public record Target(Path root, int keep, String modelPath, JsonNode effectiveConfig) {}

    /**
     * Saves this rank's part of {@code state} at its step; every rank of the world calls it at the same step. Returns
     * the checkpoint directory.
     */
    public static Path save(TrainState state, Target target) {
        return save(state, target, Checkpoints::safetensors);
    }

    /**
     * {@link #save} with the shard files written by {@code writer}. When any write fails (a full disk), the error
     * reaches every rank, nothing is renamed or pruned, and the checkpoints saved before stay whole.
     */
    public static Path save(TrainState state, Target target, ShardWriter writer) {
        FsdpModel model = state.model();
        AdamW optimizer = state.optimizer();
        RankContext rank = model.rank();
        Path root = target.root();
        int step = state.step();
        Path finalDir = stepDir(root, step);
        Path tmp = root.resolve(".tmp-" + finalDir.getFileName());
        if (rank.rank() == 0) {
            try {
                Files.createDirectories(root);
                deleteTree(tmp); // left by a crash during an earlier save
                Files.createDirectories(tmp);
            } catch (IOException e) {
                throw new UserError("cannot create checkpoint directory under " + root + ": " + e.getMessage());
            }
        }
        rank.world().barrier();
        int shardRank = rank.mesh().shardRankOf(rank.rank());
        long nonFinite = 0;
        if (rank.mesh().replicaOf(rank.rank()) == 0) { // replicas hold the same shards: the first one writes
            List<? extends TrainableShard> trained = model.trainableShards();
            List<List<ShardFormat.Slice>> slices = new ArrayList<>();
            List<StreamingSafetensorsWriter.Entry> entries = new ArrayList<>();
            for (TrainableShard unit : trained) {
                List<ShardFormat.Slice> unitSlices = ShardFormat.slices(unit.layout(), unit.shardStart(), unit.ownedElements());
                slices.add(unitSlices);
                for (SavedCheckpoint.Kind kind : SavedCheckpoint.Kind.values()) {
                    unitSlices.forEach(s -> entries.add(s.entry(kind)));
                }
            }
            try (ShardFile file = writer.open(tmp.resolve(shardFile(shardRank)), entries,
                    Map.of("format", CheckpointIndex.FORMAT, "step", Integer.toString(step)))) {
                for (int u = 0; u < trained.size(); u++) {
                    if (slices.get(u).isEmpty()) {
                        continue;
                    }
                    for (SavedCheckpoint.Kind kind : SavedCheckpoint.Kind.values()) {
                        float[] values = switch (kind) { // one unit's values at a time on the heap
                            case PARAMS -> trained.get(u).masterValues();
                            case EXP_AVG -> optimizer.firstMomentValues(u);
                            case EXP_AVG_SQ -> optimizer.secondMomentValues(u);
                        };
                        nonFinite += countNonFinite(values, trained.get(u).ownedElements());
                        for (ShardFormat.Slice s : slices.get(u)) {
                            file.write(values, s.offset(), s.count());
                        }
                    }
                }
                file.finish();
            }
        }
        // every shard written (this waits for all ranks), and whether any held a value that is not finite
        boolean finite = rank.world().allReduce(new double[] {nonFinite})[0] == 0;
        if (rank.rank() == 0) {
            List<CheckpointIndex.Unit> units = new ArrayList<>();
            for (TrainableShard u : model.trainableShards()) {
                units.add(ShardFormat.unit(u.layout()));
            }
            List<CheckpointIndex.Shard> shards = new ArrayList<>();
            int shardSize = rank.mesh().shardSize();
            for (int s = 0; s < shardSize; s++) {
                List<CheckpointIndex.Range> ranges = new ArrayList<>();
                for (TrainableShard u : model.trainableShards()) {
                    long shardNumel = u.shardNumel(), start = s * shardNumel;
                    ranges.add(new CheckpointIndex.Range(start, Math.max(0, Math.min(shardNumel, u.layout().numel() - start))));
                }
                shards.add(ShardFormat.shard(shardFile(s), model.trainableShards().stream().map(TrainableShard::layout).toList(),
                        ranges));
            }
            var index = new CheckpointIndex(CheckpointIndex.FORMAT, CheckpointIndex.VERSION, step,
                    model.model().config(), target.modelPath(), units, shards, rank.worldSize(), shardSize,
                    model.policy().strategy().toString(), target.effectiveConfig(), optimizer.stepsTaken(), finite,
                    state.tokensSeen(), state.scaler().isDynamic()
                            ? new CheckpointIndex.LossScale(state.scaler().scale(), state.scaler().cleanSteps()) : null);
            try {
                SavedCheckpoint.JSON.writerWithDefaultPrettyPrinter().writeValue(tmp.resolve(SavedCheckpoint.INDEX).toFile(), index);
                if (Files.exists(finalDir)) { // the same step saved again: replace it only now that the new one is whole
                    Path old = root.resolve(".old-" + finalDir.getFileName());
                    deleteTree(old);
                    Files.move(finalDir, old, StandardCopyOption.ATOMIC_MOVE);
                    Files.move(tmp, finalDir, StandardCopyOption.ATOMIC_MOVE);
                    deleteTree(old);
                } else {
                    Files.move(tmp, finalDir, StandardCopyOption.ATOMIC_MOVE);
                }
                prune(root, target.keep());
            } catch (IOException e) {
                throw new UserError("cannot complete checkpoint " + finalDir + ": " + e.getMessage());
            }
        }
        rank.world().barrier();
        return finalDir;
    }

    /**
     * The state saved in {@code checkpoint}, on this rank: {@code fresh} builds the model's shards from the
     * checkpoint's parameters (only this rank's ranges are read, whatever the world size that saved them), then the
     * optimizer's moments and updates, the loss scale, the step and the tokens seen are restored. Every rank calls it
     * alike.
     */
    public static TrainState load(SavedCheckpoint checkpoint, Function<ParamSource, TrainState> fresh) {
        TrainState state = fresh.apply(checkpoint.source(SavedCheckpoint.Kind.PARAMS));
        CheckpointIndex index = checkpoint.index();
        state.optimizer().restore(index.optimizerStepsTaken(), checkpoint.source(SavedCheckpoint.Kind.EXP_AVG),
                checkpoint.source(SavedCheckpoint.Kind.EXP_AVG_SQ));
        if (index.lossScale() != null) {
            state.scaler().restore(index.lossScale().scale(), index.lossScale().cleanSteps());
        }
        state.resumeAt(index.step(), index.tokensSeen());
        return state;
    }

    private static long countNonFinite(float[] values, int count) {
        long bad = 0;
        for (int i = 0; i < count; i++) {
            if (!Float.isFinite(values[i])) {
                bad++;
            }
        }
        return bad;
    }

    private static String shardFile(int shardRank) {
        return String.format("shard-%05d.safetensors", shardRank);
    }

    /** Complete checkpoints under root (those with an index), oldest first. */
    public static List<Path> list(Path root) {
        List<Path> result = new ArrayList<>();
        if (!Files.isDirectory(root)) {
            return result;
        }
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(root)) {
            for (Path p : entries) {
                if (STEP_DIR.matcher(p.getFileName().toString()).matches()
                        && Files.isRegularFile(p.resolve(SavedCheckpoint.INDEX))) {
                    result.add(p);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        result.sort(Comparator.comparing(p -> p.getFileName().toString()));
        return result;
    }

    /** The newest complete checkpoint under root, or null. */
    public static Path latest(Path root) {
        List<Path> all = list(root);
        return all.isEmpty() ? null : all.getLast();
    }

    /**
     * The checkpoint a user names: a step directory (with its index) as it is, or a checkpoint directory
     * ({@code checkpoint.dir}) holding step directories: its newest. Anything else is returned as given, for
     * {@link SavedCheckpoint#open} to say what it lacks.
     */
    public static Path resolve(Path named) {
        if (!Files.isRegularFile(named.resolve(SavedCheckpoint.INDEX)) && latest(named) != null) {
            return latest(named);
        }
        return named;
    }

    /**
     * Refuses to start a run that would save into a checkpoint directory holding checkpoints it does not continue:
     * its pruning would delete them, or they would be mixed with its own and a later {@code resume=auto} would pick
     * the wrong run's. A run may save there when it resumes from the newest of them. Nothing is deleted here.
     *
     * @param resumingFrom the checkpoint the run resumes from, or null
     */
    public static void requireOwnDirectory(Path root, Path resumingFrom) {
        Path newest = latest(root);
        if (newest == null) {
            return;
        }
        if (resumingFrom == null) {
            throw new UserError("checkpoint.dir " + root + " already holds checkpoints (newest: " + newest.getFileName()
                    + "); set checkpoint.resume=auto to continue from it, or give a new checkpoint.dir (a fresh run"
                    + " there would prune them)");
        }
        Path from = resumingFrom.toAbsolutePath().normalize();
        boolean inRoot = root.toAbsolutePath().normalize().equals(from.getParent());
        boolean newerAllNonFinite = list(root).stream().filter(p -> p.toAbsolutePath().normalize().compareTo(from) > 0)
                .noneMatch(Checkpoints::isFinite); // a diverged run's: this run goes back to before them
        if (inRoot && !from.equals(newest.toAbsolutePath().normalize()) && !newerAllNonFinite) {
            throw new UserError("checkpoint.resume " + resumingFrom + " is older than " + newest.getFileName()
                    + " in the same checkpoint.dir, which this run would overwrite; move the newer checkpoints away"
                    + " or give a new checkpoint.dir");
        }
        if (!inRoot) {
            throw new UserError("checkpoint.dir " + root + " already holds checkpoints of another run (newest: "
                    + newest.getFileName() + ") and this run resumes from " + resumingFrom + "; give a new"
                    + " checkpoint.dir (this run would prune them)");
        }
    }

    /**
     * Deletes all but the {@code keep} newest checkpoints, except the newest whose state is finite: after a run
     * diverged, the checkpoint to go back to is never pruned.
     */
    private static void prune(Path root, int keep) throws IOException {
        List<Path> all = list(root);
        Path finite = latestFinite(root);
        for (int i = 0; i < all.size() - keep; i++) {
            if (!all.get(i).equals(finite)) {
                deleteTree(all.get(i));
            }
        }
    }

    /**
     * Deletes what saves interrupted by a crash left under {@code root}: the temporary directories of checkpoints
     * being written ({@code .tmp-step-N}) or replaced ({@code .old-step-N}). Called while holding the directory's
     * {@link DirectoryLock}, when no save is under way; returns what it removed.
     */
    public static List<Path> removeStaleTemporaries(Path root) {
        List<Path> stale = new ArrayList<>();
        if (!Files.isDirectory(root)) {
            return stale;
        }
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(root)) {
            for (Path p : entries) {
                String name = p.getFileName().toString();
                if ((name.startsWith(".tmp-step-") || name.startsWith(".old-step-")) && Files.isDirectory(p)) {
                    stale.add(p);
                }
            }
            stale.sort(Comparator.naturalOrder());
            for (Path p : stale) {
                deleteTree(p);
            }
        } catch (IOException e) {
            throw new UserError("cannot remove the temporary directories of interrupted saves in " + root + ": "
                    + e.getMessage());
        }
        return stale;
    }

    /**
     * Deletes the checkpoints under {@code root} newer than {@code from} when none of them is finite (a diverged
     * run's, which a run resuming from {@code from} replaces); returns them. Newer finite ones are left alone (and
     * {@link #requireOwnDirectory} refuses such a run).
     */
    public static List<Path> removeNonFiniteAfter(Path root, Path from) {
        Path start = from.toAbsolutePath().normalize();
        List<Path> newer = list(root).stream().filter(p -> p.toAbsolutePath().normalize().compareTo(start) > 0)
                .toList();
        if (newer.isEmpty() || newer.stream().anyMatch(Checkpoints::isFinite)) {
            return List.of();
        }
        try {
            for (Path p : newer) {
                deleteTree(p);
            }
        } catch (IOException e) {
            throw new UserError("cannot remove the checkpoints after " + from + " that are not finite: " + e.getMessage());
        }
        return newer;
    }

    /**
     * Whether the checkpoint in {@code dir} is not recorded as holding values that are not finite (one whose index
     * cannot be read counts as finite here: opening it says what is wrong with it).
     */
    public static boolean isFinite(Path dir) {
        try {
            return SavedCheckpoint.JSON.readValue(dir.resolve(SavedCheckpoint.INDEX).toFile(), CheckpointIndex.class)
                    .isFinite();
        } catch (IOException e) {
            return true;
        }
    }

    /** The newest complete checkpoint under root whose state is finite, or null. */
    public static Path latestFinite(Path root) {
        List<Path> all = list(root);
        for (int i = all.size() - 1; i >= 0; i--) {
            if (isFinite(all.get(i))) {
                return all.get(i);
            }
        }
        return null;
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
