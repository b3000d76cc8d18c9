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
 * @param tensorboard    {@code log.tensorboard}: a directory that gets TensorBoard event files
 *                       ({@code tensorboard --logdir DIR}), or null (off, also {@code false}); {@code true} is
 *                       {@code run.dir/tensorboard} (with no run.dir, {@code tensorboard/} beside {@code log.metrics},
 *                       as the plots), and {@link #UNDER_RUN_DIR} while neither is known
 */
public record LogSection(Path metrics, int every, int prometheusPort, int evalEvery, Path tensorboard) {
    /** {@code log.tensorboard=true} where no run.dir is known (yet): see {@link #tensorboardDir}. */
    public static final Path UNDER_RUN_DIR = Path.of("true");

    public LogSection {
        Check.atLeast("log.every", every, 1);
        Check.atLeast("log.eval_every", evalEvery, 0);
        Check.between("log.prometheus_port", prometheusPort, 0, 65535);
    }

    public static LogSection defaults() {
        return new LogSection(null, 1, 0, 0, null);
    }

    /**
     * The directory of the TensorBoard event files, or null when off; {@code log.tensorboard=true} with no run.dir (a
     * job of several processes that names no run.dir or run.name) is a {@link io.fsdp4j.UserError}.
     */
    public Path tensorboardDir() {
        if (UNDER_RUN_DIR.equals(tensorboard)) {
            throw new io.fsdp4j.UserError("log.tensorboard=true puts event files in run.dir/tensorboard, but this run "
                    + "has no run.dir and no log.metrics (a job of several processes gets neither by default); set "
                    + "run.dir or run.name, or give log.tensorboard a directory");
        }
        return tensorboard;
    }

    /** {@link #bind(ConfigSection, Path)} where no run directory is known. */
    static LogSection bind(ConfigSection s) {
        return bind(s, null);
    }

    /** Binds {@code log.*}; {@code log.tensorboard=true} becomes {@code runDir/tensorboard} when runDir is known. */
    static LogSection bind(ConfigSection s, Path runDir) {
        var d = defaults();
        var metrics = s.path("metrics");
        int every = s.integer("every", d.every());
        int port = s.integer("prometheus_port", d.prometheusPort());
        int evalEvery = s.integer("eval_every", d.evalEvery());
        Path tensorboard = s.boolOrNull("tensorboard") instanceof Boolean on ? on ? runDir != null
                ? runDir.resolve("tensorboard") : metrics != null ? beside(metrics) : UNDER_RUN_DIR : null
                : s.path("tensorboard");
        s.finish();
        return new LogSection(metrics, every, port, evalEvery, tensorboard);
    }

    /** {@code tensorboard/} in the directory of the metrics file (where its plots go too). */
    private static Path beside(Path metrics) {
        Path parent = metrics.getParent();
        return parent == null ? Path.of("tensorboard") : parent.resolve("tensorboard");
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("metrics", TrainConfig.text(metrics));
        m.put("every", every);
        m.put("prometheus_port", prometheusPort);
        m.put("eval_every", evalEvery);
        m.put("tensorboard", UNDER_RUN_DIR.equals(tensorboard) ? Boolean.TRUE : TrainConfig.text(tensorboard));
        return m;
    }
}
