package io.fsdp4j.config;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code schedule.*}: the learning rate per step: a linear warmup from 0 to {@code optim.lr}, then {@code kind}.
 *
 * @param kind        {@code schedule.kind}: constant, cosine or linear after the warmup
 * @param warmupSteps {@code schedule.warmup_steps}: steps of linear warmup, >= 0
 * @param minLrRatio  {@code schedule.min_lr_ratio}: the final learning rate as a fraction of {@code optim.lr}, in [0, 1]
 */
public record ScheduleSection(ScheduleKind kind, int warmupSteps, double minLrRatio) {
    public ScheduleSection {
        Check.present("schedule.kind", kind);
        Check.atLeast("schedule.warmup_steps", warmupSteps, 0);
        Check.inRange("schedule.min_lr_ratio", minLrRatio, 0, 1, false);
    }

    public static ScheduleSection defaults() {
        return new ScheduleSection(ScheduleKind.COSINE, 10, 0.1);
    }

    static ScheduleSection bind(ConfigTree.Section s) {
        var d = defaults();
        var kind = s.choice("kind", ScheduleKind.class, d.kind());
        int warmupSteps = s.integer("warmup_steps", d.warmupSteps());
        double minLrRatio = s.number("min_lr_ratio", d.minLrRatio());
        s.finish();
        return new ScheduleSection(kind, warmupSteps, minLrRatio);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("kind", kind.spelling());
        m.put("warmup_steps", warmupSteps);
        m.put("min_lr_ratio", minLrRatio);
        return m;
    }
}
