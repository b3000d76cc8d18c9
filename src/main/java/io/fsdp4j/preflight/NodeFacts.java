package io.fsdp4j.preflight;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.fsdp4j.UserError;
import io.fsdp4j.Version;
import io.fsdp4j.config.DeviceKind;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.CublasLt;
import io.fsdp4j.cuda.NativeLibraries;
import io.fsdp4j.cuda.Nccl;
import io.fsdp4j.cuda.Nvrtc;
import io.fsdp4j.doctor.GpuHealth;
import io.fsdp4j.safetensors.SafetensorsDirectory;
import io.fsdp4j.safetensors.SafetensorsFile;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;

/**
 * The facts one node contributes to the preflight, most telling first (a comparison reports the first that
 * differs): fsdp4j's version and build, the JDK, the native libraries' versions when the job runs on CUDA, the
 * model (config.json's digest and one fingerprint per safetensors file, or the preset), the datasets'
 * fingerprints, then the effective config key by key, each value as canonical JSON, without the keys that may
 * rightly differ between nodes ({@link #PER_NODE_KEYS}).
 */
public record NodeFacts(List<Fact> facts, List<Measure> measures, String healthProblem) {
    /**
     * Config keys that may differ between the nodes of one job: a node's own index and addresses, paths whose
     * content is compared instead (a model or dataset may be mounted at different places on different nodes), and
     * the preflight's own switch (a process that skips says so to the others).
     */
    public static final Set<String> PER_NODE_KEYS = Set.of("dist.node_rank", "dist.rdzv", "model.path", "data.train",
            "data.eval", "log.metrics", "log.tensorboard", "log.prometheus_port", "dist.preflight");

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String SAME_CONFIG = "give every node the same config file and --set flags";

    public NodeFacts {
        facts = List.copyOf(facts);
        measures = List.copyOf(measures);
    }

    /** Facts without a health test. */
    public NodeFacts(List<Fact> facts) {
        this(facts, List.of(), null);
    }

    /**
     * These facts with the GPU health test's outcome: its rates as {@link Measure}s, or what failed
     * ({@code healthProblem}), which stops the job naming this node.
     */
    public NodeFacts withHealth(GpuHealth.Quick quick) {
        if (quick.problem() != null) {
            return new NodeFacts(facts, List.of(), quick.problem());
        }
        return new NodeFacts(facts, List.of(
                new Measure("gpu.gemm", "bf16 product rate of the slowest GPU", quick.gemmFlops() / 1e12, "TFLOP/s"),
                new Measure("gpu.copy", "memory bandwidth of the slowest GPU", quick.copyBytesPerSecond() / 1e12, "TB/s")),
                null);
    }

    /** The facts of this node for a job of {@code config}; {@code cuda}: the job runs on the CUDA backend. */
    public static NodeFacts of(TrainConfig config, boolean cuda) {
        List<Fact> facts = new ArrayList<>();
        facts.add(Fact.enforced("fsdp4j", "fsdp4j version", build(),
                "install the same fsdp4j build on every node"));
        facts.add(Fact.enforced("java", "JDK", Runtime.version() + " (" + System.getProperty("java.vendor", "?") + ")",
                "run every node on the same JDK (JAVA_HOME)"));
        if (cuda) {
            facts.addAll(libraries());
        }
        facts.addAll(model(config));
        facts.add(Fact.enforced("data.train", "training data", dataset(config.data().train(), "the built-in demo instructions"),
                "check data.train on {nodes}"));
        facts.add(Fact.enforced("data.eval", "evaluation data", dataset(config.data().eval(), "none"),
                "check data.eval on {nodes}"));
        facts.addAll(configFacts(config));
        return new NodeFacts(facts);
    }

    /** The facts of a config alone, key by key, as canonical JSON values; {@link #PER_NODE_KEYS} left out. */
    static List<Fact> configFacts(TrainConfig config) {
        List<Fact> facts = new ArrayList<>();
        config.toMap().forEach((section, values) -> ((Map<?, ?>) values).forEach((name, value) -> {
            String key = section + "." + name;
            if (!PER_NODE_KEYS.contains(key)) {
                facts.add(Fact.enforced("config." + key, "config key " + key, canonicalJson(value), SAME_CONFIG));
            }
        }));
        return facts;
    }

