package io.fsdp4j.train;

import com.fasterxml.jackson.databind.JsonNode;
import io.fsdp4j.UserError;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.checkpoint.BackgroundExports;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.PeftAdapter;
import io.fsdp4j.fsdp.LoraInit;
import io.fsdp4j.checkpoint.SavedCheckpoint;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.cuda.OpTimeline;
import io.fsdp4j.data.BatchSampler;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.eval.Evaluation;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.fsdp.FsdpPolicy;
import io.fsdp4j.job.InProcessWorld;
import io.fsdp4j.job.JobLayout;
import io.fsdp4j.job.JobStart;
import io.fsdp4j.job.LocalRanks;
import io.fsdp4j.job.NcclWorld;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.SingleDeviceModel;
import io.fsdp4j.optim.AdamW;
import io.fsdp4j.optim.LrSchedule;
import io.fsdp4j.preflight.Preflight;
import io.fsdp4j.report.StepProfile;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

/**
 * A training job on the ranks of this process, one thread each (joined to the ranks of the job's other processes
 * when it has several, see {@link #localRanks}): builds the mesh, shards the model on each rank, and runs the steps,
 * reporting each step from rank 0. Inputs are resolved already (model config,
 * initial weights, tokenized data); {@link Training} does that from a config for the command line.
 */
public final class TrainingRun {

    /** Called on rank 0 after every step. */
    public interface StepListener {
        /** peakDeviceBytes: rank 0's peak reserved device memory so far, or -1 on CPU ranks. */
        void onStep(StepResult result, double seconds, long peakDeviceBytes);

        /** Called on rank 0 when the checkpoint of {@code step} is saved in {@code dir}, which took {@code seconds}. */
        default void onCheckpoint(int step, Path dir, double seconds) {}

        /** A listener of steps ({@code steps}) and of checkpoints ({@code checkpoints}). */
        static StepListener of(StepListener steps, CheckpointListener checkpoints) {
            return new StepListener() {
                @Override
                public void onStep(StepResult result, double seconds, long peakDeviceBytes) {
                    steps.onStep(result, seconds, peakDeviceBytes);
                }

                @Override
                public void onCheckpoint(int step, Path dir, double seconds) {
                    checkpoints.onCheckpoint(step, dir, seconds);
                }
            };
        }
    }

    /** Called on rank 0 after each checkpoint is saved. */
    public interface CheckpointListener {
        void onCheckpoint(int step, Path dir, double seconds);
    }

    /**
     * What the job did. finalParams: the fp32 parameters of each unit after the last step (if asked for; not when it
     * ended early); lastCheckpoint: the newest checkpoint this run saved, or null.
     */
    public record Result(List<StepResult> steps, List<RankMemory> memory, List<float[]> finalParams, String devices,
                         Ending ending, Path lastCheckpoint) {}

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
     */
    public record CheckpointPlan(Path dir, int every, int keep, String modelPath, JsonNode effectiveConfig,
                                 int exportEvery) {
        public CheckpointPlan(Path dir, int every, int keep, String modelPath, JsonNode effectiveConfig) {
            this(dir, every, keep, modelPath, effectiveConfig, 0);
        }
    }

    /** Called on rank 0 with the loss on the evaluation data after each evaluated step. */
    public interface EvalListener {
        void onEval(int step, Evaluation.LossResult result);
    }

    /**
     * Evaluation during training: the loss on {@code data} every {@code every} steps (0: only after the last step),
     * and after the last step.
     */
    public record EvalPlan(List<Sequence> data, int every, EvalListener listener) {}

    /** Profiling: rank 0's device timeline of step {@code step} (CUDA ranks only), handed to {@code listener}. */
    public record ProfilePlan(int step, Consumer<StepProfile> listener) {}

    private final TrainConfig config;
    private final ModelConfig modelConfig;
    private final ParamSource init;
    private final List<Sequence> data;
    private final boolean shuffle;
    private final CheckpointPlan checkpoints;
    private final SavedCheckpoint resume;
    private final EvalPlan eval;
    private final ProfilePlan profile;
    private final StopRequest stop;

    public TrainingRun(TrainConfig config, ModelConfig modelConfig, ParamSource init, List<Sequence> data,
                       boolean shuffle) {
        this(config, modelConfig, init, data.stream().map(s -> s.fitTo(config.data().seqLen())).toList(), shuffle,
                null, null, null, null, null);
    }

