package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.RandomInit;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.Flops;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.report.MetricsFile;
import io.fsdp4j.report.StepProfile;
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

    /** The process's peak resident host memory (VmHWM, Linux), or -1 where it cannot be read. */
    static long hostPeakResidentBytes() {
        try {
            for (String l : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
                if (l.startsWith("VmHWM:")) {
                    return Long.parseLong(l.replaceAll("[^0-9]", "")) * 1024; // kB
                }
            }
        } catch (java.io.IOException | NumberFormatException e) {
            return -1;
        }
        return -1;
    }

    /** Runs warmup + timed steps of {@code config} (its train.steps is ignored) and prints the result line. */
    public static Map<String, Object> run(TrainConfig config, int warmup, int timedSteps, PrintStream out) {
        return run(config, warmup, timedSteps, false, PROFILE_OPS, out);
    }

    /** How many operations the profile lists by default, the largest first. */
    public static final int PROFILE_OPS = 25;

    /**
     * As {@link #run(TrainConfig, int, int, PrintStream)}; with {@code profile}, one more step after the timed ones
     * is profiled on the device (rank 0): its split into compute, exposed communication and host gaps, and the
     * {@code profileOps} operations that take the most time (0: all), printed as a table before the JSON line (which
     * gains a "profile" field).
     */
    public static Map<String, Object> run(TrainConfig config, int warmup, int timedSteps, boolean profile,
                                          int profileOps, PrintStream out) {
        if (profile && !JobSetup.onCuda(config)) {
            throw new UserError("bench --profile times operations on the GPU: it needs CUDA ranks (dist.device=cuda"
                    + " or auto on a machine with a GPU)");
        }
        ModelConfig model = TrainingInputs.modelConfig(config);
        config = MemoryFit.fit(config, model, System.err); // stdout is the JSON line's
        int steps = warmup + timedSteps + (profile ? 1 : 0), seq = config.data().seqLen();
        TrainConfig benchConfig = config.with("train.steps=" + steps);
        int ranks = JobSetup.layout(config).worldSize(); // every rank of the job
        int globalBatch = ranks * config.train().batchSize() * config.train().gradAccum();
        SplittableRandom random = new SplittableRandom(config.train().seed());
        List<Sequence> data = new ArrayList<>();
        for (int i = 0; i < steps * globalBatch; i++) {
            data.add(Sequence.unmasked(random.ints(seq, 0, model.vocabSize()).toArray()));
        }
        List<UnitLayout> layout = CausalLMs.layout(model);
        long params = layout.stream().mapToLong(UnitLayout::numel).sum();
        double[] timed = {0};
        double[] peakGib = {0};
        TrainingJob run = new TrainingJob(benchConfig, model, new RandomInit(config.train().seed(), 0.02, layout), data,
                false);
        StepProfile[] profiled = {null};
        if (profile) {
            run = run.profiling(new TrainingJob.ProfilePlan(steps, p -> profiled[0] = p));
        }
        TrainingJob.Result result = run.run(new TrainingJob.StepListener() {
            @Override
            public void onStep(StepResult step, double seconds, long peakDeviceBytes) {
                if (step.step() > warmup && step.step() <= warmup + timedSteps) {
                    timed[0] += seconds;
                }
                double used = peakDeviceBytes >= 0 ? peakDeviceBytes
                        : ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
                peakGib[0] = Math.max(peakGib[0], used / Math.pow(2, 30));
            }

            @Override
            public void onNote(String note) {
                System.err.println("fsdp4j: " + note);
            }
        }, false);
        if (!JobSetup.layout(config).firstProcess()) {
            return Map.of(); // in a job of several processes, the first (with rank 0) reports
        }
        boolean gpu = !result.devices().startsWith("cpu");
        int gpus = config.dist().devicesFor(ranks, gpu); // ranks sharing a GPU: tokens/s and MFU are that GPU's
        long tokens = (long) timedSteps * globalBatch * seq;
        double flopsPerToken = Flops.perToken(model, params, seq);
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("impl", "fsdp4j");
        line.put("model", config.model().path() != null ? config.model().path().toString()
                : config.model().preset() + (config.model().layers() > 0 ? "-" + config.model().layers() + "l" : ""));
        line.put("params", params);
        line.put("world", ranks);
        line.put("gpus_per_node", JobSetup.layout(config).ranksPerNode());
        line.put("strategy", config.fsdp().strategy().toString());
        line.put("seq", seq);
        line.put("ac", config.fsdp().activationCheckpointing().toString());
        line.put("blocks_not_checkpointed", config.fsdp().blocksNotCheckpointed());
        line.put("blocks_selective", config.fsdp().blocksSelective());
        line.put("steps", timedSteps);
        line.put("loss", result.steps().getLast().loss());
        line.put("tok_s", tokens / timed[0]);
        line.put("tok_s_gpu", tokens / timed[0] / gpus);
        line.put("step_s", timed[0] / timedSteps);
        line.put("flops_per_token", flopsPerToken);
        double mfu = Flops.mfu(flopsPerToken, tokens / timed[0] / gpus, gpu);
        line.put("mfu", Double.isNaN(mfu) ? null : mfu); // CPU ranks: no dense bf16 peak to compare with
        line.put("peak_reserved_gib", peakGib[0]);
        line.put("param_dtype", config.fsdp().paramDtype().toString());
        line.put("reduce_dtype", config.fsdp().reduceDtype().toString());
        line.put("param_copy", config.fsdp().paramCopy().toString());
        line.put("matmul_algorithm", config.matmul().algorithm().toString());
        line.put("device", result.devices());
        // where rank 0 keeps its parameter, gradient and optimizer shards, and what the process holds in host memory
        line.put("cpu_offload", config.fsdp().cpuOffload());
        RankMemory state = result.memory().getFirst();
        line.put("state_device_gib", state.deviceBytes() / Math.pow(2, 30));
        line.put("state_host_gib", state.hostBytes() / Math.pow(2, 30));
        line.put("host_peak_rss_gib", hostPeakResidentBytes() < 0 ? null : hostPeakResidentBytes() / Math.pow(2, 30));
        if (profiled[0] != null) {
            out.printf("profile of step %d (rank 0; one extra step after the timed ones, with timing events around"
                    + " every operation):%n%s", steps, profiled[0].table(profileOps));
            line.put("profile", profiled[0].summary());
        }
        out.println(MetricsFile.json(line));
        return line;
    }
}
