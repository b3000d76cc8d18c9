package io.fsdp4j.optim;

import io.fsdp4j.config.LossScaling;

/**
 * The loss scale of a run ({@code fsdp.loss_scale}) and its dynamics, as {@code torch.amp.GradScaler}: backward
 * computes the gradients of {@code scale() * loss}; the step divides the scale out of the gradient norm and the
 * gradients before clipping and AdamW; {@link #update} is told whether the step's gradients were finite on every rank
 * (the verdict must be the job's, reduced over all ranks, so that every rank's scaler stays the same). A dynamic scale
 * is halved after a step that was not finite and doubled after {@code growthInterval} finite ones in a row; a static
 * one or none never changes. Its state (the scale and the finite steps since it last changed) is saved in checkpoints.
 */
public final class LossScaler {
    private final LossScaling setting;
    private double scale;
    private int cleanSteps;

    public LossScaler(LossScaling setting) {
        this.setting = setting;
        this.scale = setting.mode() == LossScaling.Mode.NONE ? 1 : setting.initScale();
    }

    /** No scaling: a scale of 1 that never changes. */
    public static LossScaler none() {
        return new LossScaler(LossScaling.none());
    }

    /** What the loss of the next step is multiplied by before backward. */
    public double scale() {
        return scale;
    }

    public boolean isDynamic() {
        return setting.mode() == LossScaling.Mode.DYNAMIC;
    }

    /** Whether the loss is multiplied at all (a static or dynamic scale). */
    public boolean isScaling() {
        return setting.mode() != LossScaling.Mode.NONE;
    }

    /** Finite steps in a row since the scale last changed (GradScaler's growth tracker). */
    public int cleanSteps() {
        return cleanSteps;
    }

    /**
     * Whether a step skipped at the current scale (before {@link #update}) was the scale's overflow, which the scale's
     * backoff answers: dynamic scaling, a finite loss (the forward did not overflow) and a scale of at least 1 (below,
     * what overflows is no longer the scale but the gradients themselves).
     */
    public boolean isOverflow(double loss) {
        return isDynamic() && Double.isFinite(loss) && scale >= 1;
    }

    /**
     * After a step: {@code finite} whether its gradients were finite on every rank (its update was then applied; else
     * skipped everywhere). A dynamic scale backs off after a step that was not, and grows after growthInterval that
     * were.
     */
    public void update(boolean finite) {
        if (!isDynamic()) {
            return;
        }
        if (!finite) {
            scale *= LossScaling.BACKOFF_FACTOR;
            cleanSteps = 0;
        } else if (++cleanSteps >= setting.growthInterval()) {
            scale *= LossScaling.GROWTH_FACTOR;
            cleanSteps = 0;
        }
    }

    /**
     * Continues from a checkpoint's state. A run that saved no state (no scaling then, or an earlier version) leaves
     * this one's initial state; so does a dynamic state resumed by a run without dynamic scaling.
     */
    public void restore(Double savedScale, Integer savedCleanSteps) {
        if (!isDynamic() || savedScale == null || !(savedScale > 0) || !Double.isFinite(savedScale)) {
            return;
        }
        this.scale = savedScale;
        this.cleanSteps = savedCleanSteps != null ? Math.max(0, savedCleanSteps) : 0;
    }
}
