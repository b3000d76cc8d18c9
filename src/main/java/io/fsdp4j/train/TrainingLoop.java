package io.fsdp4j.train;

import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.checkpoint.Checkpoints;
import io.fsdp4j.checkpoint.PeftAdapter;
import io.fsdp4j.checkpoint.TrainState;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.BaseQuantization;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.CublasLt;
import io.fsdp4j.cuda.OpTimeline;
import io.fsdp4j.data.BatchSampler;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.fsdp.FsdpPolicy;
import io.fsdp4j.fsdp.LoraInit;
import io.fsdp4j.model.BlockLinears;
import io.fsdp4j.model.CausalLM;
import io.fsdp4j.model.CausalLMs;
import io.fsdp4j.model.LoraSpec;
import io.fsdp4j.model.ParamSource;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.optim.AdamW;
import io.fsdp4j.optim.LossScaler;
import io.fsdp4j.optim.LrSchedule;
import io.fsdp4j.train.TrainingJob.Completed;
import io.fsdp4j.train.TrainingJob.Diverged;
import io.fsdp4j.train.TrainingJob.Ending;
import io.fsdp4j.train.TrainingJob.Stopped;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The training loop of one rank, top to bottom: the state built (or loaded from a checkpoint), the weights it starts
 * from evaluated, then step after step: this rank's micro-batches, the step ({@link TrainStep}), its report, and the
 * cadence after it: divergence, a stop asked for, checkpoint, evaluation. Every decision rests on values reduced over
 * the job, so every rank ends alike. {@link TrainingJob} runs one on each rank of this process.
 */
final class TrainingLoop {
    private final TrainingJob job;
    private final TrainingJob.Shared shared;
    private final RankContext rank;
    private final TrainConfig config;
    private final int lastStep;

    TrainingLoop(TrainingJob job, TrainingJob.Shared shared, RankContext rank) {
        this.job = job;
        this.shared = shared;
        this.rank = rank;
        this.config = job.config();
        this.lastStep = config.train().steps();
    }

    Ending run() {
        // 1. the state: fresh from the initial weights, or the checkpoint's to resume from
        TrainState state = job.resume() != null ? Checkpoints.load(job.resume(), this::freshState)
                : freshState(null);
        TrainStep trainStep = new TrainStep(state.model(), state.optimizer(), state.schedule(),
                config.optim().maxGradNorm(), config.train().seed(), state.scaler());
        recordMemory(state);
        chooseAttention(state.model());
        if (rank.backend() instanceof CudaBackend gpu) {
            gpu.useMatmulAlgorithm(config.matmul().algorithm());
        }
        int firstStep = state.nextStep(), badInRow = 0;
        evaluateIfDue(state.model(), firstStep - 1, firstStep); // the weights it starts from: where the curve starts
        for (int step = firstStep; step <= lastStep; step++) {
            // 2. this rank's micro-batches of the global batch, and the step
            shared.world().beginStep(rank.rank(), step); // for the message of a job that hangs
            long start = System.nanoTime();
            List<List<Sequence>> microBatches = microBatches(state.sampler(), step);
            int current = step;
            StepResult result = profileIfDue(step, () -> trainStep.step(current, microBatches));
            state.completed(step, result.tokens());
            report(state, result, start);
            if (step == firstStep) {
                noteMatmulTimings();
            }

            // 3. a loss or norm that is not finite skipped the update on every rank; too many in a row end the run (a
            // dynamic loss scale's overflow, halved for the next step, is not counted)
            badInRow = result.bad() ? badInRow + 1 : result.skipped() ? badInRow : 0;
            if (badInRow >= config.train().maxBadSteps()) {
                return new Diverged(step, badInRow, result.loss(), result.gradNorm());
            }

            // 4. a stop asked for in any process (a signal) stops every rank after this same step, saved first
            boolean stopping = stopAgreed();
            checkpointIfDue(state, stopping);
            if (stopping) {
                String reason = job.stop().reason();
                return new Stopped(step, reason != null ? reason : "a stop request of another process");
            }
            evaluateIfDue(state.model(), step, firstStep);
        }
        keepFinalParams(state.model());
        return new Completed();
    }

