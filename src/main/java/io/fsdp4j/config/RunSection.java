package io.fsdp4j.config;

import java.nio.file.Path;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * {@code run.*}: the run's output directory, where everything it writes goes unless a key says otherwise: the
 * resolved config ({@code config.yaml}), {@code metrics.jsonl}, {@code plots/}, {@code checkpoints/} and the final
 * Hugging Face export ({@code export/}), as Trainer's {@code output_dir}, axolotl's and torchtune's do.
 *
 * @param dir  {@code run.dir}: the directory; null until {@link TrainConfig#inRunDirectory} gives it its default,
 *             {@code runs/NAME}
 * @param name {@code run.name}: the run's name, the last part of the default {@code run.dir}; null: the model's
 *             name and the UTC time the run started ({@code qwen2.5-7b-instruct-20261125-143000})
 */
public record RunSection(Path dir, String name) {
    /** Where default run directories go, relative to the current directory. */
    public static final Path RUNS = Path.of("runs");
    private static final DateTimeFormatter STAMP = DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")
            .withZone(ZoneOffset.UTC);

    public RunSection {
        if (name != null && (name.contains("/") || name.contains("\\") || name.equals(".") || name.equals(".."))) {
            throw new io.fsdp4j.UserError("config key 'run.name' must be a name, not a path, got '" + name
                    + "'; give a directory as run.dir");
        }
    }

    public static RunSection defaults() {
        return new RunSection(null, null);
    }

    /** {@code run.name}, or the default name of a run of {@code model} started at {@code start}. */
    public String nameOr(ModelSection model, Instant start) {
        if (name != null) {
            return name;
        }
        String base = model.path() != null ? model.path().toAbsolutePath().normalize().getFileName().toString()
                : model.preset();
        base = base.replaceAll("[^A-Za-z0-9._-]+", "-").toLowerCase(Locale.ROOT);
        return base + "-" + STAMP.format(start);
    }

    static RunSection bind(ConfigSection s) {
        Path dir = s.path("dir");
        String name = s.optionalString("name");
        s.finish();
        return new RunSection(dir, name);
    }

    Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("dir", TrainConfig.text(dir));
        m.put("name", name);
        return m;
    }
}