    private static List<Fact> model(TrainConfig config) {
        Path dir = config.model().path();
        if (dir == null) {
            return List.of(Fact.enforced("model", "model", "preset " + config.model().preset()
                            + (config.model().layers() > 0 ? ", " + config.model().layers() + " layers" : ""),
                    "give every node the same model.preset or model.path"));
        }
        String hint = "check model.path on {nodes}";
        List<Fact> facts = new ArrayList<>();
        Path configJson = dir.resolve("config.json");
        if (!Files.isRegularFile(configJson)) {
            throw new UserError("preflight: model.path " + dir + " has no config.json on this node");
        }
        facts.add(Fact.enforced("model.config", "model config.json", "sha256 " + Fingerprints.ofSmallFile(configJson),
                hint));
        try (SafetensorsDirectory weights = SafetensorsDirectory.open(dir)) {
            Map<String, Path> files = new java.util.TreeMap<>(); // by name: the same order on every node
            for (SafetensorsFile file : weights.files()) {
                files.put(dir.toAbsolutePath().relativize(file.path().toAbsolutePath()).toString(), file.path());
            }
            for (var e : files.entrySet()) {
                String name = e.getKey();
                facts.add(Fact.enforced("model.weights/" + name, "model weights (" + name + ")",
                        "fingerprint " + Fingerprints.ofSafetensors(e.getValue()), hint).pluralName());
            }
        }
        return facts;
    }

    private static String dataset(Path path, String none) {
        return path == null ? none : Fingerprints.ofPath(path);
    }

    private static List<Fact> libraries() {
        String hint = "install the same CUDA libraries on every node (see fsdp4j doctor)";
        List<Fact> facts = new ArrayList<>();
        facts.add(Fact.enforced("lib.cudart", "CUDA runtime version",
                version(() -> Cuda.versionString(Cuda.runtimeVersion())), hint));
        facts.add(Fact.enforced("lib.cublaslt", "cuBLASLt version", version(() -> Long.toString(CublasLt.version())), hint));
        facts.add(Fact.enforced("lib.nvrtc", "NVRTC version", version(() -> Nvrtc.version().toString()), hint));
        facts.add(Fact.enforced("lib.nccl", "NCCL version", version(() -> Nccl.versionString(Nccl.version())), hint));
        facts.add(Fact.advisory("driver", "NVIDIA driver's CUDA version",
                version(() -> Cuda.versionString(Cuda.driverVersion())), "compare the drivers"));
        facts.add(Fact.advisory("gpus", "GPUs", version(NodeFacts::gpus), "run fsdp4j doctor on {nodes}"));
        return facts;
    }

    private static String gpus() {
        int n = Cuda.deviceCount();
        Map<String, Integer> byName = new LinkedHashMap<>();
        for (int d = 0; d < n; d++) {
            byName.merge(Cuda.properties(d).name(), 1, Integer::sum);
        }
        List<String> parts = new ArrayList<>();
        byName.forEach((name, count) -> parts.add(count + " x " + name));
        return parts.isEmpty() ? "none" : String.join(", ", parts);
    }

    private static String version(Callable<String> probe) {
        try {
            return probe.call();
        } catch (Throwable t) { // a library that cannot be loaded is a fact too
            return "not available";
        }
    }

    /**
     * fsdp4j's version, with a fingerprint of the classes of the jar this code runs from: every entry's name, size
     * and CRC outside {@code META-INF/} (which holds build dates), so two builds of the same sources by the same JDK
     * agree and two builds of different sources do not.
     */
    static String build() {
        String version = Version.current();
        try {
            var source = NodeFacts.class.getProtectionDomain().getCodeSource();
            if (source != null) {
                Path location = Path.of(source.getLocation().toURI());
                if (Files.isRegularFile(location)) {
                    return version + " (classes " + classesDigest(location) + ")";
                }
            }
        } catch (URISyntaxException | SecurityException | java.io.IOException e) {
            // no jar to fingerprint: the version alone
        }
        return version;
    }

    static String classesDigest(Path jar) throws java.io.IOException {
        try (var zip = new java.util.zip.ZipFile(jar.toFile())) {
            var digest = Fingerprints.sha256();
            zip.stream().filter(e -> !e.isDirectory() && !e.getName().startsWith("META-INF/"))
                    .sorted(java.util.Comparator.comparing(java.util.zip.ZipEntry::getName))
                    .forEach(e -> digest.update((e.getName() + " " + e.getSize() + " " + e.getCrc() + "\n")
                            .getBytes(java.nio.charset.StandardCharsets.UTF_8)));
            return "sha256 " + java.util.HexFormat.of().formatHex(digest.digest());
        }
    }

    static String canonicalJson(Object value) {
        try {
            return JSON.writeValueAsString(value);
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }
}
