package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.checkpoint.Checkpoints;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code fsdp4j train} on bad input, as a user meets it: one {@code error:} line naming the file (and line), status 2,
 * and the checkpoints already saved untouched.
 */
class TrainBadInputTest {
    @TempDir
    Path tmp;

    private CommandsEndToEndTest.Run train(String model, Path data, String... more) {
        List<String> args = new java.util.ArrayList<>(List.of("train", "--set", "model.path=" + Golden.dir(model),
                "--set", "data.train=" + data, "--set", "data.seq_len=8", "--set", "train.batch_size=1",
                "--set", "dist.ranks=2", "--set", "dist.device=cpu", "--set", "train.steps=2"));
        for (String m : more) {
            args.add("--set");
            args.add(m);
        }
        return CommandsEndToEndTest.run(args.toArray(String[]::new));
    }

    private Path jsonl(String name, String... lines) throws IOException {
        return Files.write(tmp.resolve(name), List.of(lines));
    }

    @Test
    void aMalformedJsonLineIsNamedWithItsFileAndLine() throws IOException {
        Path data = jsonl("bad.jsonl", "{\"input_ids\":[1,2,3,4]}", "{\"input_ids\":[1,2,3,4]}", "{\"input_ids\":[5,6,",
                "{\"input_ids\":[1,2]}");
        train("qwen2", data).failsWith(data + " line 3: not valid JSON");
        Path labels = jsonl("labels.jsonl", "{\"input_ids\":[1,2,3,4]}", "{\"input_ids\":[1,2], \"labels\":[1]}");
        train("qwen2", labels).failsWith(labels + " line 2", "\"labels\" has 1 entries");
    }

    @Test
    void sharingOneGpuAcrossProcessesIsRefused() throws IOException {
        Path data = jsonl("ok.jsonl", "{\"input_ids\":[1,2,3,4,5]}", "{\"input_ids\":[6,7,8,9]}");
        train("qwen2", data, "dist.nnodes=2", "dist.rdzv=127.0.0.1:29999", "dist.share_gpu=true")
                .failsWith("dist.share_gpu puts the ranks of one process on one GPU", "spans 2 processes");
    }

    @Test
    void aDatasetWithNoUsableExampleIsRefused() throws IOException {
        Path empty = jsonl("empty.jsonl", "", "  ");
        train("qwen2", empty).failsWith(empty.toString(), "holds no sequences");
        Path noLoss = jsonl("noloss.jsonl", "{\"input_ids\":[1,2,3],\"labels\":[-100,-100,-100]}",
                "{\"input_ids\":[4,5,6],\"labels\":[4,-100,-100]}");
        train("qwen2", noLoss).failsWith(noLoss.toString(), "no document carries a loss");
    }

    /**
     * A run that would save into a checkpoint directory holding another run's checkpoints is refused before it
     * starts (its pruning would delete them, and a later resume=auto would pick the wrong run's); resuming from that
     * directory (auto, or the directory named as the checkpoint) continues the newest; an older one there is refused
     * (the run would overwrite the newer); an unreadable newest checkpoint under resume=auto names the one before it.
     */
    @Test
    void aCheckpointDirectoryIsContinuedNeverTakenOverByAFreshRun() throws IOException {
        Path data = jsonl("ok.jsonl", "{\"input_ids\":[1,2,3,4,5]}", "{\"input_ids\":[6,7,8,9]}",
                "{\"input_ids\":[10,11,12]}", "{\"input_ids\":[13,14,15,16,17,18]}");
        Path ck = tmp.resolve("ck");
        CommandsEndToEndTest.Run first = train("qwen2", data, "checkpoint.dir=" + ck, "checkpoint.every=1");
        assertThat(first.status()).as(first.err()).isZero();
        Path step1 = Checkpoints.stepDir(ck, 1), step2 = Checkpoints.stepDir(ck, 2);

        train("qwen2", data, "checkpoint.dir=" + ck, "checkpoint.every=1", "optim.lr=1e-2")
                .failsWith(ck.toString(), "already holds checkpoints", "step-00000002", "checkpoint.resume=auto");
        assertThat(Checkpoints.list(ck)).containsExactly(step1, step2); // nothing pruned, nothing added

        CommandsEndToEndTest.Run resumed = train("qwen2", data, "checkpoint.dir=" + ck, "checkpoint.every=1",
                "checkpoint.resume=" + ck, "train.steps=3");
        assertThat(resumed.status()).as(resumed.err()).isZero();
        assertThat(resumed.out()).contains("resuming from " + step2);
        Path step3 = Checkpoints.stepDir(ck, 3);
        assertThat(Checkpoints.list(ck)).containsExactly(step2, step3);

        train("qwen2", data, "checkpoint.dir=" + ck, "checkpoint.resume=" + step2, "train.steps=4")
                .failsWith("older than step-00000003");
        CommandsEndToEndTest.Run upper = train("qwen2", data, "checkpoint.dir=" + tmp.resolve("other"),
                "checkpoint.resume=AUTO", "train.steps=3"); // AUTO is auto: an empty directory starts afresh
        assertThat(upper.status()).as(upper.err()).isZero();
        assertThat(Checkpoints.list(tmp.resolve("other"))).isNotEmpty();

        Files.writeString(step3.resolve("index.json"), "{\"format\": ");
        train("qwen2", data, "checkpoint.dir=" + ck, "checkpoint.resume=auto", "train.steps=4")
                .failsWith("is not valid", "incomplete or corrupt", "the checkpoint before it is " + step2,
                        "checkpoint.resume=" + step2);
        assertThat(Checkpoints.list(ck)).containsExactly(step2, step3);
    }

