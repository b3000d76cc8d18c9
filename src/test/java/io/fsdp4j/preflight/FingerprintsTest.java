package io.fsdp4j.preflight;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FingerprintsTest {
    private static final Path GOLDEN = Path.of("src/test/resources/golden");

    @TempDir
    Path tmp;

    /**
     * Every byte counts: one byte changed anywhere in a file of several chunks (where a sampler reading 64 windows of
     * 4 KiB would not look) changes the fingerprint, and so does its length. A second look at an unchanged file is
     * answered from the cache (here shown by a change that keeps the size and the modification time, which the cache
     * cannot see); a new modification time is seen.
     */
    @Test
    void theFingerprintSeesEveryByteAndIsCachedBySizeAndTime() throws IOException {
        long size = 40L << 20; // three chunks of 16 MiB, the last short
        Path a = sparse("a.bin", size), b = sparse("b.bin", size), cache = tmp.resolve("cache");
        String fa = Fingerprints.ofFile(a, null);
        assertThat(fa).startsWith(size + " bytes, fingerprint ").isEqualTo(Fingerprints.ofFile(b, null));
        for (long offset : new long[] {0, size - 1, size / 2 + 12_345, (16L << 20) - 1, 16L << 20}) {
            poke(b, offset, (byte) 1);
            assertThat(Fingerprints.ofFile(b, null)).as("byte %d changed", offset).isNotEqualTo(fa);
            poke(b, offset, (byte) 0);
        }
        assertThat(Fingerprints.ofFile(b, null)).isEqualTo(fa);
        try (var f = new RandomAccessFile(b.toFile(), "rw")) {
            f.setLength(size + 1);
        }
        assertThat(Fingerprints.ofFile(b, null)).isNotEqualTo(fa);

        assertThat(Fingerprints.ofFile(a, cache)).isEqualTo(fa);
        var time = Files.getLastModifiedTime(a);
        poke(a, 1000, (byte) 9);
        Files.setLastModifiedTime(a, time);
        assertThat(Fingerprints.ofFile(a, cache)).as("from the cache").isEqualTo(fa);
        Files.setLastModifiedTime(a, java.nio.file.attribute.FileTime.fromMillis(time.toMillis() + 2000));
        assertThat(Fingerprints.ofFile(a, cache)).as("changed since").isNotEqualTo(fa);
        assertThat(Fingerprints.ofFile(a, null)).isEqualTo(Fingerprints.ofFile(a, cache));
    }

    /** One float of a tensor in the middle of a weights file of several chunks, and two lines of data merged. */
    @Test
    void oneFloatOfTheWeightsOrAMergedLineOfTheDataIsSeen() throws IOException {
        int floats = 6 << 20; // 24 MiB of weights
        String header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[" + floats + "],\"data_offsets\":[0," + 4L * floats
                + "]}}";
        Path weights = tmp.resolve("model.safetensors");
        try (var out = Files.newOutputStream(weights)) {
            out.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(header.length()).array());
            out.write(header.getBytes(StandardCharsets.US_ASCII));
            ByteBuffer values = ByteBuffer.allocate(4 * floats).order(ByteOrder.LITTLE_ENDIAN);
            Random random = new Random(3);
            while (values.hasRemaining()) {
                values.putFloat((float) random.nextGaussian());
            }
            out.write(values.array());
        }
        String before = Fingerprints.ofSafetensors(weights, null);
        long middle = 8 + header.length() + 4L * (floats / 2 + 777);
        poke(weights, middle, (byte) 0x3f); // one float's lowest byte
        assertThat(Fingerprints.ofSafetensors(weights, null)).isNotEqualTo(before);

        StringBuilder lines = new StringBuilder();
        for (int i = 0; i < 100_000; i++) {
            lines.append("{\"input_ids\":[").append(i).append(",").append(i + 1).append("]}\n");
        }
        Path data = Files.writeString(tmp.resolve("train.jsonl"), lines);
        String whole = Fingerprints.ofPath(data, null);
        String text = lines.toString();
        int newline = text.indexOf('\n', text.length() / 2 + 5000);
        Files.writeString(data, text.substring(0, newline) + " " + text.substring(newline + 1)); // same size
        assertThat(Files.size(data)).isEqualTo(text.length());
        assertThat(Fingerprints.ofPath(data, null)).isNotEqualTo(whole);
    }

    @Test
    void smallFilesAreReadWholeAndDirectoriesByRelativePath() throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("data"));
        Files.writeString(dir.resolve("x.jsonl"), "{\"input_ids\":[1,2,3]}\n");
        Files.createDirectories(dir.resolve("sub"));
        Files.writeString(dir.resolve("sub/y.bin"), "abc");
        String before = Fingerprints.ofPath(dir);
        assertThat(before).startsWith("25 bytes in 2 file(s), sha256 ");
        Files.writeString(dir.resolve("sub/y.bin"), "abd"); // same size, one byte in a small file
        assertThat(Fingerprints.ofPath(dir)).isNotEqualTo(before);
        Files.writeString(dir.resolve("sub/y.bin"), "abc");
        Files.move(dir.resolve("sub/y.bin"), dir.resolve("sub/z.bin")); // same bytes, another name
        assertThat(Fingerprints.ofPath(dir)).isNotEqualTo(before);
        assertThatThrownBy(() -> Fingerprints.ofPath(tmp.resolve("missing")))
                .isInstanceOf(UserError.class).hasMessageContaining("does not exist on this node");
    }

    @Test
    void safetensorsFingerprintCoversTheHeaderAndTheWeights() throws IOException {
        Path original = GOLDEN.resolve("llama/model.safetensors");
        Path copy = Files.copy(original, tmp.resolve("model.safetensors"));
        String f = Fingerprints.ofSafetensors(original);
        assertThat(f).matches("[0-9a-f]{64}").isEqualTo(Fingerprints.ofSafetensors(copy));
        long headerLength = headerLength(copy);
        // a letter of a tensor name in the header
        byte[] bytes = Files.readAllBytes(copy);
        int name = new String(bytes, StandardCharsets.ISO_8859_1).indexOf("model.");
        bytes[name] = 'M';
        Files.write(copy, bytes);
        assertThat(Fingerprints.ofSafetensors(copy)).isNotEqualTo(f);
        // one weight's last byte
        Files.copy(original, copy, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        poke(copy, Files.size(copy) - 1, (byte) (Files.readAllBytes(copy)[(int) Files.size(copy) - 1] ^ 1));
        assertThat(Fingerprints.ofSafetensors(copy)).isNotEqualTo(f);
        assertThat(headerLength).isPositive();
        Files.write(copy, new byte[] {1, 2, 3});
        assertThatThrownBy(() -> Fingerprints.ofSafetensors(copy)).isInstanceOf(UserError.class)
                .hasMessageContaining("not a safetensors file");
    }

    @Test
    void nodeFactsNameTheModelFilesAndLeavePerNodeKeysOut() throws IOException {
        Path model = copyModel("llama-sharded", tmp.resolve("m"));
        Path data = Files.writeString(tmp.resolve("train.jsonl"), "{\"input_ids\":[1,2,3,4]}\n");
        TrainConfig config = TrainConfig.load(null, List.of("model.path=" + model, "data.train=" + data,
                "dist.node_rank=0", "log.metrics=" + tmp.resolve("m.jsonl")));
        List<String> keys = NodeFacts.of(config, false).facts().stream().map(Fact::key).toList();
        assertThat(keys).startsWith("fsdp4j", "java", "model.config", "model.weights/model-00001-of-00002.safetensors",
                "model.weights/model-00002-of-00002.safetensors", "data.train", "data.eval");
        assertThat(keys).contains("config.train.steps", "config.model.preset", "config.dist.ranks")
                .doesNotContain("config.dist.node_rank", "config.model.path", "config.data.train", "config.log.metrics",
                        "config.dist.rdzv")
                .doesNotHaveDuplicates();
        // the same facts from another copy of the model and data at other paths on another "node"
        Path model2 = copyModel("llama-sharded", tmp.resolve("elsewhere/m"));
        Path data2 = Files.copy(data, tmp.resolve("elsewhere/train.jsonl"));
        TrainConfig config2 = config.with("model.path=" + model2, "data.train=" + data2);
        assertThat(NodeFacts.of(config2, false)).isEqualTo(NodeFacts.of(config, false));
        assertThatThrownBy(() -> NodeFacts.of(config.with("model.path=" + tmp.resolve("nothing")), false))
                .isInstanceOf(UserError.class).hasMessageContaining("no config.json");
    }

    @Test
    void theBuildFingerprintSeesClassesNotBuildDates() throws IOException {
        Path a = jar("a.jar", "class-bytes", "#Mon Nov 23 17:43:15 UTC 2026");
        Path b = jar("b.jar", "class-bytes", "#Tue Nov 24 09:00:00 UTC 2026");
        Path c = jar("c.jar", "other-bytes", "#Mon Nov 23 17:43:15 UTC 2026");
        assertThat(NodeFacts.classesDigest(a)).startsWith("sha256 ").isEqualTo(NodeFacts.classesDigest(b))
                .isNotEqualTo(NodeFacts.classesDigest(c));
    }

    private Path jar(String name, String classBytes, String pomProperties) throws IOException {
        Path jar = tmp.resolve(name);
        try (var out = new java.util.zip.ZipOutputStream(Files.newOutputStream(jar))) {
            out.putNextEntry(new java.util.zip.ZipEntry("io/fsdp4j/X.class"));
            out.write(classBytes.getBytes(StandardCharsets.UTF_8));
            out.putNextEntry(new java.util.zip.ZipEntry("META-INF/maven/io.fsdp4j/fsdp4j/pom.properties"));
            out.write(pomProperties.getBytes(StandardCharsets.UTF_8));
        }
        return jar;
    }

    static Path copyModel(String golden, Path to) throws IOException {
        Files.createDirectories(to);
        try (var files = Files.list(GOLDEN.resolve(golden))) {
            for (Path f : files.toList()) {
                String n = f.getFileName().toString();
                if (n.equals("config.json") || n.startsWith("model")) {
                    Files.copy(f, to.resolve(n));
                }
            }
        }
        return to;
    }

    static void poke(Path file, long offset, byte value) throws IOException {
        try (var f = new RandomAccessFile(file.toFile(), "rw")) {
            f.seek(offset);
            f.write(value);
        }
    }

    private Path sparse(String name, long size) throws IOException {
        Path p = tmp.resolve(name);
        try (var f = new RandomAccessFile(p.toFile(), "rw")) {
            f.setLength(size);
            byte[] noise = new byte[8192];
            new Random(7).nextBytes(noise);
            f.seek(size / 3);
            f.write(noise);
        }
        return p;
    }

    private static long headerLength(Path file) throws IOException {
        try (var in = Files.newInputStream(file)) {
            return ByteBuffer.wrap(in.readNBytes(8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
        }
    }
}
