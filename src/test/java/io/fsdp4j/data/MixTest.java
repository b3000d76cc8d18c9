package io.fsdp4j.data;

import static io.fsdp4j.data.DataFiles.write;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.config.WeightedPath;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Several datasets mixed by weight: proportions, a pure function of (data, weights, seed), resumed exactly. */
class MixTest {
    @TempDir
    Path tmp;

    /** {@code n} one-token-and-EOS documents whose first id is {@code base + i}. */
    private Path documents(String name, int base, int n) {
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < n; i++) {
            s.append("{\"input_ids\": [").append(base + i).append(", 1]}\n");
        }
        return write(tmp, name, s.toString());
    }

    private List<Dataset> parts() {
        return List.of(Datasets.load(documents("a.jsonl", 100, 30), 1000, 2, false, Split.TRAIN),
                Datasets.load(documents("b.jsonl", 500, 10), 1000, 2, false, Split.TRAIN));
    }

    @Test
    void partsGiveSequencesInProportionToTheirWeights() {
        Dataset mix = Datasets.mix(parts(), new double[] {1, 3}, 7);
        assertThat(mix.sequences()).hasSize(40);
        long fromB = mix.sequences().stream().filter(s -> s.ids()[0] >= 500).count();
        assertThat(fromB).isEqualTo(30); // 3/4 of 40: b's 10 sequences three times each
        var counts = new java.util.HashMap<Integer, Integer>();
        mix.sequences().forEach(s -> counts.merge(s.ids()[0], 1, Integer::sum));
        for (int id = 500; id < 510; id++) {
            assertThat(counts.get(id)).as("sequence %d of b", id).isEqualTo(3);
        }
        assertThat(counts.keySet().stream().filter(id -> id < 500).count()).isEqualTo(10); // a subset of a's 30
        assertThat(mix.documents()).isEqualTo(40);
    }

    @Test
    void aResumedRunContinuesTheExactOrder() {
        int steps = 12, global = 8;
        BatchSampler sampler = new BatchSampler(40, global, 3, true);
        Dataset mix = Datasets.mix(parts(), new double[] {2, 1}, 3);
        List<int[]> straight = new ArrayList<>();
        for (int step = 0; step < steps; step++) { // crosses epochs: 40 sequences, 8 a step
            straight.add(firstIds(mix, sampler.globalBatch(step)));
        }
        // A new process: the mix and the sampler built again from the same files, weights and seed, from step 7.
        Dataset again = Datasets.mix(parts(), new double[] {2, 1}, 3);
        BatchSampler resumed = new BatchSampler(again.sequences().size(), global, 3, true);
        for (int step = 7; step < steps; step++) {
            assertThat(firstIds(again, resumed.globalBatch(step))).as("step %d", step)
                    .containsExactly(straight.get(step));
        }
        // Another seed mixes differently.
        Dataset other = Datasets.mix(parts(), new double[] {2, 1}, 4);
        assertThat(firstIds(other, sampler.globalBatch(0))).isNotEqualTo(straight.getFirst());
    }

    private static int[] firstIds(Dataset d, int[] batch) {
        int[] ids = new int[batch.length];
        for (int i = 0; i < batch.length; i++) {
            ids[i] = d.sequences().get(batch[i]).ids()[0];
        }
        return ids;
    }

    @Test
    void dataTrainIsAPathOrAListOfPathsWithWeights() throws IOException {
        Path yaml = Files.writeString(tmp.resolve("c.yaml"), """
                data:
                  train:
                    - {path: a.jsonl, weight: 0.7}
                    - path: b.jsonl.zst
                      weight: 0.3
                    - c.parquet
                """);
        var d = TrainConfig.load(yaml, List.of()).data();
        assertThat(d.trainMix()).containsExactly(new WeightedPath(Path.of("a.jsonl"), 0.7),
                new WeightedPath(Path.of("b.jsonl.zst"), 0.3), new WeightedPath(Path.of("c.parquet"), 1));
        assertThat(d.train()).isEqualTo(Path.of("a.jsonl"));
        Path again = Files.writeString(tmp.resolve("again.yaml"), TrainConfig.load(yaml, List.of()).toYaml());
        assertThat(TrainConfig.load(again, List.of()).data()).isEqualTo(d);
        assertThat(TrainConfig.load(null, List.of("data.train=x.jsonl")).data().trainMix()).isNull();
        Path bad = Files.writeString(tmp.resolve("bad.yaml"), "data:\n  train:\n    - {path: a.jsonl, weight: -1}\n");
        assertThatThrownBy(() -> TrainConfig.load(bad, List.of())).isInstanceOf(UserError.class)
                .hasMessage("config key 'data.train[0].weight' must be a number > 0, got '-1'");
        Path typo = Files.writeString(tmp.resolve("typo.yaml"), "data:\n  train:\n    - {pth: a.jsonl}\n");
        assertThatThrownBy(() -> TrainConfig.load(typo, List.of())).isInstanceOf(UserError.class)
                .hasMessage("unknown config key 'data.train[0].pth'; known keys: path, weight");
    }
}
