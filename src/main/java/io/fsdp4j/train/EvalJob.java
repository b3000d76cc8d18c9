package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.comm.DeviceMesh;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.config.DeviceKind;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.fsdp.FsdpPolicy;
import io.fsdp4j.job.LocalRanks;
import io.fsdp4j.job.RankThreads;
import io.fsdp4j.eval.EvalModel;
import io.fsdp4j.eval.ShardedEvaluation;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;

/**
 * The ranks of {@code fsdp4j eval} and {@code fsdp4j score}: the job that {@code --set dist.*} describes, started as
 * {@code train} starts it (CPU threads, or GPUs; one process or several), each rank holding only its shards of the
 * model ({@code fsdp.*}: strategy, offload, {@code fsdp.param_dtype}), read from the model directory or checkpoint,
 * and evaluating its share ({@link ShardedEvaluation}). No rank holds the model whole. It lives beside the training
 * job because it starts its ranks the same way ({@link JobSetup}).
 */
public final class EvalJob {
    private EvalJob() {}

    /**
     * The config of {@code settings} ({@code key=value}, only {@code dist.*} and {@code fsdp.*} keys). On GPUs, as
     * for a fine-tune, one rank per GPU and {@code fsdp.param_dtype=bf16} unless the settings say otherwise.
     */
    public static TrainConfig config(List<String> settings) {
        for (String s : settings) {
            if (!s.startsWith("dist.") && !s.startsWith("fsdp.")) {
                throw new UserError("--set " + s + ": eval and score take dist.* and fsdp.* keys (the ranks and how the "
                        + "model is sharded over them), as train does");
            }
        }
        TrainConfig given = TrainConfig.load(null, settings);
        List<String> all = new ArrayList<>();
        if (given.dist().device() != DeviceKind.CPU && NativeLibraries.cudaAvailable()) {
            all.add("dist.ranks=" + Cuda.deviceCount());
            all.add("fsdp.param_dtype=bf16");
        }
        all.addAll(settings);
        return TrainConfig.load(null, all);
    }

    /**
     * Starts the ranks of {@code config}, shards {@code model} over them and runs {@code body} on each (every rank
     * with the same inputs: it is collective); returns rank 0's result, or null in a process that does not host
     * rank 0.
     *
     * @param batchSize sequences (of one length) or prompts per forward
     */
    public static <T> T run(TrainConfig config, EvalModel model, int batchSize, Function<ShardedEvaluation, T> body) {
        DeviceMesh mesh = JobSetup.mesh(config);
        LocalRanks world = JobSetup.localRanks(config, mesh);
        FsdpPolicy policy = FsdpPolicy.of(config.fsdp());
        AtomicReference<T> result = new AtomicReference<>();
        model.withParams((base, adapters) -> {
            RankThreads.run(world, r -> {
                RankContext rank = world.open(r);
                try {
                    // forward only: no master or gradient; with an adapter (--adapter) the base and the adapters
                    // beside it, unmerged, both frozen (a QLoRA checkpoint's base held in NF4, as in its run)
                    FsdpModel sharded = adapters == null ? FsdpModel.forwardOnly(model.create(rank.backend()), rank,
                            policy, base) : FsdpModel.forwardOnly(model.create(rank.backend()), rank, policy, base,
                            adapters, model.baseQuantization());
                    T mine = body.apply(new ShardedEvaluation(sharded, batchSize));
                    if (r == 0) {
                        result.set(mine);
                    }
                } finally {
                    world.close(rank);
                }
            });
            return null;
        });
        return result.get();
    }
}
