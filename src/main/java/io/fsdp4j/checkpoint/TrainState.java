package io.fsdp4j.checkpoint;

import io.fsdp4j.data.BatchSampler;
import io.fsdp4j.fsdp.FsdpModel;
import io.fsdp4j.optim.AdamW;
import io.fsdp4j.optim.LossScaler;
import io.fsdp4j.optim.LrSchedule;

/**
 * One rank's training state: everything a checkpoint saves and a resumed run continues from. The sharded model (its
 * fp32 master shards), the optimizer (moments and updates made), the learning-rate schedule and the data order (both
 * pure functions of the step, so the step is their position), the loss scale ({@code fsdp.loss_scale}), the last step
 * completed and the tokens seen so far.
 * {@link Checkpoints#save} writes it; {@link Checkpoints#load} builds it from a checkpoint.
 */
public final class TrainState {
    private final FsdpModel model;
    private final AdamW optimizer;
    private final LrSchedule schedule;
    private final BatchSampler sampler;
    private final long tokensPerStep;
    private final LossScaler scaler;
    private int step;
    private long tokensSeen;

    /**
     * A state before its first step.
     *
     * @param tokensPerStep input tokens of one global batch (every step has as many: the global batch at seq_len);
     *                      what a checkpoint of an earlier version, which did not count tokens, is taken to have seen
     */
    public TrainState(FsdpModel model, AdamW optimizer, LrSchedule schedule, BatchSampler sampler, long tokensPerStep,
                      LossScaler scaler) {
        this.model = model;
        this.optimizer = optimizer;
        this.schedule = schedule;
        this.sampler = sampler;
        this.tokensPerStep = tokensPerStep;
        this.scaler = scaler;
    }

    /** Without loss scaling. */
    public TrainState(FsdpModel model, AdamW optimizer, LrSchedule schedule, BatchSampler sampler, long tokensPerStep) {
        this(model, optimizer, schedule, sampler, tokensPerStep, LossScaler.none());
    }

    public LossScaler scaler() {
        return scaler;
    }

    public FsdpModel model() {
        return model;
    }

    public AdamW optimizer() {
        return optimizer;
    }

    public LrSchedule schedule() {
        return schedule;
    }

    public BatchSampler sampler() {
        return sampler;
    }

    /** The last step completed (0 before the first). */
    public int step() {
        return step;
    }

    /** The step training takes next (steps are 1-based). */
    public int nextStep() {
        return step + 1;
    }

    /** Input tokens of every step completed, on every rank of the job. */
    public long tokensSeen() {
        return tokensSeen;
    }

    /** Records step {@code step} as taken, with {@code tokens} input tokens (a skipped step consumed its data too). */
    public void completed(int step, long tokens) {
        this.step = step;
        this.tokensSeen += tokens;
    }

    /** Continues after {@code step}; {@code tokensSeen} null: a checkpoint that did not count them. */
    void resumeAt(int step, Long tokensSeen) {
        this.step = step;
        this.tokensSeen = tokensSeen != null ? tokensSeen : step * tokensPerStep;
    }
}
