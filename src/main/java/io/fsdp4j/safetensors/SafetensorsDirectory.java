package io.fsdp4j.safetensors;

import static io.fsdp4j.safetensors.Messages.error;
import static io.fsdp4j.safetensors.Messages.quote;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SequencedMap;
import java.util.SequencedSet;
import java.util.stream.Stream;

/**
 * The weights of a Hugging Face model directory: {@code model.safetensors}, or the shards named by
 * {@code model.safetensors.index.json}. Every shard is opened and the index checked against the shards'
 * headers when opening, so a broken checkpoint fails before any data is read.
 */
public final class SafetensorsDirectory implements AutoCloseable {
    public static final String SINGLE_FILE = "model.safetensors";
    public static final String INDEX_FILE = "model.safetensors.index.json";

    private final Path directory;
    private final List<SafetensorsFile> files;
    private final SequencedMap<String, SafetensorsFile> owners;

    private SafetensorsDirectory(Path directory, List<SafetensorsFile> files,
            SequencedMap<String, SafetensorsFile> owners) {
        this.directory = directory;
        this.files = List.copyOf(files);
        this.owners = Collections.unmodifiableSequencedMap(owners);
    }

    /**
     * Opens a model directory. Also accepts the path of a {@code .safetensors} file or of an index file.
     *
     * @throws io.fsdp4j.UserError if there are no weights, the index is invalid or disagrees with the shards
     */
    public static SafetensorsDirectory open(Path dir) {
        if (Files.isRegularFile(dir)) {
            Path parent = dir.toAbsolutePath().getParent();
            return dir.getFileName().toString().endsWith(".json") ? openIndex(parent, dir) : openSingle(parent, dir);
        }
        if (!Files.isDirectory(dir)) {
            throw error(dir, "no such directory");
        }
        Path single = dir.resolve(SINGLE_FILE);
        if (Files.exists(single)) {
            return openSingle(dir, single);
        }
        Path index = dir.resolve(INDEX_FILE);
        if (Files.exists(index)) {
            return openIndex(dir, index);
        }
        throw error(dir, "no " + SINGLE_FILE + " or " + INDEX_FILE + " in the directory" + foundHint(dir));
    }

    private static String foundHint(Path dir) {
        try (Stream<Path> entries = Files.list(dir)) {
            List<String> weights = entries.map(p -> p.getFileName().toString())
                    .filter(n -> n.endsWith(".safetensors") || n.endsWith(".bin") || n.endsWith(".pt")
                            || n.endsWith(".pth") || n.endsWith(".index.json"))
                    .sorted()
                    .limit(5)
                    .toList();
            return weights.isEmpty() ? "" : " (found " + String.join(", ", weights) + ")";
        } catch (IOException e) {
            return "";
        }
    }

    private static SafetensorsDirectory openSingle(Path dir, Path file) {
        SafetensorsFile f = SafetensorsFile.open(file);
        SequencedMap<String, SafetensorsFile> owners = new LinkedHashMap<>();
        for (String name : f.names()) {
            owners.put(name, f);
        }
        return new SafetensorsDirectory(dir, List.of(f), owners);
    }

    private static SafetensorsDirectory openIndex(Path dir, Path index) {
        Map<String, String> weightMap = readWeightMap(index);
        Map<String, SafetensorsFile> byFileName = new LinkedHashMap<>();
        boolean done = false;
        try {
            Path base = dir.toAbsolutePath().normalize();
            for (String fileName : new java.util.LinkedHashSet<>(weightMap.values())) {
                Path file = base.resolve(fileName).normalize();
                if (!file.startsWith(base) || file.equals(base)) {
                    throw error(index, "weight_map names file " + quote(fileName) + ", which is outside the directory");
                }
                if (!Files.isRegularFile(file)) {
                    String tensor = weightMap.entrySet().stream().filter(e -> e.getValue().equals(fileName))
                            .findFirst().orElseThrow().getKey();
                    throw error(index, "weight_map maps tensor " + quote(tensor) + " to " + quote(fileName)
                            + ", which does not exist in " + dir);
                }
                byFileName.put(fileName, SafetensorsFile.open(file));
            }
            Map<String, String> seenIn = new LinkedHashMap<>();
            for (var entry : byFileName.entrySet()) {
                for (String name : entry.getValue().names()) {
                    String previous = seenIn.putIfAbsent(name, entry.getKey());
                    if (previous != null) {
                        throw error(index, "tensor " + quote(name) + " is in both " + quote(previous) + " and "
                                + quote(entry.getKey()));
                    }
                }
            }
            SequencedMap<String, SafetensorsFile> owners = new LinkedHashMap<>();
            for (var entry : weightMap.entrySet()) {
                SafetensorsFile file = byFileName.get(entry.getValue());
                if (!file.contains(entry.getKey())) {
                    String actual = seenIn.get(entry.getKey());
                    throw error(index, "weight_map maps tensor " + quote(entry.getKey()) + " to "
                            + quote(entry.getValue()) + ", but that file does not contain it"
                            + (actual == null ? " (no shard does)" : " (it is in " + quote(actual) + ")"));
                }
                owners.put(entry.getKey(), file);
            }
            SafetensorsDirectory result = new SafetensorsDirectory(dir, new ArrayList<>(byFileName.values()), owners);
            done = true;
            return result;
        } finally {
            if (!done) {
                byFileName.values().forEach(SafetensorsFile::close);
            }
        }
    }