    /**
     * With held-out data every metrics line is a step line with the promised keys; the evaluated steps (every
     * log.eval_every and the last) carry the eval_ keys on that same line, whether or not log.every falls on them.
     */
    @Test
    void evaluatedStepsCarryTheirEvaluationOnTheirStepLine() throws IOException {
        Path data = jsonl("ok.jsonl", "{\"input_ids\":[1,2,3,4,5]}", "{\"input_ids\":[6,7,8,9]}",
                "{\"input_ids\":[10,11,12]}", "{\"input_ids\":[13,14,15,16,17,18]}");
        Path heldOut = jsonl("eval.jsonl", "{\"input_ids\":[2,3,4,5,6]}", "{\"input_ids\":[7,8,9,10]}");
        Path metricsFile = tmp.resolve("m.jsonl");
        CommandsEndToEndTest.Run r = train("qwen2", data, "data.eval=" + heldOut, "train.steps=5", "log.every=2",
                "log.eval_every=3", "log.metrics=" + metricsFile);
        assertThat(r.status()).as(r.err()).isZero();
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        List<com.fasterxml.jackson.databind.JsonNode> lines = new java.util.ArrayList<>();
        for (String l : Files.readAllLines(metricsFile)) {
            lines.add(json.readTree(l));
        }
        assertThat(lines).extracting(l -> l.get("step").intValue()).containsExactly(0, 2, 3, 4, 5);
        // step 0: the held-out loss before training, on a line of its own
        assertThat(lines.getFirst().has("eval_loss")).isTrue();
        assertThat(lines.getFirst().has("loss")).isFalse();
        lines = lines.subList(1, lines.size());
        for (var l : lines) {
            for (String key : List.of("loss", "grad_norm", "lr", "tokens", "tok_s", "tok_s_rank", "peak_heap_gib")) {
                assertThat(l.has(key)).as("step %s has %s", l.get("step"), key).isTrue();
            }
            int step = l.get("step").intValue();
            assertThat(l.has("eval_loss")).as("step %d evaluated", step).isEqualTo(step == 3 || step == 5);
        }
        assertThat(r.out()).contains("eval before training", "eval at step 3", "eval at step 5");
    }

    @Test
    void aCheckpointOfAnotherModelOrATruncatedOneIsRefusedAndKept() throws IOException {
        Path data = jsonl("ok.jsonl", "{\"input_ids\":[1,2,3,4,5]}", "{\"input_ids\":[6,7,8,9]}",
                "{\"input_ids\":[10,11,12]}", "{\"input_ids\":[13,14,15,16,17,18]}");
        Path ck = tmp.resolve("ck");
        CommandsEndToEndTest.Run first = train("qwen2", data, "checkpoint.dir=" + ck);
        assertThat(first.status()).as(first.err()).isZero();
        Path saved = Checkpoints.stepDir(ck, 2);

        train("llama", data, "checkpoint.resume=" + saved).failsWith(saved.toString(), "different model");

        Path shard = saved.resolve("shard-00001.safetensors");
        long size = Files.size(shard);
        try (var f = new RandomAccessFile(shard.toFile(), "rw")) {
            f.setLength(size - 64);
        }
        train("qwen2", data, "checkpoint.dir=" + ck, "checkpoint.resume=auto", "train.steps=4")
                .failsWith("shard-00001.safetensors");
        assertThat(Files.size(shard)).isEqualTo(size - 64); // nothing saved over it, nothing deleted
        assertThat(Checkpoints.latest(ck)).isEqualTo(saved);
        CommandsEndToEndTest.run("export", "--checkpoint", ck.toString(), "--out", tmp.resolve("x").toString())
                .failsWith("shard-00001.safetensors");
    }
}
