package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.backend.Backend;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.data.BatchSampler;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.dist.DeviceMesh;
import io.fsdp4j.dist.InProcessWorld;
import io.fsdp4j.dist.RankContext;
import io.fsdp4j.dist.RankThreads;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.fsdp.FsdpPolicy;
import io.fsdp4j.fsdp.ParamSource;
import io.fsdp4j.model.LlamaModel;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.optim.AdamW;
import io.fsdp4j.optim.LrSchedule;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A training job on CPU ranks that are threads of this process: builds the mesh, shards the model on each
 * rank, and runs the steps, reporting each step from rank 0. Inputs are resolved already (model config,
 * initial weights, tokenized data); {@link Training} does that from a config for the command line.
 */
public final class TrainingRun {

    /** Called on rank 0 after every step. */
    public interface StepListener {
        void onStep(StepResult result, double seconds);
    }

    /** What the job did. finalParams: the fp32 parameters of each unit after the last step (if asked for). */
    public record Result(List<StepResult> steps, List<RankMemory> memory, List<float[]> finalParams) {}

    private final TrainConfig config;
    private final ModelConfig modelConfig;
    private final ParamSource init;
    private final List<Sequence> data;
    private final boolean shuffle;

    public TrainingRun(TrainConfig config, ModelConfig modelConfig, ParamSource init, List<Sequence> data,
                       boolean shuffle) {
        this.config = config;
        this.modelConfig = modelConfig;
        this.init = init;
        this.data = data.stream().map(s -> s.fitTo(config.data().seqLen())).toList();
        this.shuffle = shuffle;
    }

    public FsdpPolicy policy() {
        var f = config.fsdp();
        return new FsdpPolicy(f.strategy(), f.paramDtype(), f.reduceDtype(), f.activationCheckpointing());
    }

    /** The mesh for this config; refuses an impossible one before any work starts. */
    public DeviceMesh mesh() {
        int ranks = config.dist().ranks();
        return DeviceMesh.of(ranks, policy().shardSize(ranks, config.fsdp().shardSize(), ranks));
    }

    public Result run(StepListener listener, boolean keepFinalParams) {
        DeviceMesh mesh = mesh();
        FsdpPolicy policy = policy();
        int ranks = mesh.worldSize(), batchSize = config.train().batchSize(), microBatches = config.train().gradAccum();
        int globalBatch = ranks * microBatches * batchSize;
        if (data.size() < globalBatch) {
            throw new UserError("the dataset has " + data.size() + " sequences, fewer than one global batch of "
                    + globalBatch + " (ranks x grad_accum x batch_size)");
        }
        BatchSampler sampler = new BatchSampler(data.size(), globalBatch, config.train().seed(), shuffle);
        var opt = config.optim();
        var sched = config.schedule();
        LrSchedule schedule = new LrSchedule(sched.kind(), opt.lr(), sched.warmupSteps(), config.train().steps(),
                sched.minLrRatio());
        InProcessWorld world = new InProcessWorld(mesh, Duration.ofMinutes(10));
        List<StepResult> results = Collections.synchronizedList(new ArrayList<>());
        RankMemory[] memory = new RankMemory[ranks];
        List<float[]> finalParams = Collections.synchronizedList(new ArrayList<>());
        RankThreads.run(world, r -> {
            Backend backend = CpuBackend.INSTANCE;
            RankContext rank = world.rank(r, backend);
            FsdpModel model = FsdpModel.apply(new LlamaModel(modelConfig, backend), rank, policy, init);
            AdamW optimizer = new AdamW(backend, model.units(), (float) opt.beta1(), (float) opt.beta2(),
                    (float) opt.eps(), (float) opt.weightDecay(), opt.decay());
            Trainer trainer = new Trainer(model, optimizer, schedule, opt.maxGradNorm());
            FsdpModel.ShardBytes bytes = model.shardBytes();
            memory[r] = new RankMemory(r, bytes.params(), bytes.grads(), optimizer.stateBytes());
            for (int step = 1; step <= config.train().steps(); step++) {
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
                StepResult result = trainer.step(step, mine);
                if (r == 0) {
                    results.add(result);
                    if (listener != null) {
                        listener.onStep(result, (System.nanoTime() - start) / 1e9);
                    }
                }
            }
            if (keepFinalParams) {
                for (int u = 0; u < model.units().size(); u++) {
                    float[] full = model.fullParameters(u); // a collective: every rank takes part
                    if (r == 0) {
                        finalParams.add(full);
                    }
                }
            }
        });
        return new Result(List.copyOf(results), List.of(memory), List.copyOf(finalParams));
    }
}