    private TrainingRun(TrainConfig config, ModelConfig modelConfig, ParamSource init, List<Sequence> data,
                        boolean shuffle, CheckpointPlan checkpoints, SavedCheckpoint resume, EvalPlan eval,
                        ProfilePlan profile, StopRequest stop) {
        this.config = config;
        this.modelConfig = modelConfig;
        this.init = init;
        this.data = data;
        this.shuffle = shuffle;
        this.checkpoints = checkpoints;
        this.resume = resume;
        this.eval = eval;
        this.profile = profile;
        this.stop = stop;
    }

    /** The same run, saving checkpoints as planned. */
    public TrainingRun savingCheckpoints(CheckpointPlan plan) {
        return new TrainingRun(config, modelConfig, init, data, shuffle, plan, resume, eval, profile, stop);
    }

    /**
     * The same run, continuing from a checkpoint: its parameters, AdamW moments and step replace the initial
     * weights, and training resumes at the step after it, with the data order it would have had.
     */
    public TrainingRun resumingFrom(SavedCheckpoint checkpoint) {
        checkpoint.requireLayout(trainedLayouts()); // under LoRA a checkpoint holds the adapters only
        return new TrainingRun(config, modelConfig, init, data, shuffle, checkpoints, checkpoint, eval, profile, stop);
    }

    /** The same run, evaluating as planned. */
    public TrainingRun evaluating(EvalPlan plan) {
        return new TrainingRun(config, modelConfig, init, data, shuffle, checkpoints, resume, plan, profile, stop);
    }

    /** The same run, profiling one step on the device. */
    public TrainingRun profiling(ProfilePlan plan) {
        return new TrainingRun(config, modelConfig, init, data, shuffle, checkpoints, resume, eval, plan, stop);
    }

    /**
     * The same run, stopping after the step in which {@code request} is made (in any process of the job), with a
     * checkpoint when they are planned. The ranks agree on it with one small all-reduce after every step.
     */
    public TrainingRun stoppable(StopRequest request) {
        return new TrainingRun(config, modelConfig, init, data, shuffle, checkpoints, resume, eval, profile, request);
    }

    public FsdpPolicy policy() {
        return policy(config);
    }

    private static FsdpPolicy policy(TrainConfig config) {
        var f = config.fsdp();
        return new FsdpPolicy(f.strategy(), f.paramDtype(), f.reduceDtype(), f.activationCheckpointing(), f.cpuOffload(),
                f.prefetch());
    }

    /** The mesh for this config (every rank of the job); refuses an impossible one before any work starts. */
    public DeviceMesh mesh() {
        return mesh(config);
    }

    /** The mesh of every rank of the job that {@code config} and this process's environment describe. */
    public static DeviceMesh mesh(TrainConfig config) {
        return mesh(config, job(config));
    }

    /** The mesh of every rank of {@code config}'s job laid out as {@code job}. */
    public static DeviceMesh mesh(TrainConfig config, JobLayout job) {
        int ranks = job.worldSize();
        return DeviceMesh.of(ranks, policy(config).shardSize(ranks, config.fsdp().shardSize(), job.ranksPerNode()));
    }

    /** Where this process stands in the job: from {@code dist.*} and torchrun-style or Slurm variables. */
    public static JobLayout job(TrainConfig config) {
        return JobLayout.resolve(config.dist(), System.getenv());
    }

    /** Starts the job ({@link #start}, never smaller than asked for) and runs it. */
    public Result run(StepListener listener, boolean keepFinalParams) {
        return run(start(config, mesh(), false), listener, keepFinalParams);
    }

    /**
     * This process's part of the job, started: the rendezvous and the preflight when the job has several processes
     * (with {@code dist.exclude_unhealthy}, the preflight may start the job without unhealthy nodes: then the layout
     * and the mesh are the smaller job's), then the ranks of this process.
     */
    public JobStart.Joined start() {
        return start(config, mesh(), true);
    }

