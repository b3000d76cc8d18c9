package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.Golden;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.ParamCopy;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.DeviceAllocator;
import io.fsdp4j.fsdp.LoraGoldenTest;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.plan.MemoryModel.Part;
import io.fsdp4j.train.RankMemory;
import io.fsdp4j.train.TrainingJob;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The plan of a LoRA run: the base frozen in fsdp.param_dtype (its shards only), the adapters with fp32 masters,
 * gradients and AdamW moments. The state it predicts is the state the CPU ranks of the same job hold, byte for byte
 * ({@code FsdpModel.shardBytes}, AdamW's {@code stateBytes}); on a 7B model it is a fraction of full training's, and
 * the plan's text and JSON say what trains.
 */
class LoraPlanTest {

    /**
     * 12 steps of the LoRA fixture of {@code model} on CPU ranks; each rank's state against the plan's. With
     * {@code fsdp.param_copy: kept} the trained shards (the adapters', or every unit's with lora.rank 0) hold their
     * masters' bf16 copies too, but not in fp32 or offloaded.
     */
    @ParameterizedTest(name = "{0}: {1} on {2} ranks (shard size {3}), {4}, offload {5}, lora.rank {6}, {7}")
    @CsvSource({"qwen2,full_shard,2,0,bf16,false,4,per_gather", "qwen2,shard_grad_op,4,0,fp32,false,4,per_gather",
            "qwen2,hybrid_shard,4,2,bf16,false,4,per_gather", "qwen2,full_shard,2,0,bf16,true,4,per_gather",
            "qwen2,no_shard,2,0,bf16,false,4,per_gather", "phi3,full_shard,4,0,bf16,false,4,per_gather",
            "bloom,full_shard,2,0,fp32,true,4,per_gather", "gemma2,full_shard,2,0,bf16,false,4,per_gather",
            "qwen2,full_shard,2,0,bf16,false,0,per_gather", "qwen2,full_shard,2,0,bf16,false,4,kept",
            "qwen2,no_shard,2,0,bf16,false,0,kept", "qwen2,hybrid_shard,4,2,bf16,false,0,kept",
            "qwen2,full_shard,2,0,bf16,true,0,kept", "qwen2,full_shard,2,0,fp32,false,4,kept"})
    void theStateThePlanPredictsIsWhatTheRanksHold(String model, String strategy, int ranks, int shardSize,
                                                   String dtype, boolean offload, int rank, String copy) {
        List<String> sets = new java.util.ArrayList<>(LoraGoldenTest.layout(strategy, ranks, shardSize));
        sets.addAll(List.of("fsdp.param_dtype=" + dtype, "fsdp.cpu_offload=" + offload, "lora.rank=" + rank,
                "lora.alpha=8", "lora.target_modules=all-linear", "train.steps=1", "fsdp.param_copy=" + copy));
        TrainingJob.Result result = LoraGoldenTest.train(model, sets);

        ModelConfig config = Golden.config(model);
        TrainConfig train = TrainConfig.load(null, sets);
        ModelShape shape = ModelShape.of(config, LoraSpec.of(train.lora(), config));
        MemoryModel.State state = plannedState(shape, train, ranks, shardSize);
        assertRanksHold(result, state, ranks);
        for (RankMemory m : result.memory()) {
            assertThat(state.hostBytes()).isEqualTo(offload ? 4 * m.gradBytes() : 0); // masters, gradients, moments
        }
        if (rank > 0) { // the base has no gradient: a gradient shard is the adapters' alone
            assertThat(state.grads()).isLessThan(4 * shape.frozenShardNumel(1,
                    sharding(train, ranks, shardSize).shardSize()));
        }
    }

    /**
     * The plan's state of a rank for {@code train} on {@code ranks} GPUs of one node, or of ranks / shardSize nodes
     * (shardSize 0: one node), at the CPU ranks' workload of these tests (16 tokens, 4 sequences a step over the ranks,
     * no activation checkpointing, fp32 reduction, {@code fsdp.cpu_offload} as configured).
     */
    static MemoryModel.State plannedState(ModelShape shape, TrainConfig train, int ranks, int shardSize) {
        Workload w = new Workload(16, 4 / ranks, ActivationCheckpointing.NONE, train.fsdp().paramDtype(),
                Precision.FP32, train.fsdp().cpuOffload()).withParamCopy(train.fsdp().paramCopy());
        return MemoryModel.state(shape, w, sharding(train, ranks, shardSize));
    }

    /** {@code train}'s strategy over {@code ranks} GPUs of one node, or of ranks / shardSize nodes (0: one node). */
    private static Sharding sharding(TrainConfig train, int ranks, int shardSize) {
        int nodes = shardSize == 0 ? 1 : ranks / shardSize;
        return Sharding.of(train.fsdp().strategy(), Cluster.of(GpuSpec.h200(), nodes, ranks / nodes, 0, 50e9));
    }

    /** Every one of the {@code ranks} ranks holds the parameter, gradient and optimizer bytes of {@code state}. */
    static void assertRanksHold(TrainingJob.Result result, MemoryModel.State state, int ranks) {
        assertThat(result.memory()).hasSize(ranks);
        for (RankMemory m : result.memory()) {
            assertThat(m.paramBytes()).as("rank %d parameter bytes", m.rank()).isEqualTo(state.params());
            assertThat(m.gradBytes()).as("rank %d gradient bytes", m.rank()).isEqualTo(state.grads());
            assertThat(m.optimizerBytes()).as("rank %d optimizer bytes", m.rank()).isEqualTo(state.optimizer());
        }
    }

    /** Qwen2.5-7B, rank 16 on every linear, 8 GPUs: the base's 2 bytes a parameter, the adapters' 16. */
    @Test
    void aLoraPlanHoldsTheBaseInTwoBytesAParameter() {
        ModelConfig config = ModelConfig.qwen25_7b();
        LoraSpec lora = new LoraSpec(16, 2.0, LoraSpec.linears(config.architecture()));
        ModelShape full = ModelShape.of(config), adapted = ModelShape.of(config, lora);
        Sharding eight = Sharding.of(ShardingStrategy.FULL_SHARD, Cluster.of(GpuSpec.h200(), 1, 8, 0, 50e9));
        Workload w = Workload.benchmark();
        MemoryModel.Estimate e = MemoryModel.estimate(adapted, w, eight), f = MemoryModel.estimate(full, w, eight);
        // 28 blocks of r * (in + out) per linear: 40,370,176 adapter parameters
        assertThat(adapted.trainableParameters()).isEqualTo(40_370_176L);
        assertThat(adapted.parameters()).isEqualTo(full.parameters() + adapted.trainableParameters());
        long base = 0, classes = 0;
        for (int u = 0; u <= adapted.headUnit(); u++) {
            base += DeviceAllocator.sizeClass(2 * adapted.frozenShardNumel(u, 8));
            long adapters = adapted.trainableShardNumel(u, 8); // none in the embeddings and the head
            classes += adapters == 0 ? 0 : DeviceAllocator.sizeClass(4 * adapters);
        }
        assertThat(e.part(Part.PARAMS)).isEqualTo(base + classes);
        assertThat(e.part(Part.GRADS)).isEqualTo(classes);
        assertThat(e.part(Part.OPTIMIZER)).isEqualTo(2 * classes);
        assertThat(e.part(Part.PARAMS) + e.part(Part.GRADS) + e.part(Part.OPTIMIZER)).as("state")
                .isLessThan((f.part(Part.PARAMS) + f.part(Part.GRADS) + f.part(Part.OPTIMIZER)) / 7);
        assertThat(e.reserved()).isLessThan(f.reserved());
        // the frozen head and blocks reduce nothing, the adapters little: less reduce-scatter time
        var cluster = Cluster.of(GpuSpec.h200(), 1, 8, 0, 50e9);
        var adaptedComm = StepSimulator.CommTimes.of(adapted, w, eight, cluster);
        var fullComm = StepSimulator.CommTimes.of(full, w, eight, cluster);
        assertThat(adaptedComm.reduceScatter()[adapted.headUnit()]).isZero();
        assertThat(adaptedComm.reduceScatter()[1]).isLessThan(fullComm.reduceScatter()[1] / 10);
    }

    /**
     * docs/benchmarks.md (2026-11-25, second session): LoRA rank 16, alpha 32, every linear of Qwen2.5-7B, seq 2048,
     * batch 1, full checkpointing, one H200: 14.8 GiB of state on the device, 21.2 GiB peak reserved. The plan's
     * state within 1%; its reserved memory 5% under: each adapter's temporaries (its product of the linear's width
     * W, N x W, in the forward and again in the backward) are not in the model's activation sizes.
     */
    @Test
    void matchesTheMeasuredLoraRun() {
        ModelConfig config = ModelConfig.qwen25_7b();
        ModelShape adapted = ModelShape.of(config, new LoraSpec(16, 2.0, LoraSpec.linears(config.architecture())));
        MemoryModel.Estimate e = MemoryModel.estimate(adapted, Workload.benchmark(),
                Sharding.of(ShardingStrategy.FULL_SHARD, Cluster.of(GpuSpec.h200(), 1, 1, 0, 50e9)));
        double gib = 1L << 30;
        assertThat((e.part(Part.PARAMS) + e.part(Part.GRADS) + e.part(Part.OPTIMIZER)) / gib)
                .isCloseTo(14.8, org.assertj.core.data.Offset.offset(0.01 * 14.8));
        assertThat(e.reserved() / gib).isBetween(0.93 * 21.2, 21.2);
    }

    /**
     * Under LoRA only the adapters' masters are rounded for the gathers (the frozen base is held in bf16 and sent as
     * it is) and only their shards have a gradient norm and an AdamW update (4 + 28 bytes a shard element); with a
     * kept copy the rounding goes and AdamW writes 2 bytes more.
     */
    @Test
    void aLoraStepRoundsAndUpdatesOnlyTheAdapters() {
        ModelConfig config = ModelConfig.qwen25_7b();
        ModelShape full = ModelShape.of(config);
        ModelShape adapted = ModelShape.of(config, new LoraSpec(16, 2.0, LoraSpec.linears(config.architecture())));
        GpuSpec gpu = GpuSpec.h200();
        var cal = ComputeModel.Calibration.h200();
        for (int gpus : new int[] {1, 8}) {
            Sharding sharding = Sharding.of(ShardingStrategy.FULL_SHARD, Cluster.of(gpu, 1, gpus, 0, 50e9));
            long adapters = 0;
            for (int u = 0; u <= adapted.headUnit(); u++) {
                adapters += adapted.trainableShardNumel(u, gpus);
            }
            double perByte = cal.slowdown() / gpu.hbmBytesPerSecond();
            for (Workload w : List.of(Workload.benchmark(), Workload.benchmark().withParamCopy(ParamCopy.KEPT))) {
                var lora = ComputeModel.stageTimes(adapted, w, sharding, gpu, cal);
                var trained = ComputeModel.stageTimes(full, w, sharding, gpu, cal);
                assertThat(lora.tail()).as("%s on %d", w.paramCopy(), gpus)
                        .isCloseTo((4 + 28 + (w.keptCopy() ? 2 : 0)) * adapters * perByte, within(1e-12));
                // the embeddings are frozen whole: the lookup alone, no rounding of their shard
                double rounding = w.keptCopy() ? 0 : 6.0 * full.shardNumel(0, gpus) * perByte;
                assertThat(trained.forward()[0] - lora.forward()[0]).isCloseTo(rounding, within(1e-12));
            }
        }
    }

    @Test
    void theTextAndJsonSayWhatTrains() throws Exception {
        String[] args = {"plan", "--model", "qwen2.5-7b", "--gpus-per-node", "8", "--gpu-counts", "8", "--seq", "2048",
            "--batch", "1", "--param-dtype", "bf16", "--set",
            "lora.rank=16", "--set", "lora.alpha=32", "--set", "lora.target_modules=all-linear"};
        String text = run(args);
        assertThat(text).contains(String.format(Locale.ROOT, "lora: rank 16 (scaling 2.0) on q_proj, k_proj, v_proj, "
                + "o_proj, gate_proj, up_proj, down_proj: 40,370,176 trainable parameters (0.53%%); the base frozen in "
                + "bf16 (its shards only: no master, gradient or optimizer state), the adapters with fp32 masters, "
                + "gradients and AdamW moments"));
        String[] jsonArgs = java.util.Arrays.copyOf(args, args.length + 1);
        jsonArgs[args.length] = "--json";
        JsonNode json = new ObjectMapper().readTree(run(jsonArgs));
        assertThat(json.get("lora").get("rank").intValue()).isEqualTo(16);
        assertThat(json.get("lora").get("trainable_parameters").longValue()).isEqualTo(40_370_176L);
        assertThat(json.get("lora").get("frozen_dtype").asText()).isEqualTo("bf16");
        JsonNode plain = new ObjectMapper().readTree(run("plan", "--model", "qwen2.5-7b", "--gpus-per-node", "8",
                "--gpu-counts", "8", "--json"));
        assertThat(plain.has("lora")).isFalse();
        assertThat(json.get("lora").get("trained_state").asText())
                .isEqualTo("fp32 master, gradient and two AdamW moments");
        // fsdp.param_copy kept: the adapters' masters keep their bf16 copies too
        String[] keptArgs = java.util.Arrays.copyOf(jsonArgs, jsonArgs.length + 2);
        keptArgs[jsonArgs.length] = "--param-copy";
        keptArgs[jsonArgs.length + 1] = "kept";
        assertThat(new ObjectMapper().readTree(run(keptArgs)).get("lora").get("trained_state").asText())
                .isEqualTo("fp32 master, gradient and two AdamW moments, and the master's kept copy in param_dtype");
        String[] keptText = java.util.Arrays.copyOf(args, args.length + 2);
        keptText[args.length] = "--param-copy";
        keptText[args.length + 1] = "kept";
        assertThat(run(keptText))
                .contains("the adapters with fp32 masters, gradients and AdamW moments, and their masters' kept "
                        + "copies");
        double adaptedGrads = json.get("predictions").get(0).get("memory_gib").get("grads").doubleValue();
        double fullGrads = plain.get("predictions").get(0).get("memory_gib").get("grads").doubleValue();
        assertThat(adaptedGrads).isLessThan(fullGrads / 100);
        // a module the family lacks: one error line
        PlanCommandTest.Run r = PlanCommandTest.run("plan", "--model", "phi-3-mini", "--set", "lora.rank=8", "--set",
                "lora.target_modules=q_proj");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.err()).startsWith("error: config key 'lora.target_modules': "
                + "Phi3ForCausalLM has no linear q_proj").hasLineCount(1);
    }

    private static String run(String... args) {
        PlanCommandTest.Run r = PlanCommandTest.run(args);
        assertThat(r.status()).as(r.err()).isZero();
        return r.out();
    }
}
