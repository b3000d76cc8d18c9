package io.fsdp4j.train;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.checkpoint.BackgroundExports;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.fsdp.FsdpPolicy;
import io.fsdp4j.job.JobStart;
import io.fsdp4j.job.LocalRanks;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.report.StepProfile;
import io.fsdp4j.tensor.DType;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * A training job on the ranks of this process, one thread each (joined to the ranks of the job's other processes when
 * it has several: {@link JobSetup}): each rank runs the {@link TrainingLoop}, and rank 0 reports each step. Inputs
 * are resolved already (model config, initial weights, tokenized data); {@link Training} does that from a config for
 * the command line. What the job does beside the steps is planned here: checkpoints, resuming, evaluations, profiling
 * and stopping on request (each null or empty when not planned).
 *
 * @param resume the checkpoint the job continues from, or null
 */
public record TrainingJob(TrainConfig config, ModelConfig modelConfig, ParamSource init, List<Sequence> data,
                          boolean shuffle, CheckpointPlan checkpoints, SavedCheckpoint resume,
                          List<Evaluator> evaluators, ProfilePlan profile, StopRequest stop) {

    /** Called on rank 0 after every step, checkpoint and evaluation. */
    public interface StepListener {
        /** peakDeviceBytes: rank 0's peak reserved device memory so far, or -1 on CPU ranks. */
        void onStep(StepResult result, double seconds, long peakDeviceBytes);

        /** Called when the checkpoint of {@code step} is saved in {@code dir}, which took {@code seconds}. */
        default void onCheckpoint(int step, Path dir, double seconds) {}

        /**
         * Called after the evaluations of {@code step} (0: before training) with the {@code eval_} keys they found for
         * its metrics line (empty: none).
         */
        default void onEval(int step, Map<String, Object> keys) {}

        /** A line about how the run computes, for the terminal (the products' timed algorithms after step one). */
        default void onNote(String line) {}
    }

    /**
     * What the job did. finalParams: the fp32 parameters of each unit after the last step (if asked for; not when it
     * ended early); lastCheckpoint: the newest checkpoint this run saved, or null; tokensSeen: input tokens of every
     * step up to the last one taken, those before a resumed checkpoint included (in the process that hosts rank 0).
     */
    public record Result(List<StepResult> steps, List<RankMemory> memory, List<float[]> finalParams, String devices,
                         Ending ending, Path lastCheckpoint, long tokensSeen) {}

    /** How the steps ended, the same on every rank. */
    public sealed interface Ending {}

    /** Every step was taken. */
    public record Completed() implements Ending {}

    /**
     * The loss or gradient norm was not finite at {@code badSteps} steps in a row, the last {@code step}
     * (train.max_bad_steps): no update was made since step {@code step - badSteps}.
     */
    public record Diverged(int step, int badSteps, double loss, double gradNorm) implements Ending {}

    /**
     * Stopped after step {@code step} on request ({@link StopRequest}); {@code reason}: what asked, as this process
     * saw it (another process's signal: {@code a stop request of another process}).
     */
    public record Stopped(int step, String reason) implements Ending {}

    /**
     * Where and how often to save checkpoints.
     *
     * @param modelPath   the Hugging Face directory the run started from (recorded for export), or null
     * @param exportEvery also export the checkpoints of every this many steps, and the last, while training goes on
     *                    ({@link BackgroundExports}); 0: none
     * @param exportAtEnd also export the checkpoint of the last step there, when every step was taken; or null
     */
    public record CheckpointPlan(Path dir, int every, int keep, String modelPath, JsonNode effectiveConfig,
                                 int exportEvery, Export exportAtEnd) {
        public CheckpointPlan(Path dir, int every, int keep, String modelPath, JsonNode effectiveConfig,
                              int exportEvery) {
            this(dir, every, keep, modelPath, effectiveConfig, exportEvery, null);
        }

        public CheckpointPlan(Path dir, int every, int keep, String modelPath, JsonNode effectiveConfig) {
            this(dir, every, keep, modelPath, effectiveConfig, 0);
        }

        /** Where each checkpoint is written. */
        Checkpoints.Target target() {
            return new Checkpoints.Target(dir, keep, modelPath, effectiveConfig);
        }
    }

    /** A Hugging Face directory {@code dir} written from a checkpoint in {@code dtype}. */
    public record Export(Path dir, DType dtype) {}

    /** Profiling: rank 0's device timeline of step {@code step} (CUDA ranks only), handed to {@code listener}. */
    public record ProfilePlan(int step, Consumer<StepProfile> listener) {}

    /**
     * What the loops of this process's ranks share: the ranks, the listener, and what they collect for the result.
     */
    record Shared(LocalRanks world, StepListener listener, boolean keepFinalParams, List<StepResult> results,
                  RankMemory[] memory, List<float[]> finalParams, AtomicReference<Path> lastCheckpoint,
                  AtomicLong tokensSeen, BackgroundExports exports) {}

    /** A job of {@code config} from {@code init} on {@code data} (fitted to data.seq_len), with nothing beside steps. */
    public TrainingJob(TrainConfig config, ModelConfig modelConfig, ParamSource init, List<Sequence> data,
                       boolean shuffle) {
        this(config, modelConfig, init, data.stream().map(s -> s.fitTo(config.data().seqLen())).toList(), shuffle,
                null, null, List.of(), null, null);
    }

    /** The same job, saving checkpoints as planned. */
    public TrainingJob savingCheckpoints(CheckpointPlan plan) {
        return new TrainingJob(config, modelConfig, init, data, shuffle, plan, resume, evaluators, profile, stop);
    }

    /**
     * The same job, continuing from a checkpoint: its parameters, AdamW moments and step replace the initial
     * weights, and training resumes at the step after it, with the data order it would have had.
     */
    public TrainingJob resumingFrom(SavedCheckpoint checkpoint) {
        checkpoint.requireLayout(trainedLayouts()); // under LoRA a checkpoint holds the adapters only
        return new TrainingJob(config, modelConfig, init, data, shuffle, checkpoints, checkpoint, evaluators, profile,
                stop);
    }

    /** What trains and what a checkpoint holds: every unit, or under LoRA ({@code lora.*}) the adapters. */
    private List<UnitLayout> trainedLayouts() {
        LoraSpec lora = LoraSpec.of(config.lora(), modelConfig);
        return lora == null ? CausalLMs.layout(modelConfig)
                : FsdpModel.trainableLayouts(CausalLMs.create(modelConfig, CpuBackend.INSTANCE, lora));
    }

    /** The same job, also running {@code evaluator} at its cadence (after those added before it). */
    public TrainingJob evaluating(Evaluator evaluator) {
        List<Evaluator> more = new ArrayList<>(evaluators);
        more.add(Objects.requireNonNull(evaluator));
        return new TrainingJob(config, modelConfig, init, data, shuffle, checkpoints, resume, List.copyOf(more), profile,
                stop);
    }

    /** The same job, profiling one step on the device. */
    public TrainingJob profiling(ProfilePlan plan) {
        return new TrainingJob(config, modelConfig, init, data, shuffle, checkpoints, resume, evaluators, plan, stop);
    }

    /**
     * The same job, stopping after the step in which {@code request} is made (in any process of the job), with a
     * checkpoint when they are planned. The ranks agree on it with one small all-reduce after every step.
     */
    public TrainingJob stoppable(StopRequest request) {
        return new TrainingJob(config, modelConfig, init, data, shuffle, checkpoints, resume, evaluators, profile,
                request);
    }

    public FsdpPolicy policy() {
        return JobSetup.policy(config);
    }

    /** The mesh for this config (every rank of the job); refuses an impossible one before any work starts. */
    public DeviceMesh mesh() {
        return JobSetup.mesh(config);
    }

    /** Starts the job ({@link JobSetup#start}, never smaller than asked for) and runs it. */
    public Result run(StepListener listener, boolean keepFinalParams) {
        return run(JobSetup.start(config, mesh(), false), listener, keepFinalParams);
    }

    /** Runs the job on the ranks {@code job} started. */
    public Result run(JobStart.Joined job, StepListener listener, boolean keepFinalParams) {
        LocalRanks world = job.ranks();
        int globalBatch = globalBatch(world.mesh().worldSize());
        if (data.size() < globalBatch) {
            throw new UserError("the dataset has " + data.size() + " sequences, fewer than one global batch of "
                    + globalBatch + " (ranks x grad_accum x batch_size)");
        }
        if (config.lora().quantized()) {
            FsdpModel.requireQuantizable(CausalLMs.create(modelConfig, CpuBackend.INSTANCE,
                    LoraSpec.of(config.lora(), modelConfig)));
        }
        AtomicReference<Ending> ending = new AtomicReference<>();
        boolean exports = checkpoints != null && (checkpoints.exportEvery() > 0 || checkpoints.exportAtEnd() != null);
        Shared shared;
        try (BackgroundExports background = exports
                ? new BackgroundExports(checkpoints.dir(), line -> System.err.println("fsdp4j: " + line)) : null) {
            shared = new Shared(world, listener, keepFinalParams, Collections.synchronizedList(new ArrayList<>()),
                    new RankMemory[world.mesh().worldSize()], Collections.synchronizedList(new ArrayList<>()),
                    new AtomicReference<>(), new AtomicLong(), background);
            RankThreads.run(world, r -> {
                RankContext rank = world.open(r);
                try {
                    Ending end = new TrainingLoop(this, shared, rank).run();
                    ending.compareAndSet(null, end); // every rank ends alike: its decisions rest on reduced values
                } finally {
                    world.close(rank);
                }
            });
        }
        List<RankMemory> hosted = Arrays.stream(shared.memory()).filter(m -> m != null).toList(); // this process's
        return new Result(List.copyOf(shared.results()), hosted, List.copyOf(shared.finalParams()), world.devices(),
                ending.get(), shared.lastCheckpoint().get(), shared.tokensSeen().get());
    }

    /** Sequences of one step on {@code ranks} ranks: ranks x grad_accum x batch_size. */
    int globalBatch(int ranks) {
        return ranks * config.train().gradAccum() * config.train().batchSize();
    }
}