    /** Runs the job on the ranks {@code job} started. */
    public Result run(JobStart.Joined job, StepListener listener, boolean keepFinalParams) {
        DeviceMesh mesh = job.ranks().mesh();
        int ranks = mesh.worldSize(), batchSize = config.train().batchSize(), microBatches = config.train().gradAccum();
        int globalBatch = ranks * microBatches * batchSize;
        if (data.size() < globalBatch) {
            throw new UserError("the dataset has " + data.size() + " sequences, fewer than one global batch of "
                    + globalBatch + " (ranks x grad_accum x batch_size)");
        }
        BatchSampler sampler = new BatchSampler(data.size(), globalBatch, config.train().seed(), shuffle);
        var opt = config.optim();
        var sched = config.schedule();
        LrSchedule schedule = new LrSchedule(sched.kind(), opt.lr(), sched.warmupFor(config.train().steps()), config.train().steps(),
                sched.minLrRatio());
        LocalRanks world = job.ranks();
        List<StepResult> results = Collections.synchronizedList(new ArrayList<>());
        RankMemory[] memory = new RankMemory[ranks];
        List<float[]> finalParams = Collections.synchronizedList(new ArrayList<>());
        AtomicReference<Ending> ending = new AtomicReference<>();
        AtomicReference<Path> saved = new AtomicReference<>();
        try (BackgroundExports exports = checkpoints != null && checkpoints.exportEvery() > 0
                ? new BackgroundExports(checkpoints.dir(), line -> System.err.println("fsdp4j: " + line)) : null) {
            RankThreads.run(world, r -> {
                RankContext rank = world.open(r);
                try {
                    Ending end = trainRank(world, rank, listener, keepFinalParams, sampler, schedule, results, memory,
                            finalParams, saved, exports);
                    ending.compareAndSet(null, end); // every rank ends alike: its decisions rest on reduced values
                } finally {
                    world.close(rank);
                }
            });
        }
        List<RankMemory> hosted = java.util.Arrays.stream(memory).filter(m -> m != null).toList(); // this process's
        return new Result(List.copyOf(results), hosted, List.copyOf(finalParams), world.devices(), ending.get(),
                saved.get());
    }

    /** The model {@code config} trains: its Hugging Face directory's config.json, or its preset (model.layers of it). */
    public static ModelConfig modelConfig(TrainConfig config) {
        var m = config.model();
        if (m.path() != null) {
            return io.fsdp4j.hf.HfConfig.read(m.path());
        }
        ModelConfig preset = ModelConfig.preset(m.preset());
        return m.layers() > 0 ? preset.withLayers(m.layers()) : preset;
    }

    /**
     * Whether {@code config}'s ranks are GPUs: dist.device=cuda (refused in one line when CUDA cannot be used), or
     * auto on a machine where it can.
     */
    public static boolean onCuda(TrainConfig config) {
        return switch (config.dist().device()) {
            case CPU -> false;
            case CUDA -> {
                NativeLibraries.whyCudaUnavailable().ifPresent(why -> {
                    throw new UserError("dist.device=cuda: " + why);
                });
                yield true;
            }
            case AUTO -> NativeLibraries.cudaAvailable();
        };
    }

    /** The ranks of this process for the configured device: GPUs through NCCL, or CPU threads. */
    public static LocalRanks localRanks(TrainConfig config, DeviceMesh mesh) {
        return start(config, mesh, false).ranks();
    }

    /** {@code mayShrink}: the caller copes with a smaller job than {@code mesh} (dist.exclude_unhealthy). */
    private static JobStart.Joined start(TrainConfig config, DeviceMesh mesh, boolean mayShrink) {
        JobLayout job = job(config);
        if (job.multiProcess() && config.dist().shareGpu()) {
            throw new UserError("dist.share_gpu puts the ranks of one process on one GPU, but this job spans "
                    + job.processes() + " processes: leave dist.share_gpu out, or run the job as one process");
        }
        boolean cuda = onCuda(config);
        if (job.multiProcess()) { // the rendezvous, the job's start checks, then the ranks of this process
            // what every process must agree on: the config less what may differ by node (the preflight compares the
            // contents behind paths) and less what the layout says
            Map<String, Object> settings = new LinkedHashMap<>(config.toMap());
            Set<String> perNode = new java.util.HashSet<>(io.fsdp4j.preflight.NodeFacts.PER_NODE_KEYS);
            perNode.add("dist.nnodes");
            for (String key : perNode) {
                String[] parts = key.split("\\.", 2);
                if (settings.get(parts[0]) instanceof Map<?, ?> section) {
                    Map<Object, Object> copy = new LinkedHashMap<>(section);
                    copy.remove(parts[1]);
                    settings.put(parts[0], copy);
                }
            }
            return JobStart.join(job, mesh, cuda ? JobStart.Device.CUDA : JobStart.Device.CPU, settings, System.getenv(),
                    Preflight.atJobStart(config, cuda, System.getenv(), mayShrink ? layout -> mesh(config, layout) : null));
        }
        Duration timeout = JobStart.collectiveTimeout(System.getenv());
        if (!cuda) {
            return new JobStart.Joined(job, new InProcessWorld(mesh, timeout));
        }
        return new JobStart.Joined(job, config.dist().shareGpu() ? InProcessWorld.sharingOneGpu(mesh, timeout)
                : new NcclWorld(mesh));
    }

