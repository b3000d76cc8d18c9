package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.Precision;
import io.fsdp4j.config.ShardingStrategy;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.eval.Evaluation;
import io.fsdp4j.eval.ShardedEvaluation;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.fsdp.FsdpPolicy;
import io.fsdp4j.hf.HfCheckpoint;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.Generator;
import io.fsdp4j.model.KvCache;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.FieldSource;

/**
 * Evaluation and generation on the GPU: the batched KV-cache ops against the CPU backend's (fp32 within 1e-5, bf16
 * within 1e-2), the loss of the sharded evaluation on GPU ranks against the CPU's whole model, and generation through
 * the KV cache on the device giving the logits of the CPU's.
 */
@Tag("gpu")
class GpuEvaluationTest {
    static final List<String> MODELS = Stream.concat(Golden.MODELS.stream(), Stream.of("bloom", "gemma3", "qwen3"))
            .toList();
    private static final CpuBackend CPU = CpuBackend.INSTANCE;

    /** Three sequences at different positions, two new rows each, over caches of 9 rows; every layout and option. */
    @Test
    void cachedAttentionMatchesTheCpu() {
        GpuTests.requireGpus(1);
        List<AttentionShape> shapes = List.of(new AttentionShape(3, 2, 4, 2, 16, 0),
                new AttentionShape(3, 2, 4, 2, 16, 3), new AttentionShape(3, 2, 8, 1, 256, 0),
                new AttentionShape(3, 2, 3, 3, 8, 0, AttentionShape.QkvLayout.PER_HEAD, true));
        try (CudaBackend gpu = new CudaBackend(0)) {
            for (AttentionShape s : shapes) {
                for (DType dtype : List.of(DType.F32, DType.BF16)) {
                    int B = s.batch(), N = B * s.seqLen(), capacity = 9, width = s.qkvWidth();
                    int kv = s.kvHeads() * s.headDim();
                    var random = new SplittableRandom(7);
                    float[] qkv = new float[N * width];
                    for (int i = 0; i < qkv.length; i++) {
                        qkv[i] = (float) random.nextDouble(-1, 1);
                    }
                    float[] cacheValues = new float[B * capacity * kv];
                    for (int i = 0; i < cacheValues.length; i++) {
                        cacheValues[i] = (float) random.nextDouble(-1, 1);
                    }
                    int[] positions = {3, 4, 0, 1, 6, 7}; // each sequence's two new rows
                    float[] expected = cached(CPU, s, DType.F32, round(qkv, dtype), round(cacheValues, dtype),
                            positions, capacity);
                    float[] got = cached(gpu, s, dtype, qkv, cacheValues, positions, capacity);
                    assertThat(Golden.relativeError(got, expected)).as("%s %s", s, dtype)
                            .isLessThan(dtype == DType.F32 ? 1e-5 : 1e-2);
                }
            }
        }
    }

    private static float[] round(float[] values, DType dtype) {
        if (dtype == DType.F32) {
            return values;
        }
        float[] r = new float[values.length];
        for (int i = 0; i < r.length; i++) {
            r[i] = io.fsdp4j.tensor.Half.roundBf16(values[i]);
        }
        return r;
    }

    /** Fills the caches (keys = values = cacheValues), appends qkv's rows at positions and attends; out as floats. */
    private static float[] cached(Backend be, AttentionShape s, DType dtype, float[] qkv, float[] cacheValues,
                                  int[] positions, int capacity) {
        try (var scope = be.newScope(); var entered = scope.enter()) {
            int kv = s.kvHeads() * s.headDim(), N = positions.length;
            Tensor keys = be.allocate(dtype, s.batch(), capacity, kv), values = be.allocate(dtype, s.batch(), capacity, kv);
            be.copy(be.upload(cacheValues, cacheValues.length), keys.view(0, cacheValues.length));
            be.copy(be.upload(cacheValues, cacheValues.length), values.view(0, cacheValues.length));
            Tensor q = be.allocate(dtype, N, s.qkvWidth());
            be.copy(be.upload(qkv, qkv.length), q.view(0, qkv.length));
            Tensor at = be.uploadInts(positions, N), out = be.allocate(dtype, N, s.heads() * s.headDim());
            be.kvCacheAppend(keys, values, q, at, s);
            be.attentionCached(out, q, keys, values, at, s);
            return be.toFloats(out);
        }
    }