    /**
     * The model sharded on this rank, its optimizer (over what trains), the schedule and the data order; what trains
     * from {@code trained}, a checkpoint's parameters, or when null from the job's initial weights.
     */
    private TrainState freshState(ParamSource trained) {
        var opt = config.optim();
        FsdpModel model = shardedModel(trained);
        AdamW optimizer = new AdamW(rank.backend(), model.trainableShards(), (float) opt.beta1(), (float) opt.beta2(),
                (float) opt.eps(), (float) opt.weightDecay(), opt.decay());
        var sched = config.schedule();
        LrSchedule schedule = new LrSchedule(sched.kind(), opt.lr(), sched.warmupFor(lastStep), lastStep,
                sched.minLrRatio());
        int globalBatch = job.globalBatch(rank.mesh().worldSize());
        BatchSampler sampler = new BatchSampler(job.data().size(), globalBatch, config.train().seed(), job.shuffle());
        return new TrainState(model, optimizer, schedule, sampler, (long) globalBatch * config.data().seqLen(),
                new LossScaler(config.fsdp().lossScale()));
    }

    /**
     * The model sharded on this rank: every unit from {@code trained} (a checkpoint's) or the initial weights; under
     * LoRA ({@code lora.*}) the base always from the initial weights (frozen; its block linears quantized to NF4 as
     * they are read under {@code lora.quantize: nf4}) and the adapters from {@code trained}, else from
     * {@code lora.init} (a PEFT adapter), else PEFT's initialisation.
     */
    private FsdpModel shardedModel(ParamSource trained) {
        LoraSpec lora = LoraSpec.of(config.lora(), job.modelConfig());
        CausalLM causal = CausalLMs.create(job.modelConfig(), rank.backend(), lora,
                BlockLinears.of(config.fsdp().paramDtype(), config.fsdp().fp8Recipe()));
        FsdpPolicy policy = JobSetup.policy(config);
        if (lora == null) {
            return FsdpModel.apply(causal, rank, policy, trained != null ? trained : job.init());
        }
        List<UnitLayout> adapters = FsdpModel.trainableLayouts(causal);
        BaseQuantization quantize = config.lora().quantize();
        if (trained == null && config.lora().init() != null) {
            try (PeftAdapter.Source start = PeftAdapter.open(config.lora().init(), adapters)) {
                return FsdpModel.apply(causal, rank, policy, job.init(), start, quantize); // read whole before it closes
            }
        }
        ParamSource start = trained != null ? trained : new LoraInit(config.train().seed(), adapters);
        return FsdpModel.apply(causal, rank, policy, job.init(), start, quantize);
    }

    private void recordMemory(TrainState state) {
        FsdpModel.ShardBytes bytes = state.model().shardBytes();
        shared.memory()[rank.rank()] = new RankMemory(rank.rank(), bytes.params(), bytes.grads(),
                state.optimizer().stateBytes(), bytes.inHostMemory());
    }

    /**
     * attention.kernel on a GPU rank; with several ranks under auto, the engine of each attention shape of the training
     * batches settled alike on every rank before the first step (CudaAttention.settle), every rank with the same shapes:
     * the first sequence's length, batch_size sequences.
     */
    private void chooseAttention(FsdpModel model) {
        if (rank.backend() instanceof CudaBackend gpu) {
            gpu.attention().use(config.attention().kernel(), config.attention().deterministic());
            if (rank.mesh().worldSize() > 1 && !job.data().isEmpty()) {
                int seqLen = job.data().getFirst().ids().length;
                gpu.attention().settle(model.model().attentionShapes(config.train().batchSize(), seqLen),
                        rank.world()::allReduce, rank.rank() == 0);
            }
        }
    }

    /** This rank's share of the global batch of {@code step}: grad_accum micro-batches of batch_size sequences. */
    private List<List<Sequence>> microBatches(BatchSampler sampler, int step) {
        int batchSize = config.train().batchSize(), count = config.train().gradAccum();
        int[] global = sampler.globalBatch(step - 1);
        List<List<Sequence>> mine = new ArrayList<>();
        for (int m = 0; m < count; m++) {
            int first = BatchSampler.firstOf(rank.rank(), count, m, batchSize);
            List<Sequence> micro = new ArrayList<>();
            for (int i = 0; i < batchSize; i++) {
                micro.add(job.data().get(global[first + i]));
            }
            mine.add(micro);
        }
        return mine;
    }

    /** Runs the step; on the profiled step, rank 0's device timeline of it goes to the profile's listener. */
    private StepResult profileIfDue(int step, Supplier<StepResult> stepFunction) {
        TrainingJob.ProfilePlan profile = job.profile();
        if (profile == null || profile.step() != step || rank.rank() != 0
                || !(rank.backend() instanceof CudaBackend gpu)) {
            return stepFunction.get();
        }
        try (OpTimeline timeline = OpTimeline.start(gpu.stream())) {
            StepResult result = stepFunction.get();
            profile.listener().accept(timeline.finish());
            return result;
        }
    }

