package io.fsdp4j.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLGenerator;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The whole config of a training run, one record per section. Built by {@link #load} from a YAML file and
 * {@code --set} overrides; every record checks its own ranges, so a {@code TrainConfig} that exists is valid.
 * {@link #defaults()} is where the built-in demo starts (the {@code tiny} preset on 2 CPU-sized ranks); the demo's
 * own settings ({@code io.fsdp4j.train.DemoRun#settings}) come on top of them.
 * The keys and their defaults are listed in {@code package-info.java}.
 */
public record TrainConfig(ModelSection model, DataSection data, TrainSection train, OptimSection optim,
                          ScheduleSection schedule, FsdpSection fsdp, DistSection dist, CheckpointSection checkpoint,
                          LogSection log) {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final YAMLMapper YAML_OUT = YAMLMapper.builder()
            .disable(YAMLGenerator.Feature.WRITE_DOC_START_MARKER)
            .enable(YAMLGenerator.Feature.MINIMIZE_QUOTES)
            .build();

    public TrainConfig {
        Objects.requireNonNull(model, "model");
        Objects.requireNonNull(data, "data");
        Objects.requireNonNull(train, "train");
        Objects.requireNonNull(optim, "optim");
        Objects.requireNonNull(schedule, "schedule");
        Objects.requireNonNull(fsdp, "fsdp");
        Objects.requireNonNull(dist, "dist");
        Objects.requireNonNull(checkpoint, "checkpoint");
        Objects.requireNonNull(log, "log");
    }

    /** The built-in demo config: every key at its default. */
    public static TrainConfig defaults() {
        return load(null, List.of());
    }

    /**
     * Reads {@code yamlOrNull} (null: start from the defaults), applies each {@code key=value} of
     * {@code setOverrides} in order (later ones win; lists comma-separated, {@code optim.betas=0.9,0.95}; an empty
     * value or {@code null} clears a path), then binds and validates.
     *
     * @throws io.fsdp4j.UserError with a one-line message naming the file or the key at fault
     */
    public static TrainConfig load(Path yamlOrNull, List<String> setOverrides) {
        ObjectNode root = yamlOrNull == null ? ConfigTree.empty() : ConfigTree.readYaml(yamlOrNull);
        for (String assignment : setOverrides) {
            ConfigTree.applySet(root, assignment);
        }
        return bind(new ConfigTree.Section(root));
    }

    /** This config with more {@code key=value} settings applied, as {@code --set} would. */
    public TrainConfig with(String... settings) {
        ObjectNode root = JSON.valueToTree(toMap());
        for (String assignment : settings) {
            ConfigTree.applySet(root, assignment);
        }
        return bind(new ConfigTree.Section(root));
    }

    private static TrainConfig bind(ConfigTree.Section root) {
        var model = ModelSection.bind(root.section("model"));
        var data = DataSection.bind(root.section("data"));
        var train = TrainSection.bind(root.section("train"));
        var optim = OptimSection.bind(root.section("optim"));
        var schedule = ScheduleSection.bind(root.section("schedule"));
        var fsdp = FsdpSection.bind(root.section("fsdp"));
        var dist = DistSection.bind(root.section("dist"));
        var checkpoint = CheckpointSection.bind(root.section("checkpoint"));
        var log = LogSection.bind(root.section("log"));
        root.finish();
        return new TrainConfig(model, data, train, optim, schedule, fsdp, dist, checkpoint, log);
    }

    /**
     * The effective config as nested maps in the user's spelling (section, then key, in the documented order):
     * strings, numbers, booleans, lists and nulls only. Loading it back as YAML gives an equal config.
     */
    public Map<String, Object> toMap() {
        var m = new LinkedHashMap<String, Object>();
        m.put("model", model.toMap());
        m.put("data", data.toMap());
        m.put("train", train.toMap());
        m.put("optim", optim.toMap());
        m.put("schedule", schedule.toMap());
        m.put("fsdp", fsdp.toMap());
        m.put("dist", dist.toMap());
        m.put("checkpoint", checkpoint.toMap());
        m.put("log", log.toMap());
        return m;
    }

    /** {@link #toMap()} as one line of JSON, for logs and run summaries. */
    public String toJson() {
        try {
            return JSON.writeValueAsString(toMap());
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {@link #toMap()} as a YAML document that {@link #load} reads back to an equal config. */
    public String toYaml() {
        try {
            return YAML_OUT.writeValueAsString(toMap());
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Every key as {@code section.name}, in the documented order. */
    public static List<String> keys() {
        var keys = new ArrayList<String>();
        defaults().toMap().forEach((section, values) -> {
            if (values instanceof Map<?, ?> map) {
                map.keySet().forEach(k -> keys.add(section + "." + k));
            }
        });
        return keys;
    }

    /** A path as the config map shows it. */
    static String text(Path path) {
        return path == null ? null : path.toString();
    }
}
