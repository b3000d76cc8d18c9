package io.fsdp4j.config;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@code log.*}: metrics.
 *
 * @param metrics        {@code log.metrics}: a JSONL file that gets one line per logged step, or null
 * @param every          {@code log.every}: log every this many steps, >= 1
 * @param prometheusPort {@code log.prometheus_port}: serve Prometheus metrics on this port; 0 is off
 * @param evalEvery      {@code log.eval_every}: with {@code data.eval}, its loss every this many steps; 0: only after
 *                       the last step
 */
public record LogSection(Path metrics, int every, int prometheusPort, int evalEvery) {
    public LogSection {
        Check.atLeast("log.every", every, 1);
        Check.atLeast("log.eval_every", evalEvery, 0);
        Check.between("log.prometheus_port", prometheusPort, 0, 65535);
    }

    public static LogSection defaults() {
        return new LogSection(null, 1, 0, 0);
    }

    static LogSection bind(ConfigTree.Section s) {
        var d = defaults();
        var metrics = s.path("metrics");
        int every = s.integer("every", d.every());
        int port = s.integer("prometheus_port", d.prometheusPort());
        int evalEvery = s.integer("eval_every", d.evalEvery());
        s.finish();
        return new LogSection(metrics, every, port, evalEvery);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("metrics", TrainConfig.text(metrics));
        m.put("every", every);
        m.put("prometheus_port", prometheusPort);
        m.put("eval_every", evalEvery);
        return m;
    }
}
