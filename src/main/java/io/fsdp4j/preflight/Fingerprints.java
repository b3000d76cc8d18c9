package io.fsdp4j.preflight;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;

/**
 * Content fingerprints over every byte of a file: the file is cut into chunks of {@value #CHUNK_MIB} MiB, each
 * chunk's CRC-32C (a hardware instruction on x86 and ARM: the hash runs at the disk's speed, the chunks on all
 * cores) is taken, and the fingerprint is the SHA-256 of the size and the chunks' CRCs in order. A CRC-32C catches
 * every change of up to 32 neighbouring bits, so one float that differs, a byte inserted or two lines merged always
 * change the fingerprint. A fingerprint is cached (in {@code FSDP4J_FINGERPRINT_CACHE}, else
 * {@code ~/.cache/fsdp4j/fingerprints}: never beside the file, where a reader of the directory would find it) under
 * the file's path, size, modification time and file key, so a second start reads nothing.
 */
public final class Fingerprints {
    static final int CHUNK_MIB = 16;
    private static final int CHUNK = CHUNK_MIB << 20;
    /** The environment variable naming the cache directory. */
    public static final String CACHE_ENV = "FSDP4J_FINGERPRINT_CACHE";

    private Fingerprints() {}

    /** A regular file: "size bytes, fingerprint HEX" of all its bytes. */
    public static String ofFile(Path file) {
        return ofFile(file, defaultCache());
    }

    static String ofFile(Path file, Path cache) {
        long size = sizeOf(file);
        return size + " bytes, fingerprint " + contentHash(file, cache);
    }

    /** The cache directory: {@value #CACHE_ENV}, else {@code ~/.cache/fsdp4j/fingerprints}. */
    static Path defaultCache() {
        String env = System.getenv(CACHE_ENV);
        return env != null && !env.isBlank() ? Path.of(env)
                : Path.of(System.getProperty("user.home"), ".cache", "fsdp4j", "fingerprints");
    }

    /**
     * The hash of every byte of {@code file} (hex), from the cache when the file's size, modification time and file
     * key are those recorded with it; computed (and recorded, when the cache can be written) otherwise.
     */
    static String contentHash(Path file, Path cache) {
        Path real;
        String stamp;
        try {
            real = file.toRealPath();
            var attributes = Files.readAttributes(real, java.nio.file.attribute.BasicFileAttributes.class);
            stamp = attributes.size() + " " + attributes.lastModifiedTime().to(java.util.concurrent.TimeUnit.NANOSECONDS)
                    + " " + attributes.fileKey();
        } catch (IOException e) {
            throw new UserError("preflight: cannot read " + file + ": " + e.getMessage(), e);
        }
        Path entry = cache == null ? null : cache.resolve(HexFormat.of().formatHex(sha256().digest(
                real.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8))) + ".txt");
        if (entry != null) {
            try {
                List<String> lines = Files.readAllLines(entry);
                if (lines.size() == 3 && lines.get(0).equals(real.toString()) && lines.get(1).equals(stamp)) {
                    return lines.get(2);
                }
            } catch (IOException e) {
                // not cached (or unreadable): computed below
            }
        }
        String hash = hashAll(real);
        if (entry != null) {
            try {
                Files.createDirectories(cache);
                Path tmp = Files.createTempFile(cache, ".entry", ".tmp");
                Files.write(tmp, List.of(real.toString(), stamp, hash));
                Files.move(tmp, entry, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                        java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException e) {
                // a cache that cannot be written only makes the next start slower
            }
        }
        return hash;
    }

    /** SHA-256 over the size and the CRC-32C of every chunk, the chunks hashed in parallel. */
    static String hashAll(Path file) {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = channel.size();
            int chunks = (int) ((size + CHUNK - 1) / CHUNK);
            long[] crcs = java.util.stream.IntStream.range(0, chunks).parallel().mapToLong(i -> {
                long start = (long) i * CHUNK, length = Math.min(CHUNK, size - start);
                try {
                    var crc = new java.util.zip.CRC32C();
                    crc.update(channel.map(FileChannel.MapMode.READ_ONLY, start, length));
                    return crc.getValue();
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }).toArray();
            MessageDigest digest = sha256();
            digest.update(longBytes(size));
            ByteBuffer all = ByteBuffer.allocate(crcs.length * 8).order(ByteOrder.LITTLE_ENDIAN);
            for (long crc : crcs) {
                all.putLong(crc);
            }
            digest.update(all.array());
            return hex(digest);
        } catch (IOException | java.io.UncheckedIOException e) {
            throw new UserError("preflight: cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /**
     * A file, or a directory (every regular file under it, by relative path): "N bytes in K file(s), sha256 HEX",
     * the digest over each file's relative path, size and fingerprint.
     */
    public static String ofPath(Path path) {
        return ofPath(path, defaultCache());
    }

    static String ofPath(Path path, Path cache) {
        if (Files.isRegularFile(path)) {
            return ofFile(path, cache);
        }
        if (!Files.isDirectory(path)) {
            throw new UserError("preflight: " + path + " does not exist on this node");
        }
        List<Path> files;
        try (Stream<Path> walk = Files.walk(path)) {
            files = walk.filter(Files::isRegularFile).sorted().toList();
        } catch (IOException e) {
            throw new UserError("preflight: cannot list " + path + ": " + e.getMessage(), e);
        }
        MessageDigest digest = sha256();
        long total = 0;
        for (Path file : files) {
            String relative = path.relativize(file).toString().replace('\\', '/');
            digest.update((relative + "\n" + ofFile(file, cache) + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
            total += sizeOf(file);
        }
        return total + " bytes in " + files.size() + " file(s), sha256 " + hex(digest);
    }

    /**
     * A safetensors file: the hash of every byte ({@link #ofFile}: its header, every tensor's name, type, shape and
     * offsets, and all the weights), once its header is seen to be one.
     */
    public static String ofSafetensors(Path file) {
        return ofSafetensors(file, defaultCache());
    }

    static String ofSafetensors(Path file, Path cache) {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = channel.size();
            if (size < 8) {
                throw new UserError("preflight: " + file + " is not a safetensors file (" + size + " bytes)");
            }
            ByteBuffer length = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            readFully(channel, length, 0);
            long headerBytes = length.getLong(0);
            if (headerBytes < 0 || headerBytes > size - 8 || headerBytes > 100L << 20) {
                throw new UserError("preflight: " + file + " has a broken safetensors header (length " + headerBytes
                        + " in a file of " + size + " bytes)");
            }
        } catch (IOException e) {
            throw new UserError("preflight: cannot read " + file + ": " + e.getMessage(), e);
        }
        return contentHash(file, cache);
    }

    /** SHA-256 of a whole small file (a config.json). */
    public static String ofSmallFile(Path file) {
        try {
            return HexFormat.of().formatHex(sha256().digest(Files.readAllBytes(file)));
        } catch (IOException e) {
            throw new UserError("preflight: cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    private static void readFully(FileChannel channel, ByteBuffer buffer, long position) throws IOException {
        while (buffer.hasRemaining()) {
            int n = channel.read(buffer, position + buffer.position());
            if (n < 0) {
                throw new IOException("the file ended early (it is changing while being read?)");
            }
        }
    }

    private static long sizeOf(Path file) {
        try {
            return Files.size(file);
        } catch (IOException e) {
            throw new UserError("preflight: cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    private static byte[] longBytes(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array();
    }

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is part of every JDK", e);
        }
    }

    private static String hex(MessageDigest digest) {
        return HexFormat.of().formatHex(digest.digest());
    }
}