    /**
     * Gathers every unit whole onto rank 0 (collectives: every rank takes part), which evaluates on the CPU backend
     * while the other ranks wait.
     */
    private void evaluate(RankContext rank, FsdpModel model, int step) {
        List<float[]> full = new ArrayList<>();
        for (int u = 0; u < model.units().size(); u++) {
            float[] unit = model.fullParameters(u);
            if (rank.rank() == 0) {
                full.add(unit);
            }
        }
        if (rank.rank() == 0) {
            LoraSpec lora = LoraSpec.of(config.lora());
            if (lora != null) { // the adapters merged into the base, as PEFT's merge_and_unload
                full = lora.merge(model.model().units(), full, CausalLMs.layout(modelConfig));
            }
            SingleDeviceModel whole = EvalModel.build(modelConfig, CpuBackend.INSTANCE, full);
            eval.listener().onEval(step, Evaluation.loss(whole, CpuBackend.INSTANCE, eval.data()));
        }
        rank.world().barrier(); // the other ranks wait here while rank 0 evaluates
    }

    /** What trains and what a checkpoint holds: every unit, or under LoRA ({@code lora.*}) the adapters. */
    private List<UnitLayout> trainedLayouts() {
        LoraSpec lora = LoraSpec.of(config.lora());
        return lora == null ? CausalLMs.layout(modelConfig)
                : FsdpModel.trainableLayouts(CausalLMs.create(modelConfig, CpuBackend.INSTANCE, lora));
    }

    /**
     * The model sharded on this rank: from the initial weights or the checkpoint resumed; under LoRA the base always
     * from the initial weights (frozen) and the adapters from the checkpoint, else from {@code lora.init} (a PEFT
     * adapter), else PEFT's initialisation.
     */
    private FsdpModel shardedModel(RankContext rank) {
        LoraSpec lora = LoraSpec.of(config.lora());
        CausalLM causal = CausalLMs.create(modelConfig, rank.backend(), lora);
        if (lora == null) {
            ParamSource weights = resume != null ? resume.source(SavedCheckpoint.Kind.PARAMS) : init;
            return FsdpModel.apply(causal, rank, policy(), weights);
        }
        List<UnitLayout> adapters = FsdpModel.trainableLayouts(causal);
        if (resume == null && config.lora().init() != null) {
            try (PeftAdapter.Source start = PeftAdapter.open(config.lora().init(), adapters)) {
                return FsdpModel.apply(causal, rank, policy(), init, start); // read whole before it closes
            }
        }
        ParamSource start = resume != null ? resume.source(SavedCheckpoint.Kind.PARAMS)
                : new LoraInit(config.train().seed(), adapters);
        return FsdpModel.apply(causal, rank, policy(), init, start);
    }

