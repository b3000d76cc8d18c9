package io.fsdp4j.config;

import io.fsdp4j.UserError;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code schedule.*}: the learning rate per step: a linear warmup from 0 to {@code optim.lr}, then {@code kind}.
 *
 * @param kind        {@code schedule.kind}: constant, cosine or linear after the warmup
 * @param warmupSteps {@code schedule.warmup_steps}: steps of linear warmup, >= 0
 * @param minLrRatio  {@code schedule.min_lr_ratio}: the final learning rate as a fraction of {@code optim.lr}, in [0, 1]
 * @param warmupRatio {@code schedule.warmup_ratio}: the warmup as a fraction of the run's steps, in [0, 1); 0: none.
 *                    Not both with a non-zero {@code warmup_steps}.
 */
public record ScheduleSection(ScheduleKind kind, int warmupSteps, double minLrRatio, double warmupRatio) {
    public ScheduleSection {
        Check.present("schedule.kind", kind);
        Check.atLeast("schedule.warmup_steps", warmupSteps, 0);
        Check.inRange("schedule.min_lr_ratio", minLrRatio, 0, 1, false);
        Check.inRange("schedule.warmup_ratio", warmupRatio, 0, 1, true);
        if (warmupSteps > 0 && warmupRatio > 0) {
            throw new UserError("config keys 'schedule.warmup_steps' (" + warmupSteps + ") and 'schedule.warmup_ratio' ("
                    + warmupRatio + ") are both set; give one (the other 0)");
        }
    }

    /** A warmup of a number of steps. */
    public ScheduleSection(ScheduleKind kind, int warmupSteps, double minLrRatio) {
        this(kind, warmupSteps, minLrRatio, 0);
    }

    /** The defaults of a preset's run (random weights): 10 warmup steps, then cosine to a tenth. */
    public static ScheduleSection defaults() {
        return new ScheduleSection(ScheduleKind.COSINE, 10, 0.1);
    }

    /** The defaults of a fine-tune (model.path): a warmup of 3% of the steps, then cosine to a tenth. */
    public static ScheduleSection fineTuneDefaults() {
        return new ScheduleSection(ScheduleKind.COSINE, 0, 0.1, 0.03);
    }

    /** Warmup steps of a run of {@code totalSteps}: {@code warmup_steps}, or {@code warmup_ratio} of them, rounded up. */
    public int warmupFor(int totalSteps) {
        return warmupRatio > 0 ? (int) Math.ceil(warmupRatio * totalSteps) : warmupSteps;
    }

    static ScheduleSection bind(ConfigSection s, ScheduleSection d) {
        var kind = s.choice("kind", ScheduleKind.class, d.kind());
        boolean stepsGiven = s.has("warmup_steps"), ratioGiven = s.has("warmup_ratio");
        int warmupSteps = s.integer("warmup_steps", ratioGiven ? 0 : d.warmupSteps());
        double minLrRatio = s.number("min_lr_ratio", d.minLrRatio());
        double warmupRatio = s.number("warmup_ratio", stepsGiven ? 0 : d.warmupRatio());
        s.finish();
        return new ScheduleSection(kind, warmupSteps, minLrRatio, warmupRatio);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("kind", kind.spelling());
        m.put("warmup_steps", warmupSteps);
        m.put("min_lr_ratio", minLrRatio);
        m.put("warmup_ratio", warmupRatio);
        return m;
    }
}
