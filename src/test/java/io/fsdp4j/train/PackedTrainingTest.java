package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Dataset;
import io.fsdp4j.data.Datasets;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.data.Split;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.assertj.core.data.Offset;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Packing ({@code data.pack=true}) through the real path (a JSONL file, {@link Datasets}, {@link TrainingJob}):
 * documents packed two to a window train exactly as the same documents one to a sequence, and no token of a
 * packed window sees another document.
 */
class PackedTrainingTest {
    private static final String MODEL = "qwen2";
    private static final int SEQ = 16;

    @TempDir
    Path tmp;

    /** Four documents whose lengths pair up to exactly one window each (7 + 9, 10 + 6), with masked prompts. */
    private Path documents() throws IOException {
        int[][] docs = {{5, 17, 33, 2, 90, 11, 4}, {8, 150, 61, 7, 7, 42, 3, 19, 100},
                {12, 13, 14, 15, 16, 17, 18, 19, 20, 21}, {99, 98, 97, 96, 95, 94}};
        int[] promptLengths = {2, 0, 4, 1};
        List<String> lines = new ArrayList<>();
        for (int d = 0; d < docs.length; d++) {
            int[] labels = docs[d].clone();
            Arrays.fill(labels, 0, promptLengths[d], TokenBatch.IGNORE);
            lines.add("{\"input_ids\":" + Arrays.toString(docs[d]) + ",\"labels\":" + Arrays.toString(labels) + "}");
        }
        return Files.write(tmp.resolve("docs.jsonl"), lines);
    }

    private static TrainingJob.Result train(List<Sequence> data, int batchSize) {
        TrainConfig config = TrainConfig.load(null, List.of("dist.ranks=2", "dist.device=cpu", "train.steps=4",
                "train.batch_size=" + batchSize, "data.seq_len=" + SEQ, "optim.lr=0.01", "schedule.warmup_steps=1"));
        ModelConfig mc = Golden.config(MODEL);
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir(MODEL), LlamaModel.layout(mc))) {
            return new TrainingJob(config, mc, weights, data, true).run(null, true);
        }
    }

    @Test
    void packedDocumentsTrainAsSeparateSequences() throws IOException {
        ModelConfig mc = Golden.config(MODEL);
        Dataset separate = Datasets.load(documents(), mc.vocabSize(), SEQ, false, Split.TRAIN);
        Dataset packed = Datasets.load(documents(), mc.vocabSize(), SEQ, true, Split.TRAIN);
        assertThat(separate.sequences()).hasSize(4);
        assertThat(packed.sequences()).hasSize(2);
        assertThat(packed.sequences().getFirst().documentStarts()).startsWith(0, 0, 0, 0, 0, 0, 0, 7, 7);

        // every step's global batch is the whole data set (2 ranks x 2 sequences, or 2 ranks x 1 packed window)
        TrainingJob.Result one = train(separate.sequences(), 2);
        TrainingJob.Result two = train(packed.sequences(), 1);
        for (int s = 0; s < 4; s++) {
            StepResult a = one.steps().get(s), b = two.steps().get(s);
            assertThat(b.lossTokens()).isEqualTo(a.lossTokens()).isEqualTo(5 + 8 + 6 + 5);
            assertThat(b.loss()).as("loss at step %d", s + 1).isCloseTo(a.loss(), Percentage.withPercentage(1e-4));
            assertThat(b.gradNorm()).as("grad norm at step %d", s + 1)
                    .isCloseTo(a.gradNorm(), Percentage.withPercentage(1e-3));
        }
        assertThat(two.steps().getFirst().tokens()).isEqualTo(one.steps().getFirst().tokens() / 2); // no padding
        for (int u = 0; u < one.finalParams().size(); u++) {
            assertThat(Golden.relativeError(two.finalParams().get(u), one.finalParams().get(u)))
                    .as("unit %d after 4 steps", u).isLessThan(1e-5);
        }
    }

    @Test
    void noTokenOfAPackedWindowSeesAnotherDocument() throws IOException {
        ModelConfig mc = Golden.config(MODEL);
        Sequence window = Datasets.load(documents(), mc.vocabSize(), SEQ, true, Split.TRAIN).sequences().getFirst();
        SingleDeviceModel model = Golden.load(MODEL);
        float[] original = rowLosses(model, window);
        // another first document: every position of the second document (7..15) keeps its loss bit for bit
        int[] ids = window.ids().clone();
        for (int p = 0; p < 7; p++) {
            ids[p] = (ids[p] * 7 + 3) % mc.vocabSize();
        }
        float[] changed = rowLosses(model, new Sequence(ids, ids.clone(), window.documentStarts()));
        assertThat(Arrays.copyOfRange(changed, 7, SEQ)).isEqualTo(Arrays.copyOfRange(original, 7, SEQ));
        assertThat(Arrays.copyOfRange(changed, 0, 6)).isNotEqualTo(Arrays.copyOfRange(original, 0, 6));
        // and the second document's losses are those it has alone
        int[] second = Arrays.copyOfRange(window.ids(), 7, SEQ);
        float[] alone = rowLosses(model, new Sequence(second, Arrays.copyOfRange(window.labels(), 7, SEQ)));
        for (int p = 0; p < second.length; p++) {
            assertThat(original[7 + p]).as("position %d of the second document", p)
                    .isCloseTo(alone[p], Offset.offset(2e-5f));
        }
    }

    private static float[] rowLosses(SingleDeviceModel model, Sequence s) {
        CpuBackend cpu = CpuBackend.INSTANCE;
        int[][] starts = s.documentStarts() == null ? null : new int[][] {s.documentStarts()};
        TokenBatch batch = TokenBatch.of(cpu, new int[][] {s.ids()}, new int[][] {s.labels()}, starts);
        Tensor losses = cpu.allocate(DType.F32, batch.rows());
        model.loss(batch, losses);
        return cpu.toFloats(losses);
    }
}
