package io.fsdp4j.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class TrainConfigTest {
    @TempDir
    Path dir;

    private Path yaml(String text) throws IOException {
        Path file = dir.resolve("run.yaml");
        Files.writeString(file, text);
        return file;
    }

    private static TrainConfig set(String... overrides) {
        return TrainConfig.load(null, List.of(overrides));
    }

    /** The message of the UserError that loading with these overrides throws. */
    private static String errorOf(String... overrides) {
        try {
            set(overrides);
        } catch (UserError e) {
            return e.getMessage();
        }
        throw new AssertionError("no error for " + List.of(overrides));
    }

    @Test
    void defaultsAreTheDemo() {
        TrainConfig c = TrainConfig.defaults();
        assertThat(c.model()).isEqualTo(new ModelSection(null, "tiny"));
        assertThat(c.data()).isEqualTo(new DataSection(null, null, 64, false));
        assertThat(c.train()).isEqualTo(new TrainSection(100, 2, 1, 1234));
        assertThat(c.optim()).isEqualTo(new OptimSection(3e-3, 0.9, 0.95, 1e-8, 0.1, DecayRule.MATRICES, 1.0));
        assertThat(c.schedule()).isEqualTo(new ScheduleSection(ScheduleKind.COSINE, 10, 0.1));
        assertThat(c.fsdp()).isEqualTo(new FsdpSection(ShardingStrategy.FULL_SHARD, 0, Precision.FP32, Precision.FP32,
                ActivationCheckpointing.NONE, false, 1));
        assertThat(c.fsdp().autoCheckpointing()).isFalse();
        assertThat(c.dist()).isEqualTo(new DistSection(DeviceKind.AUTO, 2, 1, 0, null));
        assertThat(c.checkpoint()).isEqualTo(new CheckpointSection(null, 0, 2, "none"));
        assertThat(c.log()).isEqualTo(new LogSection(null, 1, 0, 0, null));
        assertThat(c).isEqualTo(TrainConfig.load(null, List.of()));
    }

    @Test
    void eachSectionDefaultsMatchTheLoadedDefaults() {
        TrainConfig c = TrainConfig.defaults();
        assertThat(List.of(c.model(), c.data(), c.train(), c.optim(), c.schedule(), c.fsdp(), c.dist(), c.checkpoint(), c.log()))
                .containsExactly(ModelSection.defaults(), DataSection.defaults(), TrainSection.defaults(),
                        OptimSection.defaults(), ScheduleSection.defaults(), FsdpSection.defaults(), DistSection.defaults(),
                        CheckpointSection.defaults(), LogSection.defaults());
    }

    @Test
    void yamlIsReadAndSetOverridesIt() throws IOException {
        Path file = yaml("""
                model:
                  preset: qwen2.5-1.5b
                train:
                  steps: 5
                  batch_size: 4
                optim:
                  lr: 3e-4
                  betas: [0.8, 0.9]
                fsdp:
                  strategy: hybrid_shard
                  shard_size: 2
                  param_dtype: bf16
                """);
        TrainConfig c = TrainConfig.load(file, List.of("train.steps=7", "optim.betas=0.5,0.6", "train.steps=8"));
        assertThat(c.model().preset()).isEqualTo("qwen2.5-1.5b");
        assertThat(c.train().steps()).isEqualTo(8);
        assertThat(c.train().batchSize()).isEqualTo(4);
        assertThat(c.optim().lr()).isEqualTo(3e-4);
        assertThat(c.optim().beta1()).isEqualTo(0.5);
        assertThat(c.optim().beta2()).isEqualTo(0.6);
        assertThat(c.fsdp().strategy()).isEqualTo(ShardingStrategy.HYBRID_SHARD);
        assertThat(c.fsdp().shardSize()).isEqualTo(2);
        assertThat(c.fsdp().paramDtype()).isEqualTo(Precision.BF16);
        assertThat(c.fsdp().reduceDtype()).isEqualTo(Precision.FP32);
        assertThat(c.schedule()).isEqualTo(ScheduleSection.defaults());
    }

    @Test
    void setAcceptsEveryType() {
        TrainConfig c = set("data.pack=true", "data.train=data/train.jsonl", "train.seed=-3", "optim.decay=all",
                "schedule.kind=linear", "fsdp.activation_checkpointing=selective", "fsdp.cpu_offload=false",
                "dist.device=cpu", "dist.rdzv=host:29500", "checkpoint.dir=ckpt", "checkpoint.resume=auto",
                "log.metrics=m.jsonl", "train.steps=1_000");
        assertThat(c.data().pack()).isTrue();
        assertThat(c.data().train()).isEqualTo(Path.of("data/train.jsonl"));
        assertThat(c.train().seed()).isEqualTo(-3);
        assertThat(c.train().steps()).isEqualTo(1000);
        assertThat(c.optim().decay()).isEqualTo(DecayRule.ALL);
        assertThat(c.schedule().kind()).isEqualTo(ScheduleKind.LINEAR);
        assertThat(c.fsdp().activationCheckpointing()).isEqualTo(ActivationCheckpointing.SELECTIVE);
        assertThat(c.dist().device()).isEqualTo(DeviceKind.CPU);
        assertThat(c.dist().rdzv()).isEqualTo("host:29500");
        assertThat(c.checkpoint().dir()).isEqualTo(Path.of("ckpt"));
        assertThat(c.checkpoint().resume()).isEqualTo("auto");
        assertThat(c.checkpoint().resumePath()).isNull();
        assertThat(c.log().metrics()).isEqualTo(Path.of("m.jsonl"));
    }

    @Test
    void anEmptyOrNullSetClearsAPath() throws IOException {
        Path file = yaml("log:\n  metrics: m.jsonl\ndata:\n  train: t.jsonl\n");
        TrainConfig c = TrainConfig.load(file, List.of("log.metrics=", "data.train=null"));
        assertThat(c.log().metrics()).isNull();
        assertThat(c.data().train()).isNull();
    }

    @Test
    void modelPathReplacesTheDefaultPreset() {
        TrainConfig c = set("model.path=/models/qwen");
        assertThat(c.model().path()).isEqualTo(Path.of("/models/qwen"));
        assertThat(c.model().preset()).isNull();
        assertThat(errorOf("model.path=/models/qwen", "model.preset=tiny"))
                .contains("'model.path'").contains("'model.preset'");
    }

    @Test
    void listsAreYamlListsOrCommaText() throws IOException {
        assertThat(TrainConfig.load(yaml("optim:\n  betas: [0.85, 0.99]\n"), List.of()).optim().beta2()).isEqualTo(0.99);
        assertThat(TrainConfig.load(yaml("optim:\n  betas:\n    - 0.7\n    - 0.75\n"), List.of()).optim().beta1()).isEqualTo(0.7);
        assertThat(TrainConfig.load(yaml("optim:\n  betas: 0.6, 0.65\n"), List.of()).optim().beta2()).isEqualTo(0.65);
        assertThat(set("optim.betas= 0.9 , 0.999").optim().beta2()).isEqualTo(0.999);
        assertThat(errorOf("optim.betas=0.9")).isEqualTo("config key 'optim.betas' must be a list of 2 numbers, got 1 (0.9)");
        assertThat(errorOf("optim.betas=0.9,0.95,0.99")).startsWith("config key 'optim.betas' must be a list of 2 numbers");
        assertThat(errorOf("optim.betas=0.9,x")).startsWith("config key 'optim.betas' must be a list of 2 numbers");
    }

    @Test
    void unknownKeysAreNamedWithTheKnownOnes() {
        assertThat(errorOf("fsdp.stratgy=full_shard")).isEqualTo("unknown config key 'fsdp.stratgy'; known keys in fsdp: "
                + "strategy, shard_size, param_dtype, reduce_dtype, activation_checkpointing, cpu_offload, prefetch, "
                + "loss_scale, loss_scale_init, loss_scale_growth_interval, param_copy, fp8_recipe, "
                + "blocks_not_checkpointed, blocks_selective");
        assertThat(set("fsdp.param_copy=kept").fsdp().paramCopy()).isEqualTo(ParamCopy.KEPT);
        assertThat(TrainConfig.defaults().fsdp().paramCopy()).isEqualTo(ParamCopy.PER_GATHER);
        assertThat(errorOf("fsdp.param_copy=always")).startsWith("config key 'fsdp.param_copy'").contains("per_gather")
                .contains("kept");
        assertThat(errorOf("fsdpp.strategy=full_shard")).startsWith("unknown config key 'fsdpp'; known sections: model, data,");
        assertThat(errorOf("steps=3")).contains("unknown config key 'steps'").endsWith("did you mean 'train.steps'?");
    }

    @Test
    void unknownKeysInYamlAreFoundBeforeRangeChecks() throws IOException {
        Path file = yaml("fsdp:\n  stratgy: hybrid_shard\n  shard_size: 2\n");
        assertThatThrownBy(() -> TrainConfig.load(file, List.of()))
                .isInstanceOf(UserError.class).hasMessageStartingWith("unknown config key 'fsdp.stratgy'");
    }

    @Test
    void wrongTypesNameTheKeyAndTheValue() {
        assertThat(errorOf("train.steps=abc")).isEqualTo("config key 'train.steps' must be an integer, got 'abc'");
        assertThat(errorOf("train.steps=2.5")).isEqualTo("config key 'train.steps' must be an integer, got '2.5'");
        assertThat(errorOf("optim.lr=fast")).isEqualTo("config key 'optim.lr' must be a number, got 'fast'");
        assertThat(errorOf("optim.lr=NaN")).isEqualTo("config key 'optim.lr' must be a number, got 'NaN'");
        assertThat(errorOf("data.pack=maybe")).isEqualTo("config key 'data.pack' must be true or false, got 'maybe'");
        assertThat(errorOf("train.steps=99999999999")).startsWith("config key 'train.steps' must be an integer");
        assertThat(errorOf("train=5")).startsWith("config key 'train' must be a section");
        assertThat(errorOf("train.steps.max=5")).isEqualTo("config key 'train.steps' must be an integer, got a mapping");
    }

    @Test
    void closedSetsListTheirValues() {
        assertThat(errorOf("fsdp.strategy=zero3")).isEqualTo("config key 'fsdp.strategy' must be one of full_shard, "
                + "shard_grad_op, no_shard, hybrid_shard, hybrid_shard_zero2, got 'zero3'");
        assertThat(errorOf("fsdp.param_dtype=fp4")).isEqualTo("config key 'fsdp.param_dtype' must be one of bf16, fp32, "
                + "fp16, fp8, got 'fp4'");
        assertThat(errorOf("schedule.kind=step")).startsWith("config key 'schedule.kind' must be one of constant, cosine, linear");
        assertThat(errorOf("optim.decay=none")).startsWith("config key 'optim.decay' must be one of matrices, all");
        assertThat(errorOf("dist.device=tpu")).startsWith("config key 'dist.device' must be one of auto, cpu, cuda");
        assertThat(errorOf("fsdp.activation_checkpointing=some")).startsWith("config key 'fsdp.activation_checkpointing' must be one of");
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', textBlock = """
            train.steps=0              | train.steps
            train.batch_size=0         | train.batch_size
            train.grad_accum=0         | train.grad_accum
            optim.lr=0                 | optim.lr
            optim.lr=-1e-3             | optim.lr
            optim.betas=-0.1,0.9       | optim.betas
            optim.betas=0.9,1          | optim.betas
            optim.eps=0                | optim.eps
            optim.weight_decay=-0.1    | optim.weight_decay
            optim.max_grad_norm=-1     | optim.max_grad_norm
            schedule.warmup_steps=-1   | schedule.warmup_steps
            schedule.min_lr_ratio=1.5  | schedule.min_lr_ratio
            schedule.min_lr_ratio=-0.1 | schedule.min_lr_ratio
            dist.ranks=0               | dist.ranks
            dist.nnodes=0              | dist.nnodes
            dist.node_rank=1           | dist.node_rank
            data.seq_len=1             | data.seq_len
            fsdp.shard_size=-1         | fsdp.shard_size
            fsdp.shard_size=2          | fsdp.shard_size
            fsdp.prefetch=-1           | fsdp.prefetch
            fsdp.prefetch=9            | fsdp.prefetch
            fsdp.blocks_selective=-1   | fsdp.blocks_selective
            checkpoint.keep=0          | checkpoint.keep
            checkpoint.every=-1        | checkpoint.every
            checkpoint.every=10        | checkpoint.every
            checkpoint.resume=auto     | checkpoint.resume
            log.every=0                | log.every
            log.prometheus_port=70000  | log.prometheus_port
            """)
    void rangeErrorsNameTheKey(String override, String key) {
        assertThat(errorOf(override)).contains("'" + key + "'").doesNotContain("\n");
    }

    @Test
    void boundaryValuesAreAccepted() {
        TrainConfig c = set("optim.betas=0,0.999", "schedule.min_lr_ratio=1", "schedule.warmup_steps=0", "data.seq_len=2",
                "optim.weight_decay=0", "optim.max_grad_norm=0", "fsdp.strategy=hybrid_shard_zero2", "fsdp.shard_size=1",
                "dist.nnodes=2", "dist.node_rank=1");
        assertThat(c.optim().beta1()).isZero();
        assertThat(c.dist().worldSize()).isEqualTo(4);
    }

    @Test
    void malformedSetIsNamed() {
        assertThat(errorOf("train.steps")).isEqualTo("--set 'train.steps' has no '=': write --set train.steps=VALUE,"
                + " with no space around the '='");
        assertThat(errorOf("train..steps=1")).startsWith("malformed --set 'train..steps=1'");
        assertThat(errorOf("=1")).startsWith("malformed --set '=1'");
    }

    @Test
    void heldOutDataWithoutTrainingDataIsRefused() {
        assertThat(errorOf("data.eval=e.jsonl")).startsWith("config key 'data.eval' is set but 'data.train' is not");
    }

    @Test
    void fileErrorsNameTheFileAndTheLine() throws IOException {
        Path missing = dir.resolve("missing.yaml");
        assertThatThrownBy(() -> TrainConfig.load(missing, List.of()))
                .isInstanceOf(UserError.class).hasMessage("config file '" + missing + "' not found");
        Path latin1 = Files.write(dir.resolve("latin1.yaml"), new byte[] {'t', 'r', 'a', 'i', 'n', ':', ' ', (byte) 0xe9, '\n'});
        assertThatThrownBy(() -> TrainConfig.load(latin1, List.of()))
                .isInstanceOf(UserError.class).hasMessage("config file '" + latin1 + "' is not UTF-8 text; save it as UTF-8");
        Path broken = yaml("train:\n  steps: 3\n  batch_size: [1\n");
        assertThatThrownBy(() -> TrainConfig.load(broken, List.of()))
                .isInstanceOf(UserError.class)
                .hasMessageStartingWith("cannot parse config file '" + broken + "' at line 3: ")
                .hasMessageNotContaining("\n");
        Path duplicate = yaml("train:\n  steps: 3\n  steps: 4\n");
        assertThatThrownBy(() -> TrainConfig.load(duplicate, List.of()))
                .isInstanceOf(UserError.class).hasMessageContaining("at line 3").hasMessageContaining("steps");
        Path list = yaml("- train\n- steps\n");
        assertThatThrownBy(() -> TrainConfig.load(list, List.of()))
                .isInstanceOf(UserError.class).hasMessageContaining("must be a mapping of sections");
        assertThatThrownBy(() -> TrainConfig.load(dir, List.of()))
                .isInstanceOf(UserError.class).hasMessageContaining("'" + dir + "'");
    }

    @Test
    void anEmptyFileIsTheDefaults() throws IOException {
        assertThat(TrainConfig.load(yaml(""), List.of())).isEqualTo(TrainConfig.defaults());
        assertThat(TrainConfig.load(yaml("# nothing\n"), List.of())).isEqualTo(TrainConfig.defaults());
    }

    @Test
    void yamlRoundTripKeepsEveryKey() throws IOException {
        TrainConfig c = set("model.path=/m", "data.train=t.jsonl", "data.eval=e.jsonl", "data.seq_len=128",
                "data.pack=true", "train.steps=9", "train.batch_size=3", "train.grad_accum=4", "train.seed=7",
                "optim.lr=1e-4", "optim.betas=0.85,0.98", "optim.eps=1e-6", "optim.weight_decay=0.05", "optim.decay=all",
                "optim.max_grad_norm=0.5", "schedule.kind=constant", "schedule.warmup_steps=3",
                "schedule.min_lr_ratio=0.2", "fsdp.strategy=hybrid_shard", "fsdp.shard_size=2",
                "fsdp.param_dtype=bf16", "fsdp.reduce_dtype=bf16", "fsdp.activation_checkpointing=full",
                "fsdp.cpu_offload=true", "dist.device=cuda", "dist.ranks=8", "dist.nnodes=2", "dist.node_rank=1",
                "dist.rdzv=h:1", "checkpoint.dir=c", "checkpoint.every=5", "checkpoint.keep=3",
                "checkpoint.resume=c/step-5", "log.metrics=m.jsonl", "log.every=2", "log.prometheus_port=9100",
                "fsdp.param_copy=kept", "fsdp.blocks_not_checkpointed=1", "fsdp.blocks_selective=3",
                "attention.kernel=cudnn", "matmul.algorithm=timed");
        assertThat(TrainConfig.load(yaml(c.toYaml()), List.of())).isEqualTo(c);
        assertThat(c.checkpoint().resumePath()).isEqualTo(Path.of("c/step-5"));
        assertThat(TrainConfig.load(yaml(TrainConfig.defaults().toYaml()), List.of())).isEqualTo(TrainConfig.defaults());
    }

    @Test
    void blocksLeftOutOfCheckpointingNeedCheckpointing() {
        assertThat(set("fsdp.activation_checkpointing=full", "fsdp.blocks_not_checkpointed=4").fsdp()
                .blocksNotCheckpointed()).isEqualTo(4);
        assertThatThrownBy(() -> set("fsdp.blocks_not_checkpointed=4")).isInstanceOf(UserError.class)
                .hasMessage("config key 'fsdp.blocks_not_checkpointed' applies only where blocks are checkpointed"
                        + " (fsdp.activation_checkpointing is none); set fsdp.activation_checkpointing=full (or"
                        + " full_keep_attention, selective) or leave fsdp.blocks_not_checkpointed at 0");
        assertThatThrownBy(() -> set("fsdp.activation_checkpointing=full", "fsdp.blocks_not_checkpointed=-1"))
                .isInstanceOf(UserError.class).hasMessageContaining("fsdp.blocks_not_checkpointed");
    }

    @Test
    void automaticCheckpointingReadsBackAsAutoAndLeavesTheBlockCountsToTheRun() {
        FsdpSection auto = set("fsdp.activation_checkpointing=auto").fsdp();
        assertThat(auto.autoCheckpointing()).isTrue();
        // until the run decides, the engine would keep the least
        assertThat(auto.activationCheckpointing()).isEqualTo(ActivationCheckpointing.FULL);
        assertThat(auto.blocksNotCheckpointed()).isZero();
        TrainConfig c = set("fsdp.activation_checkpointing=AUTO");
        assertThat(((Map<?, ?>) c.toMap().get("fsdp")).get("activation_checkpointing")).isEqualTo("auto");
        assertThat(c.with()).isEqualTo(c);
        TrainConfig decided = c.with("fsdp.activation_checkpointing=full_keep_attention",
                "fsdp.blocks_not_checkpointed=2", "fsdp.blocks_selective=6");
        assertThat(decided.fsdp().autoCheckpointing()).isFalse();
        assertThat(decided.fsdp().blocksSelective()).isEqualTo(6);
        for (String count : List.of("fsdp.blocks_not_checkpointed=2", "fsdp.blocks_selective=3")) {
            assertThat(errorOf("fsdp.activation_checkpointing=auto", count)).isEqualTo(
                    "fsdp.activation_checkpointing=auto chooses fsdp.blocks_not_checkpointed and fsdp.blocks_selective"
                            + " itself; leave them at 0, or name a mode (full, full_keep_attention, selective, none)"
                            + " to set them");
        }
        assertThat(errorOf("fsdp.activation_checkpointing=some")).isEqualTo("config key"
                + " 'fsdp.activation_checkpointing' must be one of auto, none, full, full_keep_attention, selective,"
                + " got 'some'");
    }

    @Test
    void blocksCheckpointedSelectivelyNeedWholeBlocksRecomputed() {
        assertThat(TrainConfig.defaults().fsdp().blocksSelective()).isZero();
        assertThat(set("fsdp.activation_checkpointing=full_keep_attention", "fsdp.blocks_selective=5").fsdp()
                .blocksSelective()).isEqualTo(5);
        FsdpSection both = set("fsdp.activation_checkpointing=full", "fsdp.blocks_not_checkpointed=2",
                "fsdp.blocks_selective=5").fsdp();
        assertThat(both.blocksNotCheckpointed()).isEqualTo(2);
        assertThat(both.blocksSelective()).isEqualTo(5);
        assertThat(set("fsdp.activation_checkpointing=selective", "fsdp.blocks_selective=0").fsdp().blocksSelective())
                .isZero();
        for (String mode : List.of("none", "selective")) {
            assertThat(errorOf("fsdp.activation_checkpointing=" + mode, "fsdp.blocks_selective=3"))
                    .isEqualTo("config key 'fsdp.blocks_selective' applies only where whole blocks are recomputed"
                            + " (fsdp.activation_checkpointing is " + mode + "); set"
                            + " fsdp.activation_checkpointing=full_keep_attention (or full) or leave"
                            + " fsdp.blocks_selective at 0");
        }
        assertThat(errorOf("fsdp.activation_checkpointing=full", "fsdp.blocks_selective=-1"))
                .contains("'fsdp.blocks_selective'").doesNotContain("\n");
        TrainConfig c = set("fsdp.activation_checkpointing=full", "fsdp.blocks_selective=7");
        assertThat(((Map<?, ?>) c.toMap().get("fsdp")).get("blocks_selective")).isEqualTo(7);
        assertThat(io.fsdp4j.fsdp.FsdpPolicy.of(c.fsdp()).blocksSelective()).isEqualTo(7);
    }

    @Test
    void toMapAndJsonUseTheUserSpelling() {
        Map<String, Object> map = set("fsdp.strategy=no_shard").toMap();
        assertThat(map).containsOnlyKeys("model", "data", "train", "optim", "schedule", "fsdp", "dist", "checkpoint", "log",
                "run", "lora", "attention", "matmul");
        assertThat(map.get("fsdp")).isEqualTo(Map.ofEntries(Map.entry("strategy", "no_shard"),
                Map.entry("shard_size", 0), Map.entry("param_dtype", "fp32"), Map.entry("reduce_dtype", "fp32"),
                Map.entry("activation_checkpointing", "none"), Map.entry("cpu_offload", false),
                Map.entry("prefetch", 1),
                Map.entry("loss_scale", "none"), Map.entry("loss_scale_init", 65536.0),
                Map.entry("loss_scale_growth_interval", 2000), Map.entry("param_copy", "per_gather"),
                Map.entry("fp8_recipe", "tensorwise"), Map.entry("blocks_not_checkpointed", 0),
                Map.entry("blocks_selective", 0)));
        assertThat(((Map<?, ?>) map.get("optim")).get("betas")).isEqualTo(List.of(0.9, 0.95));
        String json = TrainConfig.defaults().toJson();
        assertThat(json).startsWith("{\"model\":{\"path\":null,\"preset\":\"tiny\",\"layers\":0}")
                .contains("\"strategy\":\"full_shard\"").doesNotContain("\n");
        assertThat(TrainConfig.keys()).hasSize(73).startsWith("model.path", "model.preset", "model.layers").endsWith("attention.kernel", "attention.deterministic", "matmul.algorithm")
                .contains("fsdp.activation_checkpointing", "fsdp.param_copy", "optim.betas", "dist.exclude_unhealthy", "dist.share_gpu");
        assertThat(set("dist.share_gpu=true").dist().shareGpu()).isTrue();
        assertThat(TrainConfig.defaults().dist().shareGpu()).isFalse();
        // per-device rates: ranks sharing a GPU count one device; CPU ranks, or GPUs of their own, one each
        assertThat(set("dist.share_gpu=true").dist().devicesFor(4, true)).isEqualTo(1);
        assertThat(set("dist.share_gpu=true").dist().devicesFor(4, false)).isEqualTo(4);
        assertThat(TrainConfig.defaults().dist().devicesFor(4, true)).isEqualTo(4);
    }

    @Test
    void modelLayersTakesThePresetsFirstBlocksOnly() {
        assertThat(set("model.preset=qwen2.5-7b", "model.layers=4").model().layers()).isEqualTo(4);
        assertThatThrownBy(() -> set("model.layers=-1")).isInstanceOf(UserError.class)
                .hasMessageContaining("'model.layers' must be at least 1");
        assertThatThrownBy(() -> set("model.path=some/dir", "model.layers=2")).isInstanceOf(UserError.class)
                .hasMessageContaining("applies to a model.preset only");
    }

    @Test
    void enumsParseCaseInsensitivelyAndPrintLowerCase() {
        assertThat(set("fsdp.strategy=SHARD_GRAD_OP").fsdp().strategy()).isEqualTo(ShardingStrategy.SHARD_GRAD_OP);
        assertThat(ShardingStrategy.HYBRID_SHARD_ZERO2.spelling()).isEqualTo("hybrid_shard_zero2");
        assertThat(ShardingStrategy.HYBRID_SHARD_ZERO2).hasToString("hybrid_shard_zero2");
        assertThat(ShardingStrategy.HYBRID_SHARD_ZERO2.hybrid()).isTrue();
        assertThat(ShardingStrategy.HYBRID_SHARD_ZERO2.reshardAfterForward()).isFalse();
        assertThat(ShardingStrategy.FULL_SHARD.reshardAfterForward()).isTrue();
        assertThat(Precision.BF16).hasToString("bf16");
    }

    @Test
    void aSetWithoutAnEqualsSignIsNamedBeforeTheFileIsRead() {
        // picocli gives 'train.steps' to --set and '5' to the config file: the --set is what is wrong
        assertThatThrownBy(() -> TrainConfig.load(Path.of("5"), List.of("train.steps")))
                .isInstanceOf(UserError.class).hasMessageStartingWith("--set 'train.steps' has no '='");
    }

    @Test
    void dottedKeysInYamlAreTheNestedForm() throws IOException {
        TrainConfig c = TrainConfig.load(yaml("""
                model.preset: qwen2.5-1.5b
                train.steps: 7
                train:
                  batch_size: 3
                optim:
                  betas.x: 1
                """.replace("  betas.x: 1\n", "")), List.of());
        assertThat(c.model().preset()).isEqualTo("qwen2.5-1.5b");
        assertThat(c.train().steps()).isEqualTo(7);
        assertThat(c.train().batchSize()).isEqualTo(3);
        assertThatThrownBy(() -> TrainConfig.load(yaml("train.steps: 7\ntrain:\n  steps: 8\n"), List.of()))
                .isInstanceOf(UserError.class).hasMessageContaining("'train.steps' is given twice");
        assertThatThrownBy(() -> TrainConfig.load(yaml("model.pressed: tiny\n"), List.of()))
                .isInstanceOf(UserError.class).hasMessageStartingWith("unknown config key 'model.pressed'");
    }

    @Test
    void everyUnknownKeyIsNamedAtOnceWithTheKeyMeant() throws IOException {
        Path file = yaml("""
                train:
                  max_steps: 10
                  gradient_accumulation_steps: 4
                  micro_batch_size: 2
                learning_rate: 2e-5
                optim:
                  warmup_steps: 3
                save_steps: 100
                report_to: tensorboard
                colour: blue
                """);
        assertThatThrownBy(() -> TrainConfig.load(file, List.of()))
                .isInstanceOf(UserError.class)
                .hasMessageStartingWith("unknown config keys ")
                .hasMessageContaining("'train.max_steps' (did you mean 'train.steps'?)")
                .hasMessageContaining("'train.gradient_accumulation_steps' (did you mean 'train.grad_accum'?)")
                .hasMessageContaining("'train.micro_batch_size' (did you mean 'train.batch_size'?)")
                .hasMessageContaining("'learning_rate' (did you mean 'optim.lr'?)")
                .hasMessageContaining("'report_to' (did you mean 'log.tensorboard'?)")
                .hasMessageContaining("'optim.warmup_steps' (did you mean 'schedule.warmup_steps'?)")
                .hasMessageContaining("'save_steps' (did you mean 'checkpoint.every'?)")
                .hasMessageContaining("'colour';")
                .hasMessageNotContaining("\n");
        assertThat(errorOf("train.per_device_train_batch_size=2")).endsWith("did you mean 'train.batch_size'?");
        assertThat(errorOf("num_train_epochs=3")).endsWith("did you mean 'train.epochs'?");
        assertThat(errorOf("warmup_ratio=0.03")).endsWith("did you mean 'schedule.warmup_ratio'?");
        assertThat(errorOf("output_dir=out")).endsWith("did you mean 'run.dir'?");
        // a wrong value beside an unknown key: the unknown key is named first, whatever the order
        assertThat(errorOf("train.steps=abc", "optim.learning_rate=1")).startsWith("unknown config key 'optim.learning_rate'");
    }

    @Test
    void aScalarWhereASectionBelongsIsRefused() throws IOException {
        assertThatThrownBy(() -> TrainConfig.load(yaml("train: 5\n"), List.of()))
                .isInstanceOf(UserError.class).hasMessageStartingWith("config key 'train' must be a section");
        assertThatThrownBy(() -> TrainConfig.load(yaml("train:\n  steps: 5\nlog: metrics.jsonl\n"), List.of()))
                .isInstanceOf(UserError.class).hasMessageStartingWith("config key 'log' must be a section");
    }

    @Test
    void aByteOrderMarkIsSkipped() throws IOException {
        Path file = dir.resolve("bom.yaml");
        Files.writeString(file, "\uFEFFtrain:\n  steps: 6\n");
        assertThat(TrainConfig.load(file, List.of()).train().steps()).isEqualTo(6);
    }

    @Test
    void aFineTuneGetsAFineTunesDefaultsAndAPresetKeepsTheDemos() {
        TrainConfig preset = TrainConfig.load(null, List.of("data.train=t.jsonl"), 8, null);
        assertThat(preset.optim().lr()).isEqualTo(3e-3);
        assertThat(preset.data().seqLen()).isEqualTo(64);
        assertThat(preset.dist().ranks()).isEqualTo(2);
        assertThat(preset.fsdp().paramDtype()).isEqualTo(Precision.FP32);
        assertThat(preset.schedule().warmupFor(100)).isEqualTo(10);

        TrainConfig onCpu = TrainConfig.load(null, List.of("model.path=/m", "data.train=t.jsonl"), 0, null);
        assertThat(onCpu.optim().lr()).isEqualTo(2e-5);
        assertThat(onCpu.data().autoSeqLen()).isTrue();
        assertThat(onCpu.schedule().warmupRatio()).isEqualTo(0.03);
        assertThat(onCpu.schedule().warmupFor(1000)).isEqualTo(30);
        assertThat(onCpu.schedule().warmupFor(10)).isEqualTo(1);
        assertThat(onCpu.fsdp().paramDtype()).isEqualTo(Precision.FP32);
        assertThat(onCpu.dist().ranks()).isEqualTo(2);
        assertThat(onCpu.toMap().get("data")).extracting(m -> ((Map<?, ?>) m).get("seq_len")).isEqualTo("auto");

        assertThat(onCpu.fsdp().autoCheckpointing()).isFalse();
        assertThat(onCpu.fsdp().activationCheckpointing()).isEqualTo(ActivationCheckpointing.NONE);

        TrainConfig onGpus = TrainConfig.load(null, List.of("model.path=/m", "data.train=t.jsonl"), 8, null);
        assertThat(onGpus.fsdp().paramDtype()).isEqualTo(Precision.BF16);
        assertThat(onGpus.dist().ranks()).isEqualTo(8);
        assertThat(onGpus.fsdp().autoCheckpointing()).isTrue(); // decided at the run's start: MemoryFit
        assertThat(onGpus.fsdp().autoParamCopy()).isTrue();
        assertThat(onGpus.fsdp().paramCopy()).isEqualTo(ParamCopy.PER_GATHER); // until decided
        assertThat(onCpu.fsdp().autoParamCopy()).isFalse();
        assertThat(((Map<?, ?>) onGpus.toMap().get("fsdp")).get("param_copy")).isEqualTo("auto");
        assertThat(preset.fsdp().autoCheckpointing()).isFalse();
        assertThat(TrainConfig.load(null, List.of("model.path=/m", "fsdp.activation_checkpointing=full"), 8, null)
                .fsdp().autoCheckpointing()).isFalse();
        // what the user gives wins; a warmup in steps replaces the default ratio
        TrainConfig given = TrainConfig.load(null, List.of("model.path=/m", "optim.lr=1e-4", "fsdp.param_dtype=fp32",
                "dist.ranks=4", "data.seq_len=512", "schedule.warmup_steps=5"), 8, null);
        assertThat(given.optim().lr()).isEqualTo(1e-4);
        assertThat(given.fsdp().paramDtype()).isEqualTo(Precision.FP32);
        assertThat(given.dist().ranks()).isEqualTo(4);
        assertThat(given.data().seqLen()).isEqualTo(512);
        assertThat(given.schedule().warmupFor(1000)).isEqualTo(5);
        // the resolved config reads back to itself
        assertThat(onGpus.with()).isEqualTo(onGpus);
        assertThat(errorOf("schedule.warmup_steps=5", "schedule.warmup_ratio=0.1")).contains("both set");
        assertThat(errorOf("data.seq_len=big")).isEqualTo("config key 'data.seq_len' must be an integer or auto, got 'big'");
    }

    @Test
    void epochsReplaceStepsAndCountThemFromTheData() {
        TrainConfig c = set("train.epochs=2", "train.batch_size=4", "train.grad_accum=2");
        assertThat(c.train().steps()).isZero();
        assertThat(c.train().stepsFor(100, 2)).isEqualTo(13); // 200 sequences, 16 a step
        assertThat(set("train.steps=7").train().stepsFor(100, 2)).isEqualTo(7);
        assertThat(errorOf("train.epochs=2", "train.steps=10")).contains("'train.steps' (10) and 'train.epochs' (2)");
        assertThat(errorOf("train.epochs=-1")).contains("'train.epochs' must be >= 0");
    }

    @Test
    void aRunDirectoryHoldsEveryOutputThatIsNotGivenElsewhere() throws IOException {
        var start = java.time.Instant.parse("2026-11-25T14:30:00Z");
        TrainConfig c = TrainConfig.load(null, List.of("model.preset=qwen2.5-0.5b"), 0, start);
        assertThat(c.run().dir()).isEqualTo(Path.of("runs/qwen2.5-0.5b-20261125-143000"));
        assertThat(c.checkpoint().dir()).isEqualTo(Path.of("runs/qwen2.5-0.5b-20261125-143000/checkpoints"));
        assertThat(c.log().metrics()).isEqualTo(Path.of("runs/qwen2.5-0.5b-20261125-143000/metrics.jsonl"));
        TrainConfig named = TrainConfig.load(null, List.of("model.path=/models/Qwen2.5-7B", "run.name=sft"), 0, start);
        assertThat(named.run().dir()).isEqualTo(Path.of("runs/sft"));
        assertThat(TrainConfig.load(null, List.of("model.path=/models/Qwen2.5-7B"), 0, start).run().dir())
                .isEqualTo(Path.of("runs/qwen2.5-7b-20261125-143000"));
        // each output key given wins; one given empty stays off
        TrainConfig own = TrainConfig.load(yaml("run:\n  dir: out\ncheckpoint:\n  dir: /ck\nlog:\n  metrics: ~\n"),
                List.of(), 0, start);
        assertThat(own.run().dir()).isEqualTo(Path.of("out"));
        assertThat(own.checkpoint().dir()).isEqualTo(Path.of("/ck"));
        assertThat(own.log().metrics()).isNull();
        // without a run start (tests, other commands) nothing is defaulted
        assertThat(TrainConfig.defaults().run().dir()).isNull();
        assertThat(TrainConfig.defaults().checkpoint().dir()).isNull();
        assertThat(errorOf("run.name=a/b")).startsWith("config key 'run.name' must be a name, not a path");
    }

    @Test
    void tensorboardIsADirectoryOrTrueForOneInTheRunDirectory() throws IOException {
        Instant start = Instant.parse("2026-11-25T14:30:00Z");
        assertThat(TrainConfig.defaults().log().tensorboard()).isNull();
        assertThat(TrainConfig.load(null, List.of("log.tensorboard=true"), 0, start).log().tensorboard())
                .isEqualTo(Path.of("runs/tiny-20261125-143000/tensorboard"));
        assertThat(TrainConfig.load(yaml("log:\n  tensorboard: true\nrun:\n  dir: out\n"), List.of()).log()
                .tensorboardDir()).isEqualTo(Path.of("out/tensorboard"));
        assertThat(set("log.tensorboard=tb/runs").log().tensorboardDir()).isEqualTo(Path.of("tb/runs"));
        assertThat(set("log.tensorboard=false").log().tensorboard()).isNull();
        assertThat(TrainConfig.load(yaml("log:\n  tensorboard: false\n"), List.of()).log().tensorboard()).isNull();
        // no run.dir: beside the metrics file, as the plots
        assertThat(set("log.metrics=m/metrics.jsonl", "log.tensorboard=true").log().tensorboardDir())
                .isEqualTo(Path.of("m/tensorboard"));
        // neither known (a job of several processes that names no run): refused where the run would write
        TrainConfig unknown = set("log.tensorboard=true");
        assertThatThrownBy(() -> unknown.log().tensorboardDir()).isInstanceOf(UserError.class)
                .hasMessageStartingWith("log.tensorboard=true puts event files in run.dir/tensorboard, but this run has "
                        + "no run.dir");
        // the resolved config reads back as it was
        assertThat(TrainConfig.load(yaml(unknown.toYaml()), List.of())).isEqualTo(unknown);
        TrainConfig resolved = TrainConfig.load(null, List.of("log.tensorboard=true"), 0, start);
        assertThat(TrainConfig.load(yaml(resolved.toYaml()), List.of())).isEqualTo(resolved);
    }

    @Test
    void chatTemplateTimeoutIsSecondsAboveZero() {
        assertThat(TrainConfig.defaults().data().chatTemplateTimeout()).isEqualTo(DataSection.CHAT_TEMPLATE_TIMEOUT)
                .isEqualTo(io.fsdp4j.tokenizer.ChatTemplate.DEFAULT_TIME_LIMIT_SECONDS);
        assertThat(set("data.chat_template_timeout=2.5").data().chatTemplateTimeout()).isEqualTo(2.5);
        assertThat(errorOf("data.chat_template_timeout=0")).isEqualTo("config key 'data.chat_template_timeout' must be"
                + " a number of seconds > 0, got 0.0");
    }
}
