package io.fsdp4j.optim;

import io.fsdp4j.config.ScheduleKind;

/**
 * Learning rate of step s = 1..steps: linear warmup to the peak over warmupSteps (lr * s / W), then constant,
 * cosine or linear decay to {@code minLrRatio * lr} at the last step.
 */
public record LrSchedule(ScheduleKind kind, double peakLr, int warmupSteps, int totalSteps, double minLrRatio) {

    public double at(int step) {
        if (step <= warmupSteps) {
            return peakLr * step / warmupSteps;
        }
        double progress = (double) (step - warmupSteps) / Math.max(1, totalSteps - warmupSteps);
        double factor = switch (kind) {
            case CONSTANT -> 1.0;
            case COSINE -> minLrRatio + (1 - minLrRatio) * 0.5 * (1 + Math.cos(Math.PI * progress));
            case LINEAR -> minLrRatio + (1 - minLrRatio) * (1 - progress);
        };
        return peakLr * factor;
    }
}
