package io.fsdp4j.config;

/** {@code schedule.kind}: the learning-rate curve after the linear warmup. */
public enum ScheduleKind implements ConfigChoice {
    /** {@code optim.lr} until the end. */
    CONSTANT,
    /** Half a cosine from {@code optim.lr} down to {@code optim.lr * schedule.min_lr_ratio} at the last step. */
    COSINE,
    /** A straight line from {@code optim.lr} down to {@code optim.lr * schedule.min_lr_ratio} at the last step. */
    LINEAR;

    @Override
    public String toString() {
        return spelling();
    }
}
