package io.fsdp4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code fsdp4j plan} reads a train config and --set keys as train does, and says its choice as train keys. */
class PlanConfigTest {
    @TempDir
    Path dir;

    /** The lines of plan's output from its header to its recommendation. */
    private static String plan(String... args) {
        CommandsEndToEndTest.Run r = CommandsEndToEndTest.run(args);
        assertThat(r.status()).as(r.err()).isZero();
        return r.out();
    }

    @Test
    void aConfigsKeysArePlannedAsTheOldOptionsWere() throws IOException {
        Path config = Files.writeString(dir.resolve("run.yaml"), """
                model:
                  preset: qwen2.5-1.5b
                data:
                  seq_len: 1024
                train:
                  batch_size: 2
                fsdp:
                  param_dtype: bf16
                  activation_checkpointing: selective
                dist:
                  ranks: 4
                  nnodes: 2
                """);
        String fromConfig = plan("plan", config.toString(), "--gpu-counts", "8");
        String fromOptions = plan("plan", "--model", "qwen2.5-1.5b", "--seq", "1024", "--batch", "2", "--param-dtype",
                "bf16", "--checkpointing", "selective", "--gpus-per-node", "4", "--nodes", "2", "--gpu-counts", "8");
        assertThat(fromConfig).isEqualTo(fromOptions);
        assertThat(fromConfig).contains("on 2 nodes x 4 H200").contains("per GPU and step: 2 x 1024 tokens");
        // --set as for train, and an option still wins over a key
        String set = plan("plan", "--set", "model.preset=qwen2.5-1.5b", "--set", "data.seq_len=1024",
                "--set", "train.batch_size=2", "--set", "fsdp.activation_checkpointing=selective", "--set", "fsdp.param_dtype=bf16",
                "--set", "dist.ranks=4", "--set", "dist.nnodes=2", "--gpu-counts", "8");
        assertThat(set).isEqualTo(fromOptions);
        assertThat(plan("plan", config.toString(), "--seq", "512", "--gpu-counts", "8")).contains("per GPU and step: 2 x 512 tokens");
    }

    /** fsdp.param_copy from the config is planned as --param-copy is; the option wins over the key. */
    @Test
    void theConfigsParamCopyIsPlanned() throws IOException {
        Path config = Files.writeString(dir.resolve("kept.yaml"), """
                model:
                  preset: qwen2.5-1.5b
                data:
                  seq_len: 2048
                train:
                  batch_size: 1
                fsdp:
                  param_dtype: bf16
                  param_copy: kept
                dist:
                  ranks: 2
                """);
        String fromConfig = plan("plan", config.toString(), "--gpu-counts", "2");
        String fromOption = plan("plan", "--model", "qwen2.5-1.5b", "--gpus-per-node", "2", "--param-copy", "kept",
                "--gpu-counts", "2");
        assertThat(fromConfig).isEqualTo(fromOption).contains("(fsdp.param_copy kept: ");
        String perGather = plan("plan", "--model", "qwen2.5-1.5b", "--gpus-per-node", "2", "--gpu-counts", "2");
        assertThat(plan("plan", config.toString(), "--param-copy", "per_gather", "--gpu-counts", "2"))
                .isEqualTo(perGather).isNotEqualTo(fromConfig);
        assertThat(plan("plan", "--set", "model.preset=qwen2.5-1.5b", "--set", "dist.ranks=2", "--set",
                "data.seq_len=2048", "--set", "train.batch_size=1", "--set", "fsdp.param_dtype=bf16", "--set",
                "fsdp.param_copy=kept", "--gpu-counts", "2")).isEqualTo(fromOption);
    }

    @Test
    void theRecommendationIsGivenAsTrainKeys() {
        String out = plan("plan", "--model", "qwen2.5-7b", "--gpus-per-node", "8", "--gpu-counts", "8");
        assertThat(out).containsPattern("as train keys: --set fsdp.strategy=[a-z_0-9]+ --set"
                + " fsdp.activation_checkpointing=(none|selective|full)");
        CommandsEndToEndTest.run("plan", "--gpu-counts", "8").failsWith("give a model");
        CommandsEndToEndTest.run("plan", "--set", "model.preset=nope").failsWith("unknown model preset 'nope'");
    }

    /**
     * fp8 is planned with bf16 parameters (their bytes: the same memory), the report saying that the blocks' products
     * run in fp8, and its steps are shorter (the products at fp8's rate; PlannerTest checks them against measured ones).
     */
    @Test
    void fp8IsPlannedWithBf16ParametersAndFp8Products() {
        String fp8 = plan("plan", "--model", "qwen2.5-1.5b", "--param-dtype", "fp8", "--gpu-counts", "8");
        String bf16 = plan("plan", "--model", "qwen2.5-1.5b", "--param-dtype", "bf16", "--gpu-counts", "8");
        assertThat(fp8).contains("bf16 parameters, fp32 reduction; the blocks' linear products in fp8");
        assertThat(section(fp8, "memory per GPU")).isEqualTo(section(bf16, "memory per GPU")).isNotEmpty();
        assertThat(stepMs(fp8)).isLessThan(stepMs(bf16));
    }

    /**
     * A config's fsdp.fp8_recipe is planned: rowwise says so, needs the same memory, and its step is longer than
     * tensorwise's (each layout of an operand cast on its own, the gradients' products slower; PlannerTest checks
     * the difference against a measured one).
     */
    @Test
    void theConfigsFp8RecipeIsPlanned() {
        String rowwise = plan("plan", "--model", "qwen2.5-1.5b", "--gpu-counts", "8", "--set", "fsdp.param_dtype=fp8",
                "--set", "fsdp.fp8_recipe=rowwise");
        String tensorwise = plan("plan", "--model", "qwen2.5-1.5b", "--gpu-counts", "8", "--set",
                "fsdp.param_dtype=fp8");
        assertThat(rowwise).contains("the blocks' linear products in fp8, rowwise");
        assertThat(tensorwise).contains("the blocks' linear products in fp8, tensorwise");
        assertThat(section(rowwise, "memory per GPU")).isEqualTo(section(tensorwise, "memory per GPU")).isNotEmpty();
        assertThat(stepMs(rowwise)).isGreaterThan(stepMs(tensorwise));
    }

    /** The lines of a plan's report from the one starting with {@code title} to the next blank line. */
    private static java.util.List<String> section(String report, String title) {
        return report.lines().dropWhile(l -> !l.startsWith(title)).takeWhile(l -> !l.isBlank()).toList();
    }

    /** The step time of full_shard with full checkpointing in a plan's report, ms. */
    private static double stepMs(String report) {
        String row = section(report, "step, ms").stream().filter(l -> l.matches("full_shard +full .*")).findFirst()
                .orElseThrow();
        return Double.parseDouble(row.trim().split(" +")[7]);
    }
}
