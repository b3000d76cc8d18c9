package io.fsdp4j.checkpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.fsdp4j.Golden;
import io.fsdp4j.UserError;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ParamSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.safetensors.NamedTensor;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.safetensors.SafetensorsWriter;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.train.TrainingJob;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A sharded checkpoint names its tensors by the model's parameter names, and its index maps each name to the
 * shards that hold a slice of it; a checkpoint saved before (index version 1, {@code units.<u>.params}) still
 * resumes, with the same losses; a version this fsdp4j does not know is refused in one line.
 */
class CheckpointNamesTest {
    @TempDir
    Path tmp;

    @Test
    void shardFilesNameTensorsByParameterAndTheIndexMapsNamesToShards() throws IOException {
        Path dir = tmp.resolve("ck");
        CheckpointTest.train("full_shard", 3, 0, 2, dir, 2, 1, null);
        Path step = Checkpoints.stepDir(dir, 2);
        List<UnitLayout> layout = LlamaModel.layout(Golden.config("qwen2"));
        try (SavedCheckpoint saved = SavedCheckpoint.open(step)) {
            CheckpointIndex index = saved.index();
            assertThat(index.version()).isEqualTo(CheckpointIndex.VERSION);
            assertThat(index.shards()).hasSize(3);
            for (int u = 0; u < layout.size(); u++) {
                assertThat(index.units().get(u).params()).extracting(CheckpointIndex.Param::name)
                        .containsExactlyElementsOf(layout.get(u).params().stream().map(ParamSpec::name).toList());
            }
            for (UnitLayout unit : layout) {
                for (ParamSpec p : unit.params()) {
                    // the slices of p over the shards, in shard order, tile [0, numel) and are in the files by name
                    long next = 0;
                    for (CheckpointIndex.Shard shard : index.shards()) {
                        CheckpointIndex.Range slice = shard.tensors().get(p.name());
                        if (slice == null) {
                            continue;
                        }
                        assertThat(slice.start()).as(p.name()).isEqualTo(next);
                        next += slice.count();
                        try (SafetensorsFile f = SafetensorsFile.open(step.resolve(shard.file()))) {
                            assertThat(f.info(p.name()).numel()).isEqualTo(slice.count());
                            assertThat(f.info("optimizer.exp_avg." + p.name()).numel()).isEqualTo(slice.count());
                            assertThat(f.info("optimizer.exp_avg_sq." + p.name()).numel()).isEqualTo(slice.count());
                            assertThat(f.contains("units.0.params")).isFalse();
                        }
                    }
                    assertThat(next).as(p.name()).isEqualTo(p.numel());
                }
            }
            // a parameter read by name from the files is what the checkpoint's reader gives for its range
            UnitLayout block = layout.get(1);
            ParamSpec q = block.params().get(2);
            float[] byName = new float[(int) q.numel()];
            for (CheckpointIndex.Shard shard : index.shards()) {
                CheckpointIndex.Range slice = shard.tensors().get(q.name());
                if (slice != null) {
                    try (SafetensorsFile f = SafetensorsFile.open(step.resolve(shard.file()))) {
                        f.readFloats(q.name(), 0, byName, (int) slice.start(), (int) slice.count());
                    }
                }
            }
            float[] read = new float[(int) q.numel()];
            saved.source(SavedCheckpoint.Kind.PARAMS).read(1, q.offset(), read, 0, read.length);
            assertThat(read).containsExactly(byName);
        }
    }

    @Test
    void shardFilesWrittenPieceByPieceAreLaidOutAsTheWholeFileWriterLaysThemOut() throws IOException {
        Path dir = tmp.resolve("ck");
        CheckpointTest.train("full_shard", 2, 0, 1, dir, 1, 1, null);
        Path step = Checkpoints.stepDir(dir, 1);
        for (String shard : List.of("shard-00000.safetensors", "shard-00001.safetensors")) {
            List<NamedTensor> tensors = new ArrayList<>();
            Map<String, String> metadata;
            try (SafetensorsFile f = SafetensorsFile.open(step.resolve(shard))) {
                metadata = f.metadata();
                for (String name : f.names()) {
                    tensors.add(NamedTensor.of(name, DType.F32, f.info(name).shape(), f.readFloats(name)));
                }
            }
            assertThat(tensors).hasSizeGreaterThan(3);
            Path whole = tmp.resolve("whole-" + shard);
            SafetensorsWriter.write(whole, tensors, metadata);
            assertThat(Files.readAllBytes(step.resolve(shard))).as(shard).isEqualTo(Files.readAllBytes(whole));
        }
    }