    private static Map<String, String> readWeightMap(Path index) {
        byte[] bytes;
        try {
            if (Files.size(index) > SafetensorsHeader.MAX_HEADER_BYTES) {
                throw error(index, "index is larger than " + SafetensorsHeader.MAX_HEADER_BYTES + " bytes");
            }
            bytes = Files.readAllBytes(index);
        } catch (IOException e) {
            throw error(index, "cannot read: " + e, e);
        }
        JsonNode root = SafetensorsHeader.parseJson(index, bytes, "index");
        if (!root.isObject()) {
            throw error(index, "index is " + SafetensorsHeader.kind(root) + ", expected a JSON object");
        }
        JsonNode map = root.get("weight_map");
        if (map == null || !map.isObject()) {
            throw error(index, "index has " + (map == null ? "no" : "a non-object") + " \"weight_map\"; expected"
                    + " an object mapping tensor names to file names");
        }
        Map<String, String> weightMap = new LinkedHashMap<>();
        for (Map.Entry<String, JsonNode> e : map.properties()) {
            if (!e.getValue().isTextual() || e.getValue().textValue().isEmpty()) {
                throw error(index, "weight_map entry " + quote(e.getKey()) + " is " + SafetensorsHeader.kind(e.getValue())
                        + ", expected a file name");
            }
            weightMap.put(e.getKey(), e.getValue().textValue());
        }
        if (weightMap.isEmpty()) {
            throw error(index, "weight_map is empty");
        }
        return weightMap;
    }

    /** The model directory. */
    public Path directory() {
        return directory;
    }

    /** The open files: one, or the shards in order of first mention in the index. */
    public List<SafetensorsFile> files() {
        return files;
    }

    /** The tensor names: in file order for a single file, in index order for shards. */
    public SequencedSet<String> names() {
        return owners.sequencedKeySet();
    }

    public boolean contains(String name) {
        return owners.containsKey(name);
    }

    /**
     * The file that holds a tensor.
     *
     * @throws io.fsdp4j.UserError if no file of the checkpoint holds it
     */
    public SafetensorsFile fileOf(String name) {
        SafetensorsFile f = owners.get(name);
        if (f == null) {
            throw error(directory, "tensor " + quote(name) + " is missing from the checkpoint (it has "
                    + owners.size() + " tensors)");
        }
        return f;
    }

    public TensorInfo info(String name) {
        return fileOf(name).info(name);
    }

    /** Reads a whole float tensor; see {@link SafetensorsFile#readFloats(String)}. */
    public float[] readFloats(String name) {
        return fileOf(name).readFloats(name);
    }

    /** Reads part of a float tensor; see {@link SafetensorsFile#readFloats(String, long, float[], int, int)}. */
    public void readFloats(String name, long elementOffset, float[] dst, int dstOffset, int count) {
        fileOf(name).readFloats(name, elementOffset, dst, dstOffset, count);
    }

    /** Reads a whole integer tensor; see {@link SafetensorsFile#readInts(String)}. */
    public int[] readInts(String name) {
        return fileOf(name).readInts(name);
    }

    /** Closes every file; idempotent. */
    @Override
    public void close() {
        files.forEach(SafetensorsFile::close);
    }

    @Override
    public String toString() {
        return "SafetensorsDirectory[" + directory + ", " + files.size() + " files, " + owners.size() + " tensors]";
    }
}
