package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.cli.Main;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code fsdp4j plan} run in-process through {@link Main#execute}. */
class PlanCommandTest {
    record Run(int status, String out, String err) {}

    static Run run(String... args) {
        var out = new ByteArrayOutputStream();
        var err = new ByteArrayOutputStream();
        int status;
        try (var o = new PrintStream(out, true, StandardCharsets.UTF_8);
             var e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            status = Main.execute(args, o, e, false);
        }
        return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    @Test
    void printsMemoryStepTimeRecommendationAndScaling() {
        Run r = run("plan", "--model", "qwen2.5-7b", "--nodes", "2", "--gpus-per-node", "8", "--gpu-counts", "1,8,16,64");
        assertThat(r.status()).as(r.err()).isZero();
        assertThat(r.err()).isEmpty();
        assertThat(r.out()).contains("fsdp4j plan: qwen2.5-7b, 7,615,616,512 parameters (28 blocks), on 2 nodes x 8 H200",
                "memory per GPU", "reserved", "step, ms", "exposed", "tokens/s", "recommended: ",
                "predicted tokens/s by GPU count");
        for (String strategy : new String[] {"full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "hybrid_shard_zero2"}) {
            assertThat(r.out()).contains(strategy + " ");
        }
        assertThat(r.out().lines().filter(l -> l.startsWith("recommended: "))).singleElement().asString()
                .contains("the fastest that fits");
        assertThat(r.out().lines().filter(l -> l.matches("\\s+\\d+( +[-\\d,]+){5}"))).hasSize(4);
    }

    /**
     * Chat conversations packed into long sequences attend within each conversation: {@code --document-tokens N}
     * times attention over documents of N tokens, on fsdp4j's kernels (cuDNN takes no packed documents), so the step
     * is shorter, and its memory the same.
     */
    @Test
    void packedDocumentsShortenAttention() throws Exception {
        String[] base = {"plan", "--model", "qwen2.5-7b", "--gpus-per-node", "1", "--gpu-counts", "1", "--seq", "16384",
                "--checkpointing", "full", "--json"};
        Run whole = run(base);
        List<String> packedArgs = new ArrayList<>(List.of(base));
        packedArgs.addAll(List.of("--document-tokens", "4096"));
        Run packed = run(packedArgs.toArray(String[]::new));
        assertThat(whole.status()).as(whole.err()).isZero();
        assertThat(packed.status()).as(packed.err()).isZero();
        JsonNode w = new ObjectMapper().readTree(whole.out()), p = new ObjectMapper().readTree(packed.out());
        assertThat(w.get("document_tokens").asInt()).isZero();
        assertThat(p.get("document_tokens").asInt()).isEqualTo(4096);
        assertThat(p.get("assumptions").get("attention_engines").asText()).startsWith("fsdp4j's kernels");
        assertThat(w.get("assumptions").get("attention_engines").asText()).startsWith("attention.kernel auto's");
        JsonNode wRow = w.get("predictions").get(0), pRow = p.get("predictions").get(0);
        assertThat(pRow.get("strategy").asText()).isEqualTo("full_shard");
        assertThat(pRow.get("memory_gib").get("reserved").asDouble())
                .isEqualTo(wRow.get("memory_gib").get("reserved").asDouble());
        // a quarter of the pairs attended (at somewhat lower rates: documents of 4096): the step 10-25% shorter
        assertThat(pRow.get("step_ms").get("step").asDouble() / wRow.get("step_ms").get("step").asDouble())
                .isBetween(0.75, 0.9);
        Run text = run("plan", "--model", "qwen2.5-7b", "--gpus-per-node", "1", "--gpu-counts", "1", "--seq", "16384",
                "--checkpointing", "full", "--document-tokens", "4096");
        assertThat(text.out()).contains("per GPU and step: 1 x 16384 tokens (documents of 4096 tokens packed in each)",
                "fsdp4j's kernels (cuDNN takes no packed documents), as measured on one H200, at 28 heads of size 128, "
                        + "4.0 documents of 4096 tokens");
        assertThat(run("plan", "--model", "qwen2.5-7b", "--document-tokens", "-1").err())
                .contains("--document-tokens must be at least 0");
        // a train config that packs documents, without their length: one line says how to give it
        assertThat(run("plan", "--set", "model.preset=qwen2.5-7b", "--set", "data.pack=true", "--gpu-counts", "1").out())
                .contains("note: data.pack packs documents into each sequence; give --document-tokens N");
        assertThat(run("plan", "--set", "model.preset=qwen2.5-7b", "--set", "data.pack=true", "--gpu-counts", "1",
                "--document-tokens", "1024").out()).doesNotContain("note: data.pack");
    }

    /** The offload run of docs/benchmarks.md: 85.70 GiB of state in host memory, 657 tokens/s on one H100. */
    @Test
    void cpuOffloadShowsTheStateInHostMemory() {
        Run r = run("plan", "--model", "qwen2.5-7b-20l", "--gpu", "h100", "--gpus-per-node", "1", "--cpu-offload",
                "--checkpointing", "full", "--gpu-counts", "1");
        assertThat(r.status()).as(r.err()).isZero();
        assertThat(r.out()).contains("cpu offload:").contains("full_shard         full                state_host 85.70")
                .containsPattern("full_shard +full .* 657 ");
    }

    @Test
    void jsonHasEveryStrategyAndCheckpointingMode() throws Exception {
        Run r = run("plan", "--model", "qwen2.5-1.5b", "--gpus-per-node", "4", "--json", "--gpu-counts", "1,4");
        assertThat(r.status()).as(r.err()).isZero();
        JsonNode json = new ObjectMapper().readTree(r.out());
        assertThat(json.get("parameters").asLong()).isEqualTo(1_543_714_304L);
        assertThat(json.get("world").asInt()).isEqualTo(4);
        assertThat(json.get("predictions")).hasSize(20); // 5 strategies x 4 checkpointing modes
        JsonNode first = json.get("predictions").get(0);
        assertThat(first.get("strategy").asText()).isEqualTo("full_shard");
        assertThat(first.get("memory_gib").get("reserved").asDouble()).isBetween(8.5, 10.5); // measured 9.49
        // measured 62,782 by the engine before 2026-11-23, which did more work: a floor
        assertThat(first.get("tok_s").asDouble()).isGreaterThan(62_782.0);
        assertThat(json.get("recommended").get("reason").asText()).contains("the fastest that fits");
        assertThat(json.get("scaling")).hasSize(2);
    }

    /** --prefetch: said in the header and the JSON; deeper prefetch holds more memory, none exposes every gather. */
    @Test
    void thePrefetchDepthIsPlanned() throws Exception {
        String[] common = {"plan", "--model", "qwen2.5-7b", "--nodes", "2", "--gpus-per-node", "8", "--checkpointing",
                "full", "--gpu-counts", "16", "--json"};
        List<JsonNode> full = new ArrayList<>();
        for (String depth : new String[] {"0", "1", "2"}) {
            Run r = run(concat(common, "--prefetch", depth));
            assertThat(r.status()).as(r.err()).isZero();
            JsonNode json = new ObjectMapper().readTree(r.out());
            assertThat(json.get("assumptions").get("prefetch").asInt()).isEqualTo(Integer.parseInt(depth));
            assertThat(json.get("assumptions").get("attention_engines").asText())
                    .isEqualTo(AttentionRates.engines().engineNames());
            full.add(json.get("predictions").get(0));
        }
        assertThat(full.get(0).get("memory_gib").get("reserved").asDouble())
                .isLessThan(full.get(1).get("memory_gib").get("reserved").asDouble());
        assertThat(full.get(1).get("memory_gib").get("reserved").asDouble())
                .isLessThan(full.get(2).get("memory_gib").get("reserved").asDouble());
        assertThat(full.get(0).get("tok_s").asDouble()).isLessThan(full.get(1).get("tok_s").asDouble());
        Run text = run("plan", "--model", "tiny", "--gpu-counts", "2", "--prefetch", "2");
        assertThat(text.out()).contains("; all-gathers started 2 units ahead (fsdp.prefetch)");
    }

    /**
     * --param-copy: said in the header and the JSON's assumptions; on one H200 kept holds 12.3 GiB more of Qwen2.5-7B
     * (measured 12.34) and is faster; with fp32 parameters nothing is kept.
     */
    @Test
    void theParamCopyIsPlanned() throws Exception {
        String[] common = {"plan", "--model", "qwen2.5-7b", "--gpus-per-node", "1", "--checkpointing", "full",
                "--gpu-counts", "1", "--json"};
        List<JsonNode> full = new ArrayList<>();
        for (String copy : new String[] {"per_gather", "kept"}) {
            Run r = run(concat(common, "--param-copy", copy));
            assertThat(r.status()).as(r.err()).isZero();
            JsonNode json = new ObjectMapper().readTree(r.out());
            assertThat(json.get("assumptions").get("param_copy").asText()).isEqualTo(copy);
            assertThat(json.get("assumptions").get("kept_copy").asBoolean()).isEqualTo(copy.equals("kept"));
            full.add(json.get("predictions").get(0));
        }
        assertThat(full.get(1).get("memory_gib").get("reserved").asDouble()
                - full.get(0).get("memory_gib").get("reserved").asDouble()).isBetween(12.2, 12.5);
        assertThat(full.get(1).get("tok_s").asDouble()).isGreaterThan(full.get(0).get("tok_s").asDouble());
        JsonNode byDefault = new ObjectMapper().readTree(run(common).out());
        assertThat(byDefault.get("assumptions").get("param_copy").asText()).isEqualTo("per_gather");
        assertThat(byDefault.get("predictions").get(0)).isEqualTo(full.get(0));

        Run kept = run("plan", "--model", "tiny", "--gpu-counts", "2", "--param-copy", "kept");
        assertThat(kept.out()).contains("; the gathers send a bf16 copy kept beside each master shard (fsdp.param_copy "
                + "kept: 2 bytes a trained parameter per shard, written by AdamW; no rounding at the gathers)");
        Run perGather = run("plan", "--model", "tiny", "--gpu-counts", "2");
        assertThat(perGather.out()).contains("; the fp32 master shard rounded to bf16 at each gather "
                + "(fsdp.param_copy per_gather)");
        Run fp32 = run("plan", "--model", "tiny", "--gpu-counts", "2", "--param-dtype", "fp32", "--param-copy", "kept",
                "--json");
        assertThat(new ObjectMapper().readTree(fp32.out()).get("assumptions").get("kept_copy").asBoolean()).isFalse();
        Run offload = run("plan", "--model", "tiny", "--gpu-counts", "2", "--cpu-offload", "--param-copy", "kept");
        assertThat(offload.out()).contains("; the fp32 master shard rounded to bf16 at each gather (fsdp.param_copy "
                + "kept: no kept copy of a master in host memory)");
        Run bad = run("plan", "--model", "tiny", "--param-copy", "always");
        assertThat(bad.status()).isEqualTo(2);
        assertThat(bad.err().strip()).isEqualTo("error: --param-copy must be one of per_gather, kept, got 'always'");
    }

    /**
     * The advice line on blocks left out of checkpointing and checkpointed selectively, in any of its three forms:
     * the last blocks left out, the last checkpointed selectively, or both; groups n and k are their counts (a word
     * for one), set the train keys it gives.
     */
    private static final java.util.regex.Pattern BLOCKS_ADVICE = java.util.regex.Pattern.compile(
            "(?:fsdp\\.blocks_not_checkpointed: the last (?<n>one|\\d+) of the 28 blocks could keep every activation"
            + "|fsdp\\.blocks_selective: the last (?<k>one|\\d+) of the 28 blocks could be checkpointed selectively"
            + "|fsdp\\.blocks_not_checkpointed and fsdp\\.blocks_selective: the last (?<n2>one|\\d+) of the 28 blocks"
            + " could keep every activation, and the (?<k2>one|\\d+) before them be checkpointed selectively,)"
            + " and still fit \\(13\\d\\.\\d GiB of 138\\.4 a GPU\\), about \\d+% faster \\([\\d,]+ against "
            + "[\\d,]+ tokens/s per GPU\\): (?<set>.+)");

    /** The one line of advice on blocks' checkpointing in {@code out}, matched; its counts as the JSON's. */
    private static java.util.regex.Matcher blocksAdvice(String out, JsonNode advice) {
        List<String> lines = out.lines().filter(l -> l.startsWith("fsdp.blocks_")).toList();
        assertThat(lines).hasSize(1);
        var m = BLOCKS_ADVICE.matcher(lines.getFirst());
        assertThat(m.matches()).as(lines.getFirst()).isTrue();
        int n = blockCount(m.group("n") != null ? m.group("n") : m.group("n2"));
        int k = blockCount(m.group("k") != null ? m.group("k") : m.group("k2"));
        assertThat(advice.get("blocks").asInt()).isEqualTo(n);
        assertThat(advice.get("selective").asInt()).isEqualTo(k);
        String keys = (n > 0 ? "fsdp.blocks_not_checkpointed=" + n : "") + (n > 0 && k > 0 ? " " : "")
                + (k > 0 ? "fsdp.blocks_selective=" + k : "");
        assertThat(advice.get("set").asText()).isEqualTo(keys);
        assertThat(m.group("set")).isEqualTo((n > 0 ? "--set fsdp.blocks_not_checkpointed=" + n : "")
                + (n > 0 && k > 0 ? " " : "") + (k > 0 ? "--set fsdp.blocks_selective=" + k : ""));
        return m;
    }

    private static int blockCount(String words) {
        return words == null ? 0 : words.equals("one") ? 1 : Integer.parseInt(words);
    }

    /**
     * Where the recommendation checkpoints blocks and memory is left, the text advises the fastest split of the last
     * blocks into those left out and those checkpointed selectively in one line and the JSON carries
     * advice.blocks_not_checkpointed (its counts and keys as the line's); given --blocks-not-checkpointed, neither.
     */
    @Test
    void blocksLeftOutOfCheckpointingAreAdvisedWhereTheyFit() throws Exception {
        String[] common = {"plan", "--model", "qwen2.5-7b", "--gpu", "h200", "--gpus-per-node", "1", "--gpu-counts",
            "1", "--seq", "16384"};
        Run text = run(common);
        assertThat(text.status()).as(text.err()).isZero();
        JsonNode json = new ObjectMapper().readTree(run(concat(common, "--json")).out());
        JsonNode advice = json.get("advice").get("blocks_not_checkpointed");
        blocksAdvice(text.out(), advice);
        assertThat(advice.get("blocks").asInt() + advice.get("selective").asInt()).isPositive();
        assertThat(advice.get("checkpointing").asText()).isEqualTo(json.get("recommended").get("checkpointing").asText());
        assertThat(advice.get("gain").asDouble()).isPositive();
        JsonNode given = new ObjectMapper().readTree(run(concat(common, "--json", "--blocks-not-checkpointed", "2")).out());
        assertThat(given.get("advice").has("blocks_not_checkpointed")).isFalse();
    }

    /**
     * fsdp.blocks_selective: with full checkpointing keeping attention, Qwen2.5-7B at 16384 tokens on one H200 is
     * advised some blocks checkpointed selectively (the memory that leaves N blocks out leaves about 1.5 N out
     * selectively, for less recompute); given --blocks-selective, the header says so, the JSON's assumptions carry it
     * and nothing is advised; a negative count is a one-line error.
     */
    @Test
    void blocksCheckpointedSelectivelyAreAdvisedAndPlanned() throws Exception {
        String[] common = {"plan", "--model=qwen2.5-7b", "--gpu=h200", "--seq=16384", "--gpus-per-node=1",
            "--gpu-counts=1", "--checkpointing=full_keep_attention"};
        Run text = run(common);
        assertThat(text.status()).as(text.err()).isZero();
        JsonNode json = new ObjectMapper().readTree(run(concat(common, "--json")).out());
        JsonNode advice = json.get("advice").get("blocks_not_checkpointed");
        assertThat(advice).as(text.out()).isNotNull();
        assertThat(advice.get("checkpointing").asText()).isEqualTo("full_keep_attention");
        assertThat(advice.get("selective").asInt()).isPositive();
        assertThat(advice.get("gain").asDouble()).isPositive();
        assertThat(blocksAdvice(text.out(), advice).group("set")).contains("--set fsdp.blocks_selective=");
        assertThat(json.get("assumptions").get("blocks_selective").asInt()).isZero();

        Run given = run(concat(common, "--blocks-selective=8"));
        assertThat(given.status()).as(given.err()).isZero();
        assertThat(given.out()).contains("; 8 blocks before those checkpointed selectively (fsdp.blocks_selective)")
                .doesNotContain("blocks not checkpointed (fsdp.blocks_not_checkpointed)");
        assertThat(given.out().lines().filter(l -> l.startsWith("fsdp.blocks_"))).isEmpty();
        JsonNode givenJson = new ObjectMapper().readTree(run(concat(common, "--blocks-selective=8", "--json")).out());
        assertThat(givenJson.get("assumptions").get("blocks_selective").asInt()).isEqualTo(8);
        assertThat(givenJson.get("advice").has("blocks_not_checkpointed")).isFalse();
        Run bad = run("plan", "--model", "qwen2.5-7b", "--blocks-selective", "-1");
        assertThat(bad.status()).isEqualTo(2);
        assertThat(bad.err().strip()).isEqualTo("error: --blocks-selective must be at least 0");
    }

    /**
     * Where the default per_gather is planned and kept fits the recommendation, the text says so in one line and the
     * JSON carries advice.param_copy (both sides' predicted peak and tokens/s, as the predictions give them); one step
     * past kept's longest sequence (from the plan's own models: per_gather still fits there), with fp32 parameters,
     * --cpu-offload or --param-copy kept, neither; asked for there, kept is said not to fit.
     */
    @Test
    void theKeptCopyIsAdvisedWhereItFits() throws Exception {
        String[] common = {"plan", "--model", "qwen2.5-7b", "--gpus-per-node", "1", "--checkpointing", "full",
                "--gpu-counts", "1"};
        Run text = run(common);
        assertThat(text.status()).as(text.err()).isZero();
        assertThat(text.out().lines().filter(l -> l.startsWith("fsdp.param_copy: "))).singleElement().asString()
                .matches("fsdp\\.param_copy: kept would also fit \\(129\\.2 GiB of 138\\.4 a GPU\\) and run about \\d% "
                        + "faster \\(7,6\\d\\d against 7,\\d{3} tokens/s per GPU\\): --set fsdp\\.param_copy=kept");
        JsonNode json = new ObjectMapper().readTree(run(concat(common, "--json")).out());
        JsonNode advice = json.get("advice").get("param_copy");
        String strategy = json.get("recommended").get("strategy").asText();
        assertThat(advice.get("strategy").asText()).isEqualTo(strategy);
        assertThat(advice.get("checkpointing").asText()).isEqualTo("full");
        assertThat(advice.get("set").asText()).isEqualTo("fsdp.param_copy=kept");
        JsonNode planned = prediction(json, strategy, null);
        assertThat(advice.get("per_gather").get("tok_s").asDouble()).isEqualTo(planned.get("tok_s").asDouble());
        assertThat(advice.get("per_gather").get("reserved_gib").asDouble())
                .isEqualTo(planned.get("memory_gib").get("reserved").asDouble());
        JsonNode kept = new ObjectMapper().readTree(run(concat(common, "--json", "--param-copy", "kept")).out());
        assertThat(kept.get("advice").has("param_copy")).isFalse();
        JsonNode keptPlanned = prediction(kept, strategy, kept.get("predictions").get(0));
        assertThat(advice.get("kept").get("tok_s").asDouble()).isEqualTo(keptPlanned.get("tok_s").asDouble());
        assertThat(advice.get("kept").get("reserved_gib").asDouble())
                .isEqualTo(keptPlanned.get("memory_gib").get("reserved").asDouble());
        assertThat(advice.get("gain").asDouble()).isCloseTo(advice.get("kept").get("tok_s").asDouble()
                / advice.get("per_gather").get("tok_s").asDouble() - 1, org.assertj.core.api.Assertions.within(1e-12));
        assertThat(run(concat(common, "--param-copy", "kept")).out()).doesNotContain("fsdp.param_copy: kept would");

        // one step past the longest sequence kept fits (the plan's own figure), per_gather fits and kept does not
        int keptLongest = kept.get("longest_seq").get("seq").asInt();
        String seq = Integer.toString(keptLongest + Planner.SEQ_STEP);
        JsonNode tooLong = new ObjectMapper().readTree(run(concat(common, "--json", "--seq", seq)).out());
        assertThat(tooLong.get("recommended").get("strategy").isNull()).isFalse();
        assertThat(tooLong.get("advice").has("param_copy")).isFalse();
        Run tooLongText = run(concat(common, "--seq", seq));
        assertThat(tooLongText.out()).contains("the fastest that fits").doesNotContain("fsdp.param_copy: kept would");
        Run askedTooLong = run(concat(common, "--seq", seq, "--param-copy", "kept"));
        assertThat(askedTooLong.out()).contains("recommended: nothing fits");
        assertThat(askedTooLong.out().lines().filter(l -> l.startsWith("full_shard ") && l.matches(".* (yes|no)$")))
                .singleElement().asString().endsWith(" no");
        assertThat(run(concat(common, "--seq", Integer.toString(keptLongest))).out())
                .contains("fsdp.param_copy: kept would also fit");

        String[] fp32 = {"plan", "--model", "qwen2.5-1.5b", "--gpus-per-node", "1", "--checkpointing", "full",
                "--gpu-counts", "1", "--param-dtype", "fp32"};
        for (String[] args : List.of(fp32, concat(common, "--cpu-offload"))) {
            Run r = run(args);
            assertThat(r.status()).as(r.err()).isZero();
            assertThat(r.out()).as(String.join(" ", args)).contains("the fastest that fits")
                    .doesNotContain("fsdp.param_copy: kept would");
            JsonNode j = new ObjectMapper().readTree(run(concat(args, "--json")).out());
            assertThat(j.get("advice").has("param_copy")).as(String.join(" ", args)).isFalse();
        }
    }

    /** The last of a --json plan's predictions for {@code strategy}, or {@code none} when it has none. */
    private static JsonNode prediction(JsonNode plan, String strategy, JsonNode none) {
        JsonNode found = none;
        for (JsonNode p : plan.get("predictions")) {
            if (p.get("strategy").asText().equals(strategy)) {
                found = p;
            }
        }
        return found;
    }

    private static String[] concat(String[] a, String... b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }

    private static String ncclLine(String group, int nodes, int groupsPerNode, String collective, long bytes,
                                   double busbw) {
        return "{\"group\":\"" + group + "\",\"ranks\":2,\"nodes\":" + nodes + ",\"groups_per_node\":"
                + groupsPerNode + ",\"collective\":\"" + collective + "\",\"dtype\":\"f32\",\"bytes\":" + bytes
                + ",\"count\":1,\"time_us\":1.0,\"algbw_gbs\":1.0,\"busbw_gbs\":" + busbw + "}";
    }

    /**
     * --nccl-test: the links nccl-test measured (the sixth session's two emulated nodes of one H200 each: 3.10, 3.03
     * and 2.94 GB/s at 512 MB; the same two GPUs as one node: 256, 255, 312 GB/s) replace the defaults; the largest
     * size of each collective counts; a smaller one is ignored. The network is the mean of the three, and plans as
     * --inter-gbps of that figure would.
     */
    @Test
    void measuredLinksFromNcclTest(@TempDir Path dir) throws Exception {
        long big = 536_870_912L;
        Path across = Files.write(dir.resolve("emulated.jsonl"), List.of(
                "[node 0 process 0] " + ncclLine("world", 2, 1, "all_gather", big, 3.0977),
                ncclLine("world", 2, 1, "all_gather", 1 << 20, 1.9),
                ncclLine("world", 2, 1, "reduce_scatter", big, 3.03),
                ncclLine("world", 2, 1, "all_reduce", big, 2.94)));
        String[] plan = {"plan", "--model", "qwen2.5-1.5b", "--nodes", "2", "--gpus-per-node", "1", "--checkpointing",
                "full", "--gpu-counts", "2", "--json"};
        Run measured = run(concat(plan, "--nccl-test", across.toString()));
        assertThat(measured.status()).as(measured.err()).isZero();
        JsonNode m = new ObjectMapper().readTree(measured.out());
        double gbps = (3.0977 + 3.03 + 2.94) / 3 * 8;
        assertThat(m.get("links").get("inter_node_gbps").asDouble()).isCloseTo(gbps, org.assertj.core.data.Offset.offset(1e-9));
        JsonNode given = new ObjectMapper().readTree(run(concat(plan, "--inter-gbps", Double.toString(gbps))).out());
        assertThat(m.get("predictions").get(0).get("tok_s").asDouble())
                .isCloseTo(given.get("predictions").get(0).get("tok_s").asDouble(), org.assertj.core.data.Percentage.withPercentage(1e-9));
        Path inside = Files.write(dir.resolve("node.jsonl"), List.of(
                ncclLine("world", 1, 1, "all_gather", big, 256), ncclLine("world", 1, 1, "reduce_scatter", big, 255),
                ncclLine("world", 1, 1, "all_reduce", big, 312)));
        Run node = run("plan", "--model", "qwen2.5-1.5b", "--gpus-per-node", "2", "--gpu-counts", "2", "--json",
                "--nccl-test", inside.toString());
        JsonNode links = new ObjectMapper().readTree(node.out()).get("links");
        assertThat(links.get("all_gather_busbw_gbs").asDouble()).isEqualTo(256.0);
        assertThat(links.get("reduce_scatter_busbw_gbs").asDouble()).isEqualTo(255.0);
        assertThat(links.get("all_reduce_busbw_gbs").asDouble()).isEqualTo(312.0);
        assertThat(links.get("inter_node_gbps").asDouble()).isEqualTo(400.0); // not measured: the default
        Run text = run("plan", "--model", "tiny", "--gpus-per-node", "2", "--gpu-counts", "2", "--nccl-test",
                inside.toString());
        assertThat(text.out()).contains("links: NVLink 256/255/312 GB/s").contains("links measured by nccl-test: " + inside);
    }

    /**
     * --bench: a one-GPU step measured 10% longer than the model's scales every compute stage by 1.1 (the peer's
     * line, another model's, a two-GPU line and an offloaded one are passed over); its throughput on one GPU is then
     * the measured one.
     */
    @Test
    void computeScaledToAMeasuredOneGpuStep(@TempDir Path dir) throws Exception {
        var modelled = Planner.predict(ModelShape.of(io.fsdp4j.model.ModelConfig.qwen25_7b()),
                Cluster.of(GpuSpec.h200(), 1, 1, 0, 1e9), Workload.benchmark(), io.fsdp4j.config.ShardingStrategy.FULL_SHARD,
                Planner.Options.defaults());
        double step = 1.1 * modelled.time().stepSeconds(), tokS = 2048 / step;
        String line = "{\"impl\":\"fsdp4j\",\"model\":\"qwen2.5-7b\",\"world\":1,\"seq\":2048,\"ac\":\"full\","
                + "\"tok_s\":" + tokS + ",\"tok_s_gpu\":" + tokS + ",\"step_s\":" + step + ",\"param_dtype\":\"bf16\","
                + "\"reduce_dtype\":\"fp32\",\"device\":\"NVIDIA H200 x1\",\"cpu_offload\":false}";
        Path bench = Files.write(dir.resolve("bench.jsonl"), List.of(
                "{\"impl\": \"pytorch-fsdp2\", \"model\": \"qwen2.5-7b\", \"world\": 1, \"step_s\": 0.4}",
                line.replace("\"step_s\":" + step, "\"step_s\":9").replace("\"world\":1", "\"world\":2"),
                line.replace("qwen2.5-7b", "qwen2.5-1.5b"),
                line.replace("\"cpu_offload\":false", "\"cpu_offload\":true"),
                "[node 0 process 0] " + line));
        Run r = run("plan", "--model", "qwen2.5-7b", "--gpus-per-node", "2", "--checkpointing", "full", "--gpu-counts",
                "1,2", "--json", "--bench", bench.toString());
        assertThat(r.status()).as(r.err()).isZero();
        JsonNode json = new ObjectMapper().readTree(r.out());
        assertThat(json.get("assumptions").get("compute_scale").asDouble()).isCloseTo(1.1, org.assertj.core.data.Offset.offset(1e-9));
        assertThat(json.get("scaling").get(0).get("full_shard").asDouble())
                .isCloseTo(tokS, org.assertj.core.data.Percentage.withPercentage(1e-6));
        Run text = run("plan", "--model", "qwen2.5-7b", "--gpus-per-node", "1", "--gpu-counts", "1", "--bench",
                bench.toString());
        assertThat(text.out()).contains("compute scaled by 1.100: fsdp4j bench measured qwen2.5-7b's step on one "
                + "NVIDIA H200 x1");
        Run other = run("plan", "--model", "qwen2.5-0.5b", "--bench", bench.toString());
        assertThat(other.status()).isEqualTo(2);
        assertThat(other.err().strip()).startsWith("error: --bench: " + bench + " has no one-GPU fsdp4j bench line of "
                + "qwen2.5-0.5b; measure one with 'fsdp4j bench --set model.preset=qwen2.5-0.5b");
        Run h100 = run("plan", "--model", "qwen2.5-7b", "--gpu", "h100", "--bench", bench.toString());
        assertThat(h100.err().strip()).isEqualTo("error: --bench: " + bench + " measured qwen2.5-7b on 'NVIDIA H200 x1', "
                + "not on an H100; give --gpu for the GPU it ran on");
        Run offload = run("plan", "--model", "qwen2.5-7b", "--cpu-offload", "--bench", bench.toString());
        assertThat(offload.err().strip()).startsWith("error: --bench scales the GPU's compute");
    }

    /**
     * --bench with a line of full checkpointing keeping attention and blocks left out of it (bench says both): the
     * measured step is set against that step as the model predicts it, which the header names.
     */
    @Test
    void aBenchLineIsModelledWithItsCheckpointing(@TempDir Path dir) throws Exception {
        var one = Cluster.of(GpuSpec.h200(), 1, 1, 0, 1e9);
        ModelShape qwen = ModelShape.of(io.fsdp4j.model.ModelConfig.qwen25_7b());
        Workload w = Workload.benchmark().withSeq(8192)
                .withCheckpointing(io.fsdp4j.config.ActivationCheckpointing.FULL_KEEP_ATTENTION)
                .withBlocksNotCheckpointed(12);
        double modelled = Planner.predict(qwen, one, w, io.fsdp4j.config.ShardingStrategy.FULL_SHARD,
                Planner.Options.defaults()).time().stepSeconds();
        double step = 1.1 * modelled, tokS = 8192 / step;
        String line = "{\"impl\":\"fsdp4j\",\"model\":\"qwen2.5-7b\",\"world\":1,\"seq\":8192,"
                + "\"ac\":\"full_keep_attention\",\"blocks_not_checkpointed\":12,\"tok_s\":" + tokS + ",\"step_s\":"
                + step + ",\"param_dtype\":\"bf16\",\"reduce_dtype\":\"fp32\",\"device\":\"NVIDIA H200 x1\","
                + "\"cpu_offload\":false}";
        Path bench = Files.write(dir.resolve("bench.jsonl"), List.of(line));
        Run r = run("plan", "--model", "qwen2.5-7b", "--gpus-per-node", "1", "--gpu-counts", "1", "--seq", "8192",
                "--checkpointing", "full_keep_attention", "--blocks-not-checkpointed", "12", "--json", "--bench",
                bench.toString());
        assertThat(r.status()).as(r.err()).isZero();
        JsonNode json = new ObjectMapper().readTree(r.out());
        assertThat(json.get("assumptions").get("compute_scale").asDouble())
                .isCloseTo(1.1, org.assertj.core.data.Offset.offset(1e-9));
        assertThat(json.get("assumptions").get("blocks_not_checkpointed").asInt()).isEqualTo(12);
        Run text = run("plan", "--model", "qwen2.5-7b", "--gpus-per-node", "1", "--gpu-counts", "1", "--seq", "8192",
                "--blocks-not-checkpointed", "12");
        assertThat(text.out()).contains("; the last 12 blocks not checkpointed (fsdp.blocks_not_checkpointed)");
        Run bad = run("plan", "--model", "qwen2.5-7b", "--blocks-not-checkpointed", "-1");
        assertThat(bad.status()).isEqualTo(2);
        assertThat(bad.err().strip()).isEqualTo("error: --blocks-not-checkpointed must be at least 0");
    }

    /**
     * --bench with a line of fsdp.param_copy kept (bench says it): the measured step is set against the kept step the
     * model predicts, not the per_gather one (which the model times 6.5% longer); a line without the key is per_gather.
     */
    @Test
    void aBenchLineIsModelledWithItsParamCopy(@TempDir Path dir) throws Exception {
        var one = Cluster.of(GpuSpec.h200(), 1, 1, 0, 1e9);
        ModelShape qwen = ModelShape.of(io.fsdp4j.model.ModelConfig.qwen25_7b());
        double kept = Planner.predict(qwen, one, Workload.benchmark().withParamCopy(io.fsdp4j.config.ParamCopy.KEPT),
                io.fsdp4j.config.ShardingStrategy.FULL_SHARD, Planner.Options.defaults()).time().stepSeconds();
        double step = 1.1 * kept, tokS = 2048 / step;
        String line = "{\"impl\":\"fsdp4j\",\"model\":\"qwen2.5-7b\",\"world\":1,\"seq\":2048,\"ac\":\"full\","
                + "\"tok_s\":" + tokS + ",\"step_s\":" + step + ",\"param_dtype\":\"bf16\",\"reduce_dtype\":\"fp32\","
                + "\"param_copy\":\"kept\",\"device\":\"NVIDIA H200 x1\",\"cpu_offload\":false}";
        String[] plan = {"plan", "--model", "qwen2.5-7b", "--gpus-per-node", "1", "--checkpointing", "full",
                "--gpu-counts", "1", "--json", "--bench"};
        Path keptLine = Files.write(dir.resolve("kept.jsonl"), List.of(line));
        Run r = run(concat(plan, keptLine.toString()));
        assertThat(r.status()).as(r.err()).isZero();
        assertThat(new ObjectMapper().readTree(r.out()).get("assumptions").get("compute_scale").asDouble())
                .isCloseTo(1.1, org.assertj.core.data.Offset.offset(1e-9));
        Path older = Files.write(dir.resolve("older.jsonl"), List.of(line.replace(",\"param_copy\":\"kept\"", "")));
        double scale = new ObjectMapper().readTree(run(concat(plan, older.toString())).out()).get("assumptions")
                .get("compute_scale").asDouble();
        assertThat(scale).isLessThan(1.1 / 1.05);
        Path bad = Files.write(dir.resolve("bad.jsonl"), List.of(line.replace("\"kept\"", "\"sometimes\"")));
        Run refused = run(concat(plan, bad.toString()));
        assertThat(refused.status()).isEqualTo(2);
        assertThat(refused.err().strip())
                .isEqualTo("error: --bench: the bench line's param_copy 'sometimes' is not one of fsdp4j's");
    }

    @Test
    void aBadNcclTestFileIsAOneLineError(@TempDir Path dir) throws Exception {
        Path old = Files.write(dir.resolve("old.jsonl"), List.of("{\"group\":\"world\",\"ranks\":2,\"collective\":"
                + "\"all_gather\",\"bytes\":1024,\"busbw_gbs\":1.0}"));
        Run r = run("plan", "--model", "tiny", "--nccl-test", old.toString());
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.err().strip()).isEqualTo("error: --nccl-test: " + old + " line 1 does not say which nodes its group "
                + "spans (written by an older fsdp4j); measure again with 'fsdp4j nccl-test --json'");
        Path table = Files.write(dir.resolve("table.txt"), List.of("# group ranks collective", "world 2 all_gather"));
        Run none = run("plan", "--model", "tiny", "--nccl-test", table.toString());
        assertThat(none.err().strip()).startsWith("error: --nccl-test: " + table + " has no measurements; write it with");
        Path across = Files.write(dir.resolve("across.jsonl"), List.of(ncclLine("world", 2, 1, "all_gather", 1024, 3.0)));
        Run both = run("plan", "--model", "tiny", "--nodes", "2", "--nccl-test", across.toString(), "--inter-gbps", "100");
        assertThat(both.status()).isEqualTo(2);
        assertThat(both.err().strip()).startsWith("error: --inter-gbps and --nccl-test both give the network between nodes");
        Run missing = run("plan", "--model", "tiny", "--nccl-test", dir.resolve("absent.jsonl").toString());
        assertThat(missing.err().strip()).startsWith("error: --nccl-test: cannot read ");
    }

    /**
     * What {@code train} runs with both {@code auto} keys (a fine-tune's defaults on GPUs): a line and the JSON's
     * {@code auto}, as {@link Planner#chooseMemoryUse} chooses, on full_shard unless the train config names a strategy.
     */
    @Test
    void whatAutoRunsIsPlanned() throws Exception {
        Run text = run("plan", "--model", "qwen2.5-7b", "--gpu", "h200", "--gpus-per-node", "1", "--gpu-counts", "1",
                "--seq", "16384");
        assertThat(text.status()).as(text.err()).isZero();
        var expected = Planner.chooseMemoryUse(ModelShape.of(io.fsdp4j.model.ModelConfig.qwen25_7b()),
                Cluster.of(GpuSpec.h200(), 1, 1, 0, 50e9), Workload.benchmark().withSeq(16384),
                io.fsdp4j.config.ShardingStrategy.FULL_SHARD, Planner.Options.defaults(), true, true);
        assertThat(expected.blocksSelective()).isPositive();
        assertThat(text.out().lines().filter(l -> l.startsWith("train with fsdp.activation_checkpointing=auto")))
                .singleElement().asString().startsWith("train with fsdp.activation_checkpointing=auto and"
                        + " fsdp.param_copy=auto (a fine-tune's defaults on GPUs) on full_shard: checkpointing "
                        + expected.mode().spelling() + ", " + expected.blocksInWords() + "; param_copy "
                        + expected.paramCopy().spelling() + " (");
        JsonNode json = new ObjectMapper().readTree(run("plan", "--model", "qwen2.5-7b", "--gpu", "h200",
                "--gpus-per-node", "1", "--gpu-counts", "1", "--seq", "16384", "--json").out()).get("auto");
        assertThat(json.get("strategy").asText()).isEqualTo("full_shard");
        assertThat(json.get("checkpointing").asText()).isEqualTo(expected.mode().spelling());
        assertThat(json.get("blocks_not_checkpointed").asInt()).isEqualTo(expected.blocksNotCheckpointed());
        assertThat(json.get("blocks_selective").asInt()).isEqualTo(expected.blocksSelective());
        assertThat(json.get("param_copy").asText()).isEqualTo(expected.paramCopy().spelling());
        assertThat(json.get("fits").asBoolean()).isTrue();
        assertThat(json.get("reserved_gib").asDouble()).isEqualTo(Planner.gib(expected.prediction().memory()
                .reserved()));
        // the strategy of a train config's settings
        Run sgo = run("plan", "--set", "model.preset=qwen2.5-7b", "--set", "fsdp.strategy=shard_grad_op", "--gpu",
                "h200", "--gpus-per-node", "1", "--gpu-counts", "1", "--seq", "16384");
        assertThat(sgo.status()).as(sgo.err()).isZero();
        assertThat(sgo.out()).contains("(a fine-tune's defaults on GPUs) on shard_grad_op: ");
    }

    @Test
    void oneCheckpointingModeWhenAsked() throws Exception {
        Run r = run("plan", "--model", "tiny", "--checkpointing", "none", "--json", "--gpu-counts", "2");
        assertThat(r.status()).as(r.err()).isZero();
        JsonNode json = new ObjectMapper().readTree(r.out());
        assertThat(json.get("predictions")).hasSize(5);
        assertThat(json.get("predictions").findValuesAsText("checkpointing")).containsOnly("none");
    }

    @Test
    void drawsTheScalingChart(@TempDir Path dir) throws Exception {
        Path png = dir.resolve("scaling.png");
        Run r = run("plan", "--model", "qwen2.5-1.5b", "--gpu-counts", "1,8,64,512", "--plot", png.toString());
        assertThat(r.status()).as(r.err()).isZero();
        assertThat(r.out()).contains("plot: " + png);
        BufferedImage image = ImageIO.read(png.toFile());
        assertThat(image.getWidth()).isGreaterThan(400);
        assertThat(Files.size(png)).isGreaterThan(1000);
    }

    @Test
    void badInputIsAOneLineError() {
        Run r = run("plan", "--model", "qwen2.5-7b", "--checkpointing", "some");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.err().strip()).isEqualTo("error: --checkpointing must be one of full, full_keep_attention, selective, none, got 'some'");
        Run unknown = run("plan", "--model", "gpt-5");
        assertThat(unknown.status()).isEqualTo(2);
        assertThat(unknown.err()).startsWith("error: unknown model preset 'gpt-5'");
        Run gpu = run("plan", "--model", "tiny", "--gpu", "a100");
        assertThat(gpu.err().strip()).isEqualTo("error: unknown --gpu 'a100'; known: h200, h100");
        Run counts = run("plan", "--model", "tiny", "--gpus-per-node", "8", "--gpu-counts", "4,12");
        assertThat(counts.err().strip()).isEqualTo("error: --gpu-counts: each count must be positive, and at most "
                + "--gpus-per-node (8) or a multiple of it; got 12");
        Run depth = run("plan", "--model", "tiny", "--prefetch", "9");
        assertThat(depth.status()).isEqualTo(2);
        assertThat(depth.err().strip()).isEqualTo("error: --prefetch must be between 0 and 8");
        Run missing = run("plan", "--nodes", "2");
        assertThat(missing.status()).isEqualTo(2);
        assertThat(missing.err()).contains("--model");
    }
}
