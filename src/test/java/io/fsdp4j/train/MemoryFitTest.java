package io.fsdp4j.train;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.ParamCopy;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.plan.Cluster;
import io.fsdp4j.plan.GpuSpec;
import io.fsdp4j.plan.ModelShape;
import io.fsdp4j.plan.Planner;
import io.fsdp4j.plan.Workload;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code fsdp.activation_checkpointing: auto} decided at a run's start ({@link MemoryFit}): the plan's choice
 * for the job's GPUs, strategy and sequence, written into the config and said in one line; on CPU ranks, none.
 */
class MemoryFitTest {
    private static final ModelConfig QWEN_7B = ModelConfig.qwen25_7b();

    private static TrainConfig config(String... more) {
        var settings = new java.util.ArrayList<>(List.of("model.preset=qwen2.5-7b", "dist.device=cuda",
                "dist.ranks=1", "train.batch_size=1", "fsdp.param_dtype=bf16", "fsdp.activation_checkpointing=auto"));
        settings.addAll(List.of(more));
        return TrainConfig.load(null, settings);
    }

    private static String[] said = {""};

    private static TrainConfig fit(TrainConfig config, GpuSpec gpu) {
        var bytes = new ByteArrayOutputStream();
        TrainConfig fitted = MemoryFit.fit(config, QWEN_7B, gpu,
                new PrintStream(bytes, true, StandardCharsets.UTF_8));
        said[0] = bytes.toString(StandardCharsets.UTF_8).strip();
        return fitted;
    }