    /**
     * Rank 0 says, after its first step, what timing the products' algorithms found (matmul.algorithm: timed): how
     * many product shapes it timed, how many run faster than cuBLASLt's first choice, and one call of each at both.
     */
    private void noteMatmulTimings() {
        if (rank.rank() == 0 && shared.listener() != null && rank.backend() instanceof CudaBackend gpu) {
            CublasLt.Timings t = gpu.matmulTimings();
            if (t.timed() > 0) {
                shared.listener().onNote(String.format(Locale.ROOT, "matmul.algorithm=timed: %d product shapes timed,"
                        + " %d on a faster algorithm than cuBLASLt's first choice (a call of each: %.3f ms, %.3f ms on"
                        + " the first choices)", t.timed(), t.faster(), t.chosenMs(), t.firstMs()));
            }
        }
    }

    /** Rank 0 keeps the step's result and tells the listener, with the step's time and the device's peak memory. */
    private void report(TrainState state, StepResult result, long startNanos) {
        if (rank.rank() != 0) {
            return;
        }
        shared.results().add(result);
        shared.tokensSeen().set(state.tokensSeen());
        if (shared.listener() != null) {
            long peak = rank.backend() instanceof CudaBackend gpu ? gpu.allocator().peakReservedBytes() : -1;
            shared.listener().onStep(result, (System.nanoTime() - startNanos) / 1e9, peak);
        }
    }

    /** Whether a stop was asked for in any process of the job: one small all-reduce after every step. */
    private boolean stopAgreed() {
        return job.stop() != null
                && rank.world().allReduce(new double[] {job.stop().reason() != null ? 1 : 0})[0] > 0;
    }

    /**
     * Saves a checkpoint every checkpoint.every steps, after the last step and before a stop; hands the exports due
     * then (checkpoint.export_every, the export at the end) to the process's export thread.
     */
    private void checkpointIfDue(TrainState state, boolean stopping) {
        TrainingJob.CheckpointPlan plan = job.checkpoints();
        int step = state.step();
        boolean last = step == lastStep;
        if (plan == null || !(stopping || last || plan.every() > 0 && step % plan.every() == 0)) {
            return;
        }
        long saving = System.nanoTime();
        Path dir = Checkpoints.save(state, plan.target());
        if (rank.rank() == shared.world().ranks().getFirst()) {
            shared.lastCheckpoint().set(dir);
        }
        if (rank.rank() != 0) {
            return;
        }
        if (shared.listener() != null) {
            shared.listener().onCheckpoint(step, dir, (System.nanoTime() - saving) / 1e9);
        }
        if (plan.exportEvery() > 0 && (stopping || last || step % plan.exportEvery() == 0)) {
            shared.exports().submit(dir, step); // written on another thread while the ranks go on
        }
        if (plan.exportAtEnd() != null && last && !stopping) {
            shared.exports().submit(dir, plan.exportAtEnd().dir(), plan.exportAtEnd().dtype());
        }
    }

    /** Runs the evaluations due after {@code step}; rank 0 tells the listener the keys they found. */
    private void evaluateIfDue(FsdpModel model, int step, int firstStep) {
        Map<String, Object> keys = new LinkedHashMap<>();
        boolean any = false;
        long start = System.nanoTime();
        for (Evaluator evaluator : job.evaluators()) {
            if (evaluator.dueAt(step, firstStep, lastStep)) {
                any = true;
                Map<String, Object> found = evaluator.evaluate(model, step); // collectives: every rank takes part
                if (found != null) {
                    keys.putAll(found);
                }
            }
        }
        if (any && rank.rank() == 0 && shared.listener() != null) {
            if (!keys.isEmpty()) { // the wall time of this step's evaluations, as HF Trainer's eval_runtime
                keys.put("eval_seconds", Math.round((System.nanoTime() - start) / 1e6) / 1e3);
            }
            shared.listener().onEval(step, keys);
        }
    }

    /** Rank 0 keeps the fp32 parameters of every unit after the last step, when the job asked for them. */
    private void keepFinalParams(FsdpModel model) {
        if (!shared.keepFinalParams()) {
            return;
        }
        for (int u = 0; u < model.units().size(); u++) {
            float[] full = model.fullParameters(u); // a collective: every rank takes part
            if (rank.rank() == 0) {
                shared.finalParams().add(full);
            }
        }
    }
}
