package io.fsdp4j.plan;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.fsdp.LoraGoldenTest;
import io.fsdp4j.fsdp.QloraGoldenTest;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.plan.MemoryModel.Part;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The plan of a QLoRA run ({@code lora.quantize: nf4}): each block's linears in NF4 (32 bytes of codes and a 4-byte
 * absmax a block of 64, whole blocks a rank), the rest of the base in fsdp.param_dtype. The state it predicts is what
 * the CPU ranks of the same job hold, byte for byte; on a 7B model the base takes about a quarter of bf16's bytes and
 * its all-gathers less time.
 */
class QloraPlanTest {

    @ParameterizedTest(name = "{0} on {1} ranks (shard size {2}), {3}, offload {4}")
    @CsvSource({"full_shard,2,0,bf16,false", "shard_grad_op,4,0,fp32,false", "hybrid_shard,4,2,bf16,false",
            "full_shard,2,0,fp32,true", "no_shard,2,0,bf16,false", "full_shard,1,0,bf16,false"})
    void theStateThePlanPredictsIsWhatTheRanksHold(String strategy, int ranks, int shardSize, String dtype,
                                                   boolean offload) {
        List<String> sets = new ArrayList<>(LoraGoldenTest.layout(strategy, ranks, shardSize));
        sets.addAll(List.of("fsdp.param_dtype=" + dtype, "fsdp.cpu_offload=" + offload, "train.steps=1"));
        TrainingJob.Result result = QloraGoldenTest.train(sets);
        List<String> all = new ArrayList<>(QloraGoldenTest.settings());
        all.addAll(sets);
        TrainConfig train = TrainConfig.load(null, all);
        ModelConfig config = io.fsdp4j.Golden.config("qwen2");
        ModelShape shape = ModelShape.of(config, LoraSpec.of(train.lora(), config), train.lora().quantized());
        MemoryModel.State state = LoraPlanTest.plannedState(shape, train, ranks, shardSize);
        MemoryModel.State unquantized = LoraPlanTest.plannedState(
                ModelShape.of(config, LoraSpec.of(train.lora(), config)), train, ranks, shardSize);
        assertThat(state.params()).isLessThan(unquantized.params());
        LoraPlanTest.assertRanksHold(result, state, ranks);
    }

    /** Qwen2.5-7B, rank 16 on every linear, 8 GPUs: the linears at 4.5 bits against bf16's 16, quicker gathers. */
    @Test
    void aQloraPlanHoldsTheLinearsInFourAndAHalfBits() throws Exception {
        ModelConfig config = ModelConfig.qwen25_7b();
        LoraSpec lora = new LoraSpec(16, 2.0, LoraSpec.linears(config.architecture()));
        ModelShape bf16 = ModelShape.of(config, lora), nf4 = ModelShape.of(config, lora, true);
        Cluster eight = Cluster.of(GpuSpec.h200(), 1, 8, 0, 50e9);
        Sharding sharding = Sharding.of(ShardingStrategy.FULL_SHARD, eight);
        Workload w = Workload.benchmark();
        long linears = 0;
        for (var p : bf16.units().get(1).params()) {
            if (p.kind() == io.fsdp4j.model.ParamSpec.Kind.MATRIX && !p.name().contains(".lora_")) {
                linears += p.numel();
            }
        }
        long saved = bf16.frozenShardBytes(1, 8, 2) - nf4.frozenShardBytes(1, 8, 2);
        assertThat(saved).isEqualTo(2 * (linears / 8) - 36 * (linears / 64 / 8)); // 2 bytes less 4.5 bits each
        // the embeddings and the head (untied: 1.1 GB each in bf16) stay as they are
        assertThat(MemoryModel.estimate(nf4, w, sharding).part(Part.PARAMS))
                .isLessThan(MemoryModel.estimate(bf16, w, sharding).part(Part.PARAMS) / 2);
        var nf4Comm = StepSimulator.CommTimes.of(nf4, w, sharding, eight);
        var bf16Comm = StepSimulator.CommTimes.of(bf16, w, sharding, eight);
        assertThat(nf4Comm.allGather()[1]).isLessThan(bf16Comm.allGather()[1] / 2);
        assertThat(nf4Comm.allGather()[0]).isEqualTo(bf16Comm.allGather()[0]); // the embeddings as they were
        // and each gather dequantizes: 9/16 byte read and 2 written an element of the linears, a block's forward longer
        var nf4Stages = ComputeModel.stageTimes(nf4, w, sharding, GpuSpec.h200(), ComputeModel.Calibration.h200());
        var bf16Stages = ComputeModel.stageTimes(bf16, w, sharding, GpuSpec.h200(), ComputeModel.Calibration.h200());
        assertThat(nf4Stages.forward()[1]).isGreaterThan(bf16Stages.forward()[1]);
        assertThat(nf4Stages.forward()[0]).isEqualTo(bf16Stages.forward()[0]);
        // the plan's text and JSON say it
        String[] args = {"plan", "--model", "qwen2.5-7b", "--gpus-per-node", "8", "--gpu-counts", "8", "--param-dtype",
            "bf16", "--set", "lora.rank=16", "--set", "lora.target_modules=all-linear", "--set", "lora.quantize=nf4"};
        PlanCommandTest.Run text = PlanCommandTest.run(args);
        assertThat(text.status()).as(text.err()).isZero();
        assertThat(text.out()).contains("the base frozen in nf4 (QLoRA: each block's linears in 4 bits");
        String[] jsonArgs = java.util.Arrays.copyOf(args, args.length + 1);
        jsonArgs[args.length] = "--json";
        PlanCommandTest.Run json = PlanCommandTest.run(jsonArgs);
        JsonNode plan = new ObjectMapper().readTree(json.out());
        assertThat(plan.get("lora").get("quantize").asText()).isEqualTo("nf4");
        // without lora.rank: one error line
        PlanCommandTest.Run r = PlanCommandTest.run("plan", "--model", "qwen2.5-7b", "--set", "lora.quantize=nf4");
        assertThat(r.status()).isEqualTo(2);
        assertThat(r.err()).startsWith("error: config key 'lora.quantize' is nf4, but 'lora.rank' is 0").hasLineCount(1);
    }
}