    /**
     * Packed documents (chat conversations) attend within each document: the choice is the plan's for that workload,
     * and the line says what it assumed.
     */
    @Test
    void packedDocumentsArePlannedAtTheirLength() {
        var bytes = new ByteArrayOutputStream();
        TrainConfig fitted = MemoryFit.fit(config("data.seq_len=16384"), QWEN_7B, GpuSpec.h200(), 2048,
                new PrintStream(bytes, true, StandardCharsets.UTF_8));
        var expected = Planner.chooseCheckpointing(ModelShape.of(QWEN_7B), Cluster.of(GpuSpec.h200(), 1, 1, 0, 50e9),
                Workload.benchmark().withSeq(16384).withDocumentTokens(2048), ShardingStrategy.FULL_SHARD,
                Planner.Options.defaults());
        assertThat(fitted.fsdp().activationCheckpointing()).isEqualTo(expected.mode());
        assertThat(fitted.fsdp().blocksNotCheckpointed()).isEqualTo(expected.blocksNotCheckpointed());
        assertThat(fitted.fsdp().blocksSelective()).isEqualTo(expected.blocksSelective());
        assertThat(bytes.toString(StandardCharsets.UTF_8))
                .contains("a H200, attention within packed documents of about 2048 tokens; fsdp4j plan shows");
        // the documents asked for only where the plan decides: not on CPU ranks
        var cpu = TrainConfig.load(null, List.of("model.preset=tiny", "fsdp.activation_checkpointing=auto"));
        assertThat(MemoryFit.fit(cpu, ModelConfig.preset("tiny"), () -> {
            throw new AssertionError("read the documents on CPU ranks");
        }, new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8)).fsdp().activationCheckpointing())
                .isEqualTo(ActivationCheckpointing.NONE);
    }

    @Test
    void aLongSequenceOnOneGpuGetsThePlansSplit() {
        TrainConfig fitted = fit(config("data.seq_len=16384"), GpuSpec.h200());
        var expected = Planner.chooseCheckpointing(ModelShape.of(QWEN_7B), Cluster.of(GpuSpec.h200(), 1, 1, 0, 50e9),
                Workload.benchmark().withSeq(16384), ShardingStrategy.FULL_SHARD, Planner.Options.defaults());
        var f = fitted.fsdp();
        assertThat(f.autoCheckpointing()).isFalse();
        assertThat(f.activationCheckpointing()).isEqualTo(ActivationCheckpointing.FULL_KEEP_ATTENTION)
                .isEqualTo(expected.mode());
        assertThat(f.blocksNotCheckpointed()).isEqualTo(expected.blocksNotCheckpointed());
        assertThat(f.blocksSelective()).isEqualTo(expected.blocksSelective()).isPositive();
        assertThat(said[0]).startsWith("fsdp4j: auto: fsdp.activation_checkpointing=full_keep_attention, "
                        + expected.blocksInWords() + " (planned ")
                .contains(" of 138.4 GiB a H200; fsdp4j plan shows the others)").doesNotContain("\n");
        // everything else as it was
        assertThat(fitted.with("fsdp.activation_checkpointing=auto", "fsdp.blocks_not_checkpointed=0",
                "fsdp.blocks_selective=0")).isEqualTo(config("data.seq_len=16384"));
    }

    @Test
    void ranksSharingOneGpuShareItsMemory() {
        TrainConfig alone = fit(config("data.seq_len=2048"), GpuSpec.h200());
        assertThat(alone.fsdp().activationCheckpointing()).isEqualTo(ActivationCheckpointing.NONE);
        // two ranks of Qwen2.5-7B on one H200: half the state each, and half the memory
        TrainConfig shared = fit(config("data.seq_len=2048", "dist.ranks=2", "dist.share_gpu=true"), GpuSpec.h200());
        assertThat(shared.fsdp().activationCheckpointing()).isNotEqualTo(ActivationCheckpointing.NONE);
        assertThat(said[0]).contains(" of 69.2 GiB a rank on the shared H200;").doesNotContain("more than fits");
    }

    /**
     * Qwen2.5-7B's state alone (16 bytes a parameter) is more than one H100 holds: auto runs full, says so, and says
     * what offloading the state would plan; already offloaded at 524288 tokens, nothing fits and nothing is offered.
     */
    @Test
    void whatFitsNothingRunsFullAndSaysSo() {
        TrainConfig fitted = fit(config("data.seq_len=2048"), GpuSpec.h100());
        assertThat(fitted.fsdp().activationCheckpointing()).isEqualTo(ActivationCheckpointing.FULL);
        assertThat(fitted.fsdp().blocksNotCheckpointed() + fitted.fsdp().blocksSelective()).isZero();
        assertThat(said[0]).startsWith("fsdp4j: auto: fsdp.activation_checkpointing=full (planned ")
                .containsPattern(" of 77\\.6 GiB a H100: more than fits, the least any choice keeps; with"
                        + " fsdp.cpu_offload=true it plans \\d+\\.\\d GiB; fsdp4j plan shows the others\\)$");
        TrainConfig offloaded = fit(config("data.seq_len=524288", "fsdp.cpu_offload=true"), GpuSpec.h100());
        assertThat(offloaded.fsdp().activationCheckpointing()).isEqualTo(ActivationCheckpointing.FULL);
        assertThat(said[0]).contains(": more than fits, the least any choice keeps; fsdp4j plan")
                .doesNotContain("with fsdp.cpu_offload");
    }

    /**
     * {@code fsdp.param_copy: auto}: Qwen2.5-1.5B at 2048 tokens on one H200 has room for the kept copy beside every
     * activation, and the plan finds it faster; Qwen2.5-7B at 16384 with 5 blocks left out of full_keep_attention
     * (named: 136.4 GiB measured without the copy) has not; fp32
     * parameters hold no copy, so there is nothing to choose.
     */
    @Test
    void theKeptCopyIsChosenWhereItFitsAndIsFaster() {
        var small = ModelConfig.qwen25_1_5b();
        var bytes = new ByteArrayOutputStream();
        TrainConfig both = MemoryFit.fit(TrainConfig.load(null, List.of("model.preset=qwen2.5-1.5b", "dist.device=cuda",
                "dist.ranks=1", "train.batch_size=1", "fsdp.param_dtype=bf16", "data.seq_len=2048",
                "fsdp.activation_checkpointing=auto", "fsdp.param_copy=auto")), small, GpuSpec.h200(),
                new PrintStream(bytes, true, StandardCharsets.UTF_8));
        assertThat(both.fsdp().paramCopy()).isEqualTo(ParamCopy.KEPT);
        assertThat(both.fsdp().autoParamCopy()).isFalse();
        assertThat(both.fsdp().activationCheckpointing()).isEqualTo(ActivationCheckpointing.NONE);
        assertThat(bytes.toString(StandardCharsets.UTF_8)).startsWith(
                "fsdp4j: auto: fsdp.activation_checkpointing=none; fsdp.param_copy=kept (planned ");
        var expected = Planner.chooseMemoryUse(ModelShape.of(small), Cluster.of(GpuSpec.h200(), 1, 1, 0, 50e9),
                Workload.benchmark(), ShardingStrategy.FULL_SHARD, Planner.Options.defaults(), true, true);
        var perGather = Planner.chooseMemoryUse(ModelShape.of(small), Cluster.of(GpuSpec.h200(), 1, 1, 0, 50e9),
                Workload.benchmark(), ShardingStrategy.FULL_SHARD, Planner.Options.defaults(), true, false);
        assertThat(expected.paramCopy()).isEqualTo(ParamCopy.KEPT);
        assertThat(expected.prediction().tokensPerSecond()).isGreaterThan(1.005 * perGather.prediction()
                .tokensPerSecond());

        TrainConfig copyOnly = fit(config("data.seq_len=16384").with("fsdp.activation_checkpointing=full_keep_attention",
                "fsdp.blocks_not_checkpointed=5", "fsdp.param_copy=auto"), GpuSpec.h200());
        assertThat(copyOnly.fsdp().paramCopy()).isEqualTo(ParamCopy.PER_GATHER);
        assertThat(copyOnly.fsdp().activationCheckpointing()).isEqualTo(ActivationCheckpointing.FULL_KEEP_ATTENTION);
        assertThat(copyOnly.fsdp().blocksNotCheckpointed()).isEqualTo(5);
        assertThat(said[0]).startsWith("fsdp4j: auto: fsdp.param_copy=per_gather (planned ");

        TrainConfig fp32 = fit(config("data.seq_len=2048", "fsdp.param_dtype=fp32").with("fsdp.param_copy=auto"),
                GpuSpec.h200());
        assertThat(fp32.fsdp().paramCopy()).isEqualTo(ParamCopy.PER_GATHER);
    }

    @Test
    void aModeTheUserNamesIsLeftAsItIs() {
        TrainConfig named = TrainConfig.load(null, List.of("model.preset=qwen2.5-7b", "dist.device=cuda",
                "fsdp.activation_checkpointing=full", "fsdp.blocks_not_checkpointed=3"));
        var bytes = new ByteArrayOutputStream();
        assertThat(MemoryFit.fit(named, QWEN_7B, new PrintStream(bytes, true, StandardCharsets.UTF_8)))
                .isSameAs(named);
        assertThat(bytes.size()).isZero();
    }

    @Test
    void cpuRanksKeepEveryActivation() {
        TrainConfig onCpu = TrainConfig.load(null, List.of("dist.device=cpu", "fsdp.activation_checkpointing=auto"));
        TrainConfig copyOnCpu = TrainConfig.load(null, List.of("dist.device=cpu", "fsdp.param_copy=auto"));
        var copyBytes = new ByteArrayOutputStream();
        assertThat(MemoryFit.fit(copyOnCpu, ModelConfig.preset("tiny"), new PrintStream(copyBytes, true,
                StandardCharsets.UTF_8)).fsdp().paramCopy()).isEqualTo(ParamCopy.PER_GATHER);
        assertThat(copyBytes.toString(StandardCharsets.UTF_8)).isEqualTo(
                "fsdp4j: auto: fsdp.param_copy=per_gather (CPU ranks keep every activation)\n");
        var bytes = new ByteArrayOutputStream();
        TrainConfig fitted = MemoryFit.fit(onCpu, ModelConfig.preset("tiny"),
                new PrintStream(bytes, true, StandardCharsets.UTF_8));
        assertThat(fitted.fsdp().activationCheckpointing()).isEqualTo(ActivationCheckpointing.NONE);
        assertThat(fitted.fsdp().autoCheckpointing()).isFalse();
        assertThat(bytes.toString(StandardCharsets.UTF_8)).isEqualTo(
                "fsdp4j: auto: fsdp.activation_checkpointing=none (CPU ranks keep every activation)\n");
    }
}