    @Test
    void aCheckpointOfIndexVersionOneStillResumesWithTheSameLosses() throws IOException {
        Path dir = tmp.resolve("ck");
        CheckpointTest.train("full_shard", 2, 0, 4, dir, 2, 2, null);
        Path step = Checkpoints.stepDir(dir, 2), old = tmp.resolve("old");
        writeVersionOne(step, old);
        try (SavedCheckpoint saved = SavedCheckpoint.open(old)) {
            assertThat(saved.index().version()).isEqualTo(CheckpointIndex.VERSION_UNITS);
        }
        TrainingJob.Result fromNew = CheckpointTest.train("full_shard", 3, 0, 4, null, 0, 1, step);
        TrainingJob.Result fromOld = CheckpointTest.train("full_shard", 3, 0, 4, null, 0, 1, old);
        assertThat(fromOld.steps()).hasSize(2);
        for (int s = 0; s < 2; s++) {
            assertThat(fromOld.steps().get(s).loss()).isEqualTo(fromNew.steps().get(s).loss());
        }
    }

    @Test
    void aVersionThisFsdp4jDoesNotKnowIsRefusedInOneLine() throws IOException {
        Path dir = tmp.resolve("ck");
        CheckpointTest.train("full_shard", 1, 0, 1, dir, 1, 1, null);
        Path step = Checkpoints.stepDir(dir, 1);
        ObjectNode index = (ObjectNode) SavedCheckpoint.JSON.readTree(step.resolve(SavedCheckpoint.INDEX).toFile());
        index.put("version", 3);
        SavedCheckpoint.JSON.writeValue(step.resolve(SavedCheckpoint.INDEX).toFile(), index);
        assertThatThrownBy(() -> SavedCheckpoint.open(step)).isInstanceOf(UserError.class)
                .hasMessageContaining("layout version 3").hasMessageNotContaining("\n");
        // a version-2 index whose shard does not name its slices is refused, not read as zeros
        index.put("version", 2);
        ((ObjectNode) index.get("shards").get(0).get("tensors")).remove("model.norm.weight");
        SavedCheckpoint.JSON.writeValue(step.resolve(SavedCheckpoint.INDEX).toFile(), index);
        assertThatThrownBy(() -> SavedCheckpoint.open(step)).isInstanceOf(UserError.class)
                .hasMessageContaining("does not name the parameter slices");
    }

    /** The checkpoint at {@code from} rewritten as fsdp4j wrote checkpoints before version 2: one tensor a unit. */
    private static void writeVersionOne(Path from, Path to) throws IOException {
        Files.createDirectories(to);
        try (SavedCheckpoint saved = SavedCheckpoint.open(from)) {
            CheckpointIndex index = saved.index();
            List<CheckpointIndex.Shard> shards = new ArrayList<>();
            for (CheckpointIndex.Shard shard : index.shards()) {
                List<NamedTensor> tensors = new ArrayList<>();
                for (int u = 0; u < index.units().size(); u++) {
                    CheckpointIndex.Range r = shard.ranges().get(u);
                    for (SavedCheckpoint.Kind kind : SavedCheckpoint.Kind.values()) {
                        if (r.count() > 0) {
                            float[] values = new float[(int) r.count()];
                            saved.source(kind).read(u, r.start(), values, 0, values.length);
                            tensors.add(NamedTensor.of(ShardFormat.unitTensorName(kind, u), DType.F32,
                                    new long[] {r.count()}, values));
                        }
                    }
                }
                SafetensorsWriter.write(to.resolve(shard.file()), tensors, Map.of("format", CheckpointIndex.FORMAT));
                shards.add(new CheckpointIndex.Shard(shard.file(), shard.ranges()));
            }
            List<CheckpointIndex.Unit> units = new ArrayList<>();
            index.units().forEach(u -> units.add(new CheckpointIndex.Unit(u.name(), u.numel())));
            var old = new CheckpointIndex(index.format(), CheckpointIndex.VERSION_UNITS, index.step(), index.model(),
                    index.modelPath(), units, shards, index.worldSize(), index.shardSize(), index.strategy(),
                    index.config(), index.optimizerSteps(), index.finite());
            SavedCheckpoint.JSON.writeValue(to.resolve(SavedCheckpoint.INDEX).toFile(), old);
            String json = Files.readString(to.resolve(SavedCheckpoint.INDEX));
            assertThat(json).doesNotContain("\"tensors\"").doesNotContain("\"params\"");
        }
    }
}
