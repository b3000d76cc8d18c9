package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.cli.Main;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@code fsdp.cpu_offload} on CPU ranks runs the offload engine path (master and gradient shards and AdamW moments
 * in host memory, copied to and from the backend around each gather and reduction, the AdamW step on the host) and
 * gives exactly the same training as without offload: equal losses, gradient norms and final weights, bit for bit,
 * for full_shard, shard_grad_op and hybrid_shard, fp32 and bf16 gathers and reductions, one and two
 * micro-batches, on 1 to 4 ranks; checkpoints saved with
 * offload resume exactly, with or without it; and the per-rank byte report puts the state in host memory.
 */
class OffloadTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    static Stream<Arguments> layouts() {
        return Stream.of(
                Arguments.of("qwen2", "full_shard", 1, 0, "fp32", 1, 1),
                Arguments.of("qwen2", "full_shard", 3, 0, "fp32", 2, 1),
                Arguments.of("qwen2", "full_shard", 3, 0, "fp32", 2, 0), // each shard staged one unit ahead of its gather
                Arguments.of("qwen2", "full_shard", 3, 0, "bf16", 2, 3),
                Arguments.of("llama", "shard_grad_op", 2, 0, "fp32", 1, 1),
                Arguments.of("llama", "full_shard", 2, 0, "bf16", 1, 1),
                Arguments.of("llama", "shard_grad_op", 2, 0, "bf16, reduce bf16", 2, 1),
                Arguments.of("mistral", "hybrid_shard", 4, 2, "fp32", 1, 1),
                Arguments.of("bloom", "full_shard", 2, 0, "fp32", 1, 1));
    }

    @ParameterizedTest(name = "{0} {1} on {2} ranks, {4} gathers, {5} micro-batches, prefetch {6}")
    @MethodSource("layouts")
    void offloadTrainsExactlyAsWithout(String model, String strategy, int ranks, int shardSize, String dtype,
                                       int microBatches, int prefetch) {
        List<String> sets = new ArrayList<>(GoldenTrainingTest.layout(strategy, ranks, shardSize, microBatches));
        sets.add("fsdp.prefetch=" + prefetch);
        sets.add("fsdp.param_dtype=" + dtype.substring(0, 4));
        if (dtype.endsWith("reduce bf16")) {
            sets.add("fsdp.reduce_dtype=bf16");
        }
        TrainingJob.Result plain = GoldenTrainingTest.train(model, sets);
        sets.add("fsdp.cpu_offload=true");
        TrainingJob.Result offloaded = GoldenTrainingTest.train(model, sets);
        assertThat(offloaded.steps()).hasSize(plain.steps().size());
        for (int s = 0; s < plain.steps().size(); s++) {
            assertThat(offloaded.steps().get(s).loss()).as("loss at step %d", s + 1).isEqualTo(plain.steps().get(s).loss());
            assertThat(offloaded.steps().get(s).gradNorm()).as("grad norm at step %d", s + 1)
                    .isEqualTo(plain.steps().get(s).gradNorm());
        }
        for (int u = 0; u < plain.finalParams().size(); u++) {
            assertThat(offloaded.finalParams().get(u)).as("final weights of unit %d", u)
                    .containsExactly(plain.finalParams().get(u));
        }
        for (RankMemory m : offloaded.memory()) {
            assertThat(m.offloaded()).isTrue();
            assertThat(m.deviceBytes()).isZero();
            assertThat(m.hostBytes()).isEqualTo(m.total()).isPositive();
        }
        assertThat(plain.memory().getFirst().hostBytes()).isZero();
    }

    private static List<JsonNode> run(String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int status;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            status = Main.execute(args, o, e, false);
        }
        assertThat(status).as(err.toString(StandardCharsets.UTF_8)).isZero();
        return out.toString(StandardCharsets.UTF_8).lines().filter(l -> l.startsWith("{")).map(l -> {
            try {
                return JSON.readTree(l);
            } catch (IOException ex) {
                throw new AssertionError(l, ex);
            }
        }).toList();
    }

    private Path data() throws IOException {
        JsonNode batch = Golden.json("qwen2", "train.json");
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 24; i++) {
            lines.add("{\"input_ids\":" + batch.get("input_ids").get(i) + ",\"labels\":" + batch.get("labels").get(i) + "}");
        }
        return Files.write(tmp.resolve("train.jsonl"), lines);
    }

    @Test
    void checkpointsSavedWithOffloadResumeExactlyWithOrWithoutIt() throws IOException {
        Path data = data();
        String[] common = {"train", "--set", "model.path=" + Golden.dir("qwen2"), "--set", "data.train=" + data,
                "--set", "data.seq_len=16", "--set", "train.batch_size=2", "--set", "dist.ranks=2",
                "--set", "fsdp.param_dtype=bf16",
                // a schedule that a run cut short shares (a fine-tune's warmup_ratio depends on train.steps)
                "--set", "optim.lr=3e-3", "--set", "schedule.warmup_steps=10"};
        double straight = run(concat(common, "--set", "train.steps=5")).getLast().get("final_loss").doubleValue();
        for (boolean offloadOnResume : new boolean[] {true, false}) {
            Path ck = tmp.resolve("ck-" + offloadOnResume);
            List<JsonNode> first = run(concat(common, "--set", "train.steps=3", "--set", "fsdp.cpu_offload=true",
                    "--set", "checkpoint.dir=" + ck, "--set", "checkpoint.every=2"));
            JsonNode bytes = first.getLast().get("rank_bytes").get(1);
            assertThat(bytes.get("device").longValue()).isZero();
            assertThat(bytes.get("host").longValue()).isEqualTo(bytes.get("params").longValue()
                    + bytes.get("grads").longValue() + bytes.get("optimizer").longValue());
            // from the older of the two checkpoints, saving elsewhere (the same directory holds a newer one)
            List<JsonNode> resumed = run(concat(common, "--set", "train.steps=5",
                    "--set", "checkpoint.dir=" + tmp.resolve("resumed-" + offloadOnResume),
                    "--set", "checkpoint.resume=" + ck.resolve("step-00000002"),
                    "--set", "fsdp.cpu_offload=" + offloadOnResume));
            assertThat(resumed.getLast().get("final_loss").doubleValue()).as("offload on resume: %s", offloadOnResume)
                    .isEqualTo(straight);
        }
    }

    @Test
    void benchReportsWhereTheStateLives() {
        JsonNode line = run("bench", "--warmup", "1", "--steps", "1", "--set", "data.seq_len=32", "--set", "dist.ranks=2",
                "--set", "fsdp.cpu_offload=true").getLast();
        assertThat(line.get("cpu_offload").booleanValue()).isTrue();
        assertThat(line.get("state_device_gib").doubleValue()).isZero();
        assertThat(line.get("state_host_gib").doubleValue()).isPositive();
        assertThat(line.get("tok_s").doubleValue()).isPositive();
    }

    private static String[] concat(String[] a, String... b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }
}