    private Ending trainRank(LocalRanks world, RankContext rank, StepListener listener, boolean keepFinalParams,
                             BatchSampler sampler, LrSchedule schedule, List<StepResult> results, RankMemory[] memory,
                             List<float[]> finalParams, AtomicReference<Path> saved, BackgroundExports exports) {
            int r = rank.rank();
            Backend backend = rank.backend();
            var opt = config.optim();
            int batchSize = config.train().batchSize(), microBatches = config.train().gradAccum();
            FsdpModel model = shardedModel(rank);
            AdamW optimizer = new AdamW(backend, model.trainableShards(), (float) opt.beta1(), (float) opt.beta2(),
                    (float) opt.eps(), (float) opt.weightDecay(), opt.decay());
            int firstStep = 1;
            if (resume != null) {
                optimizer.restore(resume.index().optimizerStepsTaken(), resume.source(SavedCheckpoint.Kind.EXP_AVG),
                        resume.source(SavedCheckpoint.Kind.EXP_AVG_SQ));
                firstStep = resume.index().step() + 1;
            }
            Trainer trainer = new Trainer(model, optimizer, schedule, opt.maxGradNorm());
            FsdpModel.ShardBytes bytes = model.shardBytes();
            memory[r] = new RankMemory(r, bytes.params(), bytes.grads(), optimizer.stateBytes(), bytes.inHostMemory());
            int badInRow = 0, maxBad = config.train().maxBadSteps();
            Ending ending = new Completed();
            if (eval != null && firstStep == 1) {
                evaluate(rank, model, 0); // the held-out loss before training: where the curve starts
            }
            for (int step = firstStep; step <= config.train().steps(); step++) {
                world.beginStep(r, step); // for the message of a job that hangs
                long start = System.nanoTime();
                int[] global = sampler.globalBatch(step - 1);
                List<List<Sequence>> mine = new ArrayList<>();
                for (int m = 0; m < microBatches; m++) {
                    int first = (r * microBatches + m) * batchSize;
                    List<Sequence> micro = new ArrayList<>();
                    for (int i = 0; i < batchSize; i++) {
                        micro.add(data.get(global[first + i]));
                    }
                    mine.add(micro);
                }
                OpTimeline timeline = profile != null && profile.step() == step && r == 0
                        && backend instanceof CudaBackend gpu ? OpTimeline.start(gpu.stream()) : null;
                StepResult result = trainer.step(step, mine);
                if (timeline != null) {
                    try (timeline) {
                        profile.listener().accept(timeline.finish());
                    }
                }
                if (r == 0) {
                    results.add(result);
                    if (listener != null) {
                        long peak = backend instanceof CudaBackend gpu ? gpu.allocator().peakReservedBytes() : -1;
                        listener.onStep(result, (System.nanoTime() - start) / 1e9, peak);
                    }
                }
                // a loss or norm that is not finite skipped the update on every rank; too many in a row end the run
                badInRow = result.skipped() ? badInRow + 1 : 0;
                if (badInRow >= maxBad) {
                    ending = new Diverged(step, badInRow, result.loss(), result.gradNorm());
                    break;
                }
                // a stop asked for in any process (a signal) stops every rank after this same step
                boolean stopping = stop != null
                        && rank.world().allReduce(new double[] {stop.reason() != null ? 1 : 0})[0] > 0;
                if (checkpoints != null && (stopping || step == config.train().steps()
                        || checkpoints.every() > 0 && step % checkpoints.every() == 0)) {
                    long saving = System.nanoTime();
                    Path dir = Checkpoints.save(rank, model, optimizer, checkpoints.dir(), step, modelConfig,
                            checkpoints.modelPath(), checkpoints.effectiveConfig(), checkpoints.keep());
                    if (r == world.ranks().getFirst()) {
                        saved.set(dir);
                    }
                    if (r == 0 && listener != null) {
                        listener.onCheckpoint(step, dir, (System.nanoTime() - saving) / 1e9);
                    }
                    if (exports != null && rank.rank() == 0 && (stopping || step == config.train().steps()
                            || step % checkpoints.exportEvery() == 0)) {
                        exports.submit(dir, step); // written on another thread while the ranks go on
                    }
                }
                if (stopping) {
                    ending = new Stopped(step, stop.reason() != null ? stop.reason() : "a stop request of another process");
                    break;
                }
                if (eval != null && (step == config.train().steps() || eval.every() > 0 && step % eval.every() == 0)) {
                    evaluate(rank, model, step);
                }
            }
            if (keepFinalParams && ending instanceof Completed) {
                for (int u = 0; u < model.units().size(); u++) {
                    float[] full = model.fullParameters(u); // a collective: every rank takes part
                    if (r == 0) {
                        finalParams.add(full);
                    }
                }
            }
            return ending;
    }
}
