package io.fsdp4j.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLGenerator;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The whole config of a training run, one record per section. Built by {@link #load} from a YAML file and
 * {@code --set} overrides; every record checks its own ranges, so a {@code TrainConfig} that exists is valid.
 * {@link #defaults()} is where the built-in demo starts (the {@code tiny} preset on 2 CPU-sized ranks); the demo's
 * own settings ({@code io.fsdp4j.train.Demo#settings}) come on top of them.
 * The keys and their defaults are listed in {@code package-info.java}.
 */
public record TrainConfig(ModelSection model, DataSection data, TrainSection train, OptimSection optim,
                          ScheduleSection schedule, FsdpSection fsdp, DistSection dist, CheckpointSection checkpoint,
                          LogSection log, RunSection run, LoraSection lora, AttentionSection attention,
                          MatmulSection matmul) {
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
        Objects.requireNonNull(run, "run");
        Objects.requireNonNull(lora, "lora");
        Objects.requireNonNull(attention, "attention");
        Objects.requireNonNull(matmul, "matmul");
    }

    /** The built-in demo config: every key at its default. */
    public static TrainConfig defaults() {
        return load(null, List.of());
    }

    /**
     * Reads {@code yamlOrNull} (null: start from the defaults), applies each {@code key=value} of
     * {@code setOverrides} in order (later ones win; lists comma-separated, {@code optim.betas=0.9,0.95}; an empty
     * value or {@code null} clears a path), then binds and validates. The defaults are a preset's, on CPU ranks: see
     * {@link #load(Path, List, int, Instant)} for a fine-tune's and a run directory.
     *
     * @throws io.fsdp4j.UserError with a one-line message naming the file or the key at fault
     */
    public static TrainConfig load(Path yamlOrNull, List<String> setOverrides) {
        return load(yamlOrNull, setOverrides, 0, null);
    }

    /**
     * {@link #load(Path, List)} for a run on a machine with {@code gpus} GPUs to use (0: CPU ranks), started at
     * {@code runStart} (null: no default run directory).
     *
     * <p>A fine-tune (a config with {@code model.path}) gets a fine-tune's defaults: {@code optim.lr} 2e-5, a
     * warmup of 3% of the steps ({@code schedule.warmup_ratio} 0.03), {@code data.seq_len} auto, and on GPUs
     * {@code fsdp.param_dtype} bf16, one rank per GPU ({@code dist.ranks}), and {@code fsdp.activation_checkpointing}
     * and {@code fsdp.param_copy} auto (decided at the run's start: {@code train.MemoryFit}). A preset keeps the demo's.
     *
     * <p>With {@code runStart}, {@code run.dir} defaults to {@code runs/NAME} ({@link RunSection#nameOr}), and
     * {@code checkpoint.dir} and {@code log.metrics} that the config leaves out go into it ({@code checkpoints/},
     * {@code metrics.jsonl}); one given as null or empty stays off.
     */
    public static TrainConfig load(Path yamlOrNull, List<String> setOverrides, int gpus, Instant runStart) {
        setOverrides.forEach(ConfigTree::checkSetForm); // before the file: '--set a.b 5' is not a file named 5
        ObjectNode root = yamlOrNull == null ? ConfigTree.empty() : ConfigTree.readYaml(yamlOrNull);
        for (String assignment : setOverrides) {
            ConfigTree.applySet(root, assignment);
        }
        UnknownKeys.require(root, Known.KEYS);
        if (runStart == null) {
            return bind(new ConfigSection(root), gpus);
        }
        var probe = new ConfigSection(root.deepCopy()); // the model and the run name, for the default run.dir
        ModelSection model = ModelSection.bind(probe.section("model"));
        RunSection given = RunSection.bind(probe.section("run"));
        Path dir = given.dir() != null ? given.dir() : unused(RunSection.RUNS.resolve(given.nameOr(model, runStart)));
        ObjectNode run = root.get("run") instanceof ObjectNode r ? r : root.putObject("run");
        run.put("dir", dir.toString());
        ObjectNode ck = root.get("checkpoint") instanceof ObjectNode c ? c : root.putObject("checkpoint");
        if (!ck.has("dir")) {
            ck.put("dir", dir.resolve("checkpoints").toString());
        }
        ObjectNode log = root.get("log") instanceof ObjectNode l ? l : root.putObject("log");
        if (!log.has("metrics")) {
            log.put("metrics", dir.resolve("metrics.jsonl").toString());
        }
        return bind(new ConfigSection(root), gpus);
    }

    /** {@code run.*} as the file and the settings give it, before any default: whether the user names the run. */
    public static RunSection givenRun(Path yamlOrNull, List<String> setOverrides) {
        ObjectNode root = yamlOrNull == null ? ConfigTree.empty() : ConfigTree.readYaml(yamlOrNull);
        for (String assignment : setOverrides) {
            ConfigTree.applySet(root, assignment);
        }
        return RunSection.bind(new ConfigSection(root).section("run"));
    }

    /** {@code dir}, or when it exists {@code dir-2}, {@code dir-3}, ...: two runs started in one second differ. */
    private static Path unused(Path dir) {
        Path candidate = dir;
        for (int n = 2; java.nio.file.Files.exists(candidate); n++) {
            candidate = dir.resolveSibling(dir.getFileName() + "-" + n);
        }
        return candidate;
    }

    /** This config with more {@code key=value} settings applied, as {@code --set} would. */
    public TrainConfig with(String... settings) {
        ObjectNode root = JSON.valueToTree(toMap());
        for (String assignment : settings) {
            ConfigTree.checkSetForm(assignment);
            ConfigTree.applySet(root, assignment);
        }
        UnknownKeys.require(root, Known.KEYS);
        return bind(new ConfigSection(root), 0); // every key is given: no default applies
    }

    /** Whether this run starts from a model's weights (model.path) rather than a preset's random ones. */
    public boolean fineTune() {
        return model.path() != null;
    }

    /** Every section and key the binds read, found by binding an empty config once. */
    private static final class Known {
        static final Map<String, List<String>> KEYS = keys();

        private static Map<String, List<String>> keys() {
            var root = new ConfigSection(ConfigTree.empty());
            bind(root, 0);
            return root.knownKeys();
        }
    }

    /** Binds every section; a fine-tune's defaults where model.path is given (on {@code gpus} GPUs, or CPU ranks). */
    private static TrainConfig bind(ConfigSection root, int gpus) {
        var model = ModelSection.bind(root.section("model"));
        boolean fineTune = model.path() != null, onGpus = fineTune && gpus > 0;
        var data = DataSection.bind(root.section("data"), fineTune ? 0 : DataSection.defaults().seqLen());
        var train = TrainSection.bind(root.section("train"));
        var optim = OptimSection.bind(root.section("optim"), fineTune ? OptimSection.fineTuneDefaults()
                : OptimSection.defaults());
        var schedule = ScheduleSection.bind(root.section("schedule"), fineTune ? ScheduleSection.fineTuneDefaults()
                : ScheduleSection.defaults());
        var fsdp = FsdpSection.bind(root.section("fsdp"), onGpus ? Precision.BF16 : FsdpSection.defaults().paramDtype(),
                onGpus);
        var dist = DistSection.bind(root.section("dist"), onGpus ? gpus : DistSection.defaults().ranks());
        var checkpoint = CheckpointSection.bind(root.section("checkpoint"));
        var run = RunSection.bind(root.section("run"));
        var log = LogSection.bind(root.section("log"), run.dir());
        var lora = LoraSection.bind(root.section("lora"));
        var attention = AttentionSection.bind(root.section("attention"));
        var matmul = MatmulSection.bind(root.section("matmul"));
        root.finish();
        return new TrainConfig(model, data, train, optim, schedule, fsdp, dist, checkpoint, log, run, lora, attention,
                matmul);
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
        m.put("run", run.toMap());
        m.put("lora", lora.toMap());
        m.put("attention", attention.toMap());
        m.put("matmul", matmul.toMap());
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
