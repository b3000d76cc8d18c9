package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.safetensors.NamedTensor;
import io.fsdp4j.safetensors.SafetensorsFile;
import io.fsdp4j.safetensors.SafetensorsWriter;
import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A NaN that reaches one rank only: the golden Llama model with NaN in the embedding row of one token, and data in
 * which one sequence of eight holds that token. The step whose batch holds it has a NaN loss on one rank and finite
 * ones elsewhere; the check across ranks skips its update on every rank (the checkpoint after it is finite: a rank
 * that had updated its shard with the NaN gradient would have saved NaN), the other steps train, and the run ends
 * with status 0. {@code GpuNanOnOneRankTest} runs the same on ranks sharing a GPU.
 */
public class NanOnOneRankTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The token whose embedding is NaN. */
    private static final int POISON = 7;
    private static final int SEQUENCES = 8, SEQ_LEN = 16, RANKS = 2;

    @TempDir
    Path tmp;

    @Test
    void aNanOnOneRankSkipsTheStepOnEveryRank() throws IOException {
        check(tmp, "dist.device=cpu");
    }

    /**
     * The same in fp16 with dynamic loss scaling (an inf or NaN on one rank, found across all ranks): the step is
     * skipped on every rank as above, and the scale, the same on every rank, is halved for the step after it only.
     */
    @Test
    void aNanOnOneRankInFp16SkipsTheStepEverywhereAndHalvesTheScale() throws IOException {
        check(tmp, "dist.device=cpu", "fsdp.param_dtype=fp16", "fsdp.reduce_dtype=fp16", "log.every=1");
        assertScaleHalvedAfterTheSkip(tmp.resolve("metrics.jsonl"));
    }

    /** Every step's loss_scale is 65536 up to the skipped one and 32768 after it. */
    public static void assertScaleHalvedAfterTheSkip(Path metrics) throws IOException {
        List<JsonNode> steps = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) {
            JsonNode l = JSON.readTree(line);
            if (l.has("loss_scale")) {
                steps.add(l);
            }
        }
        assertThat(steps).hasSize(SEQUENCES / RANKS);
        int skipped = steps.stream().filter(l -> l.path("skipped").booleanValue()).findFirst().orElseThrow()
                .get("step").intValue();
        for (JsonNode l : steps) {
            assertThat(l.get("loss_scale").doubleValue()).as("loss scale of step %s", l.get("step"))
                    .isEqualTo(l.get("step").intValue() <= skipped ? 65536.0 : 32768.0);
        }
    }

    /** The check, with the device settings of {@code device} (CPU ranks, or ranks sharing a GPU). */
    public static void check(Path tmp, String... device) throws IOException {
        Path model = poisonedLlama(tmp.resolve("model")), data = data(tmp.resolve("data.jsonl"));
        Path ck = tmp.resolve("ck"), metrics = tmp.resolve("metrics.jsonl");
        List<String> args = new ArrayList<>(List.of("train"));
        for (String set : concat(device, "model.path=" + model, "data.train=" + data, "data.seq_len=" + SEQ_LEN,
                "train.batch_size=1", "dist.ranks=" + RANKS, "train.steps=" + SEQUENCES / RANKS, "optim.lr=0.01",
                "checkpoint.dir=" + ck, "checkpoint.every=1", "checkpoint.keep=10", "log.metrics=" + metrics,
                "run.dir=" + tmp.resolve("run"))) {
            args.add("--set");
            args.add(set);
        }
        CommandsEndToEndTest.Run run = CommandsEndToEndTest.run(args.toArray(String[]::new));
        assertThat(run.status()).as(run.out() + run.err()).isZero();

        List<JsonNode> lines = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) {
            lines.add(JSON.readTree(line));
        }
        List<JsonNode> skipped = lines.stream().filter(l -> l.path("skipped").booleanValue()).toList();
        assertThat(skipped).as("the one step whose batch holds the poisoned sequence").hasSize(1);
        int step = skipped.getFirst().get("step").intValue();
        assertThat(run.out()).contains("fsdp4j: step " + step + " skipped: loss NaN")
                .contains("(not finite: no rank updated its shards)");
        assertThat(lines).filteredOn(l -> l.has("loss") && !l.path("skipped").booleanValue())
                .hasSize(SEQUENCES / RANKS - 1)
                .allSatisfy(l -> assertThat(Double.isFinite(l.get("loss").asDouble())).isTrue());
        assertThat(lines.getLast().get("skipped_steps").intValue()).isEqualTo(1);
        // every rank kept its shard as it was: in every checkpoint, from the skipped step's on, the poisoned row is
        // all that is not finite (a rank that had applied the NaN gradient would have saved a whole shard of NaN,
        // in its moments too), and one AdamW update fewer than steps was made
        int hidden = Golden.config("llama").hidden();
        for (Path saved : Checkpoints.list(ck)) {
            assertThat(nonFinite(saved)).as("%s", saved).isEqualTo(hidden);
        }
        Path last = Checkpoints.stepDir(ck, SEQUENCES / RANKS);
        try (var checkpoint = io.fsdp4j.checkpoint.SavedCheckpoint.open(last)) {
            assertThat(checkpoint.index().optimizerStepsTaken()).isEqualTo(SEQUENCES / RANKS - 1);
        }
    }

    /** The values of a checkpoint's shard files (parameters and moments) that are not finite. */
    private static long nonFinite(Path checkpoint) throws IOException {
        long count = 0;
        try (var files = Files.list(checkpoint)) {
            for (Path f : files.filter(p -> p.getFileName().toString().endsWith(".safetensors")).toList()) {
                try (SafetensorsFile file = SafetensorsFile.open(f)) {
                    for (String name : file.names()) {
                        if (file.info(name).dtype().equals("F32")) {
                            for (float v : file.readFloats(name)) {
                                count += Float.isFinite(v) ? 0 : 1;
                            }
                        }
                    }
                }
            }
        }
        return count;
    }

    /** The golden Llama model (untied embeddings) with NaN in the embedding row of {@link #POISON}. */
    private static Path poisonedLlama(Path dir) throws IOException {
        Files.createDirectories(dir);
        Path golden = Golden.dir("llama");
        Files.copy(golden.resolve("config.json"), dir.resolve("config.json"));
        List<NamedTensor> tensors = new ArrayList<>();
        try (SafetensorsFile file = SafetensorsFile.open(golden.resolve("model.safetensors"))) {
            for (String name : file.names()) {
                var info = file.info(name);
                float[] values = file.readFloats(name);
                if (name.equals("model.embed_tokens.weight")) {
                    int hidden = (int) info.shape()[1];
                    java.util.Arrays.fill(values, POISON * hidden, (POISON + 1) * hidden, Float.NaN);
                }
                assertThat(info.dtype()).as(name).isEqualTo("F32");
                tensors.add(NamedTensor.of(name, DType.F32, info.shape(), values));
            }
        }
        SafetensorsWriter.write(dir.resolve("model.safetensors"), tensors);
        return dir;
    }

    /** Eight sequences of random tokens other than {@link #POISON}; the sixth holds it once. */
    private static Path data(Path file) throws IOException {
        SplittableRandom random = new SplittableRandom(3);
        StringBuilder lines = new StringBuilder();
        for (int s = 0; s < SEQUENCES; s++) {
            List<Integer> ids = new ArrayList<>();
            for (int t = 0; t < SEQ_LEN; t++) {
                ids.add(s == 5 && t == 3 ? POISON : random.nextInt(POISON + 1, 150));
            }
            lines.append("{\"input_ids\": ").append(ids).append("}\n");
        }
        return Files.writeString(file, lines);
    }

    private static String[] concat(String[] a, String... b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }
}
