package io.fsdp4j.train;

import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.RandomInit;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.UnitLayout;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * {@code fsdp4j bench}: training throughput on synthetic tokens, measured as the PyTorch peer benchmark measures
 * it (random weights, uniform random tokens labelled with themselves, batch 1 per rank, warmup steps then timed
 * steps) and printed as one JSON line with the peer's field names. MFU counts 6 * parameters per token plus causal
 * attention (12 * L * NH * HS * T / 2) against the device's dense bf16 peak; CPU ranks have no such peak, so their
 * MFU is null.
 */
public final class Benchmark {
    private Benchmark() {}

    /** Runs warmup + timed steps of {@code config} (its train.steps is ignored) and prints the result line. */
    public static Map<String, Object> run(TrainConfig config, int warmup, int timedSteps, PrintStream out) {
        ModelConfig model = config.model().path() != null ? io.fsdp4j.hf.HfConfig.read(config.model().path())
                : ModelConfig.preset(config.model().preset());
        int steps = warmup + timedSteps, seq = config.data().seqLen();
        TrainConfig benchConfig = config.with("train.steps=" + steps);
        int ranks = TrainingRun.job(config).worldSize(); // every rank of the job
        int globalBatch = ranks * config.train().batchSize() * config.train().gradAccum();
        SplittableRandom random = new SplittableRandom(config.train().seed());
        List<Sequence> data = new ArrayList<>();
        for (int i = 0; i < steps * globalBatch; i++) {
            data.add(Sequence.unmasked(random.ints(seq, 0, model.vocabSize()).toArray()));
        }
        List<UnitLayout> layout = LlamaModel.layout(model);
        long params = layout.stream().mapToLong(UnitLayout::numel).sum();
        double[] timed = {0};
        double[] peakGib = {0};
        TrainingRun run = new TrainingRun(benchConfig, model, new RandomInit(config.train().seed(), 0.02, layout), data, false);
        TrainingRun.Result result = run.run((step, seconds, peakDeviceBytes) -> {
            if (step.step() > warmup) {
                timed[0] += seconds;
            }
            double used = peakDeviceBytes >= 0 ? peakDeviceBytes
                    : ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
            peakGib[0] = Math.max(peakGib[0], used / Math.pow(2, 30));
        }, false);
        if (!TrainingRun.job(config).firstProcess()) {
            return Map.of(); // in a job of several processes, the first (with rank 0) reports
        }
        boolean gpu = !result.devices().startsWith("cpu");
        long tokens = (long) timedSteps * globalBatch * seq;
        double flopsPerToken = Flops.perToken(model, params, seq);
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("impl", "fsdp4j");
        line.put("model", config.model().path() != null ? config.model().path().toString() : config.model().preset());
        line.put("params", params);
        line.put("world", ranks);
        line.put("gpus_per_node", TrainingRun.job(config).ranksPerNode());
        line.put("strategy", config.fsdp().strategy().toString());
        line.put("seq", seq);
        line.put("ac", config.fsdp().activationCheckpointing().toString());
        line.put("steps", timedSteps);
        line.put("loss", result.steps().getLast().loss());
        line.put("tok_s", tokens / timed[0]);
        line.put("tok_s_gpu", tokens / timed[0] / ranks);
        line.put("step_s", timed[0] / timedSteps);
        line.put("flops_per_token", flopsPerToken);
        double mfu = Flops.mfu(flopsPerToken, tokens / timed[0] / ranks, gpu);
        line.put("mfu", Double.isNaN(mfu) ? null : mfu); // CPU ranks: no dense bf16 peak to compare with
        line.put("peak_reserved_gib", peakGib[0]);
        line.put("param_dtype", config.fsdp().paramDtype().toString());
        line.put("reduce_dtype", config.fsdp().reduceDtype().toString());
        line.put("device", result.devices());
        out.println(MetricsFile.json(line));
        return line;
    }
}
