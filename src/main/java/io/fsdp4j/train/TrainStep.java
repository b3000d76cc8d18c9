package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.comm.RankContext;
import io.fsdp4j.data.BatchSampler;
import io.fsdp4j.data.Sequence;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.model.TokenBatch;
import io.fsdp4j.optim.AdamW;
import io.fsdp4j.optim.LossScaler;
import io.fsdp4j.optim.LrSchedule;
import java.util.ArrayList;
import java.util.List;

/** The step function: one optimizer step of one rank, reading top to bottom. */
public final class TrainStep {
    private final FsdpModel model;
    private final AdamW optimizer;
    private final LrSchedule schedule;
    private final double maxGradNorm;
    /** The run's seed ({@code train.seed}), which what training draws at random (LoRA's dropout) is keyed by. */
    private final long seed;
    private final LossScaler scaler;

    public TrainStep(FsdpModel model, AdamW optimizer, LrSchedule schedule, double maxGradNorm, long seed,
                     LossScaler scaler) {
        this.model = model;
        this.optimizer = optimizer;
        this.schedule = schedule;
        this.maxGradNorm = maxGradNorm;
        this.seed = seed;
        this.scaler = scaler;
    }

    /** With seed 0 and without loss scaling. */
    public TrainStep(FsdpModel model, AdamW optimizer, LrSchedule schedule, double maxGradNorm) {
        this(model, optimizer, schedule, maxGradNorm, 0, LossScaler.none());
    }

    public FsdpModel model() {
        return model;
    }

    public AdamW optimizer() {
        return optimizer;
    }

    private static int[] documentStarts(Sequence s) {
        return s.documentStarts() != null ? s.documentStarts() : new int[s.length()];
    }

    /**
     * One optimizer step (1-based) over this rank's micro-batches, each a list of equal-length sequences.
     * Every rank must call it with the same number of micro-batches. A step whose loss or gradient norm is not
     * finite changes nothing ({@link StepResult#skipped}) but the loss scale, which a dynamic scaler then halves.
     */
    public StepResult step(int step, List<List<Sequence>> microBatches) {
        RankContext rank = model.rank();
        model.zeroGrad();
        try (var stepScope = rank.backend().newScope(); var entered = stepScope.enter()) {
            return stepIn(step, microBatches, rank);
        }
    }

    private StepResult stepIn(int step, List<List<Sequence>> microBatches, RankContext rank) {

        // 1. the loss is the mean over every position with a label in the global batch: count them first
        long localTargets = 0, localTokens = 0;
        List<TokenBatch> batches = new ArrayList<>();
        for (int m = 0; m < microBatches.size(); m++) {
            List<Sequence> micro = microBatches.get(m);
            int[][] ids = micro.stream().map(Sequence::ids).toArray(int[][]::new);
            int[][] labels = micro.stream().map(Sequence::labels).toArray(int[][]::new);
            boolean packed = micro.stream().anyMatch(s -> s.documentStarts() != null);
            int[][] starts = packed ? micro.stream().map(TrainStep::documentStarts).toArray(int[][]::new) : null;
            localTargets += TokenBatch.countTargets(labels, starts);
            localTokens += (long) ids.length * ids[0].length;
            int first = BatchSampler.firstOf(rank.rank(), microBatches.size(), m, micro.size()); // the sampler's slice
            batches.add(TokenBatch.of(rank.backend(), ids, labels, starts)
                    .inTraining(new TokenBatch.Training(seed, step, first)));
        }
        double[] counts = rank.world().allReduce(new double[] {localTargets, localTokens});
        long globalTargets = (long) counts[0];
        if (globalTargets == 0) {
            throw new UserError("step " + step + ": no position of the global batch has a label (all are -100)");
        }

        // 2. forward and backward of every micro-batch, the loss multiplied by the loss scale (fp16: so that small
        // gradients stay above fp16's smallest values); gradients reduced after the last one
        double lossScale = scaler.scale();
        double localLoss = model.forwardBackward(batches, (float) (lossScale / globalTargets));
        double loss = rank.world().allReduce(new double[] {localLoss})[0] / globalTargets;

        // 3. clip by the global norm across all shards, the loss scale divided out (the norm is reported before
        // clipping); an inf or NaN in any rank's gradient makes this norm, reduced over the job, not finite everywhere
        double gradNorm = Math.sqrt(model.gradNormSquared()) / lossScale;
        float clip = 1f;
        if (maxGradNorm > 0) {
            double coef = maxGradNorm / (gradNorm + 1e-6);
            if (coef < 1) {
                clip = (float) coef;
            }
        }

        // 4. update the master shards with this step's learning rate, the gradients scaled by the clipping factor and
        // unscaled (the scale is a power of two under dynamic scaling: exact); a loss or norm that is not finite skips
        // the update (both are reduced over the job: every rank skips) and the loss scale adapts alike on every rank
        double lr = schedule.at(step);
        boolean finite = Double.isFinite(loss) && Double.isFinite(gradNorm);
        if (finite) {
            optimizer.step((float) lr, (float) (clip / lossScale));
        }
        boolean overflowed = !finite && scaler.isOverflow(loss);
        scaler.update(finite);
        return new StepResult(step, loss, gradNorm, lr, (long) counts[1], globalTargets, !finite, lossScale,
                overflowed);
    }
}