    /** Two ranks sharing the GPU, fp32 parameters: every sequence's loss within 1e-5 of the CPU's whole model. */
    @ParameterizedTest
    @FieldSource("MODELS")
    void shardedLossOnGpuRanksMatchesTheCpu(String name) {
        GpuTests.requireGpus(1);
        ModelConfig config = Golden.config(name);
        List<Sequence> sequences = goldenBatch(name);
        List<Evaluation.SequenceLoss> expected = new ArrayList<>();
        Evaluation.loss(EvalModel.fromHf(Golden.dir(name)).load(), CPU, sequences, (l, i) -> expected.add(l));
        var world = InProcessWorld.sharingOneGpu(new DeviceMesh(1, 2), Duration.ofSeconds(60));
        Map<Integer, List<Evaluation.SequenceLoss>> got = new ConcurrentHashMap<>();
        try (HfCheckpoint weights = HfCheckpoint.open(Golden.dir(name), CausalLMs.layout(config))) {
            RankThreads.run(world, r -> {
                RankContext rank = world.open(r);
                try {
                    var policy = new FsdpPolicy(ShardingStrategy.FULL_SHARD, Precision.FP32, Precision.FP32,
                            ActivationCheckpointing.NONE);
                    FsdpModel model = FsdpModel.apply(CausalLMs.create(config, rank.backend()), rank, policy, weights);
                    got.put(r, new ShardedEvaluation(model, 2).sequenceLosses(sequences));
                } finally {
                    world.close(rank);
                }
            });
        }
        for (int i = 0; i < expected.size(); i++) {
            assertThat(got.get(0).get(i).tokens()).isEqualTo(expected.get(i).tokens());
            assertThat(got.get(0).get(i).sum()).as("%s sequence %d", name, i)
                    .isCloseTo(expected.get(i).sum(), Percentage.withPercentage(1e-3));
        }
    }

    /** Generation on the GPU (the KV cache on the device): each step's logits those of the CPU, fp32. */
    @ParameterizedTest
    @FieldSource("MODELS")
    void generationOnTheGpuGivesTheCpusLogits(String name) {
        GpuTests.requireGpus(1);
        ModelConfig config = Golden.config(name);
        SingleDeviceModel cpu = EvalModel.fromHf(Golden.dir(name)).load();
        try (CudaBackend gpu = new CudaBackend(0);
             HfCheckpoint weights = HfCheckpoint.open(Golden.dir(name), CausalLMs.layout(config))) {
            SingleDeviceModel onGpu = EvalModel.build(config, gpu, weights);
            List<int[]> prompts = List.of(new int[] {3, 141, 59, 26, 5}, new int[] {7, 1}, new int[] {9, 8, 7, 6});
            List<int[]> generated = Generator.greedy(onGpu, prompts, 6, 3);
            // each prompt continued with the GPU's tokens: the CPU's logits of every step agree
            for (int p = 0; p < prompts.size(); p++) {
                int[] sequence = IntStream.concat(IntStream.of(prompts.get(p)), IntStream.of(generated.get(p))).toArray();
                float[] gpuLogits = lastLogits(onGpu, sequence), cpuLogits = lastLogits(cpu, sequence);
                assertThat(Golden.relativeError(gpuLogits, cpuLogits)).as("%s prompt %d", name, p).isLessThan(1e-4);
            }
        }
    }

    /** The logits of the last token, the sequence run through a KV cache of one sequence in one piece. */
    private static float[] lastLogits(SingleDeviceModel m, int[] tokens) {
        Backend be = m.backend();
        try (var scope = be.newScope(); var entered = scope.enter()) {
            KvCache cache = m.model().newKvCache(1, tokens.length, m.activationType());
            int[] positions = IntStream.range(0, tokens.length).toArray();
            TokenBatch batch = new TokenBatch(1, tokens.length, be.uploadInts(tokens, tokens.length),
                    be.uploadInts(positions, tokens.length), null, null);
            return be.toFloats(m.logits(batch, cache, be.uploadInts(new int[] {tokens.length - 1}, 1)));
        }
    }

    private static List<Sequence> goldenBatch(String name) {
        var b = Golden.json(name, "batch.json");
        List<Sequence> batch = Golden.sequences(b);
        return batch;
    }
}
