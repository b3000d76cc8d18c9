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
 * Content fingerprints that read a bounded amount of each file: {@value #WINDOWS} windows of {@value #WINDOW}
 * bytes at offsets spread evenly from the first byte to the last (a smaller region is read whole), hashed with
 * SHA-256 together with the region's length. The offsets depend only on the length, so two copies of one file
 * give the same fingerprint on every machine, and two files of different content almost surely differ (a copy
 * with a different length, header or any sampled window does).
 */
public final class Fingerprints {
    static final int WINDOW = 4096;
    static final int WINDOWS = 64;

    private Fingerprints() {}

    /** A regular file: "size bytes, sha256 HEX" of its sampled content. */
    public static String ofFile(Path file) {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = channel.size();
            MessageDigest digest = sha256();
            sample(channel, 0, size, digest);
            return size + " bytes, sha256 " + hex(digest);
        } catch (IOException e) {
            throw new UserError("preflight: cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /**
     * A file, or a directory (every regular file under it, by relative path): "N bytes in K file(s), sha256 HEX",
     * the digest over each file's relative path, size and sampled content.
     */
    public static String ofPath(Path path) {
        if (Files.isRegularFile(path)) {
            return ofFile(path);
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
            digest.update((relative + "\n" + ofFile(file) + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
            total += sizeOf(file);
        }
        return total + " bytes in " + files.size() + " file(s), sha256 " + hex(digest);
    }

    /**
     * A safetensors file: SHA-256 of its size, its whole header (the 8-byte length and the JSON: every tensor's
     * name, type, shape and offsets, and the metadata) and the sampled windows of its data section.
     */
    public static String ofSafetensors(Path file) {
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
            MessageDigest digest = sha256();
            digest.update(longBytes(size));
            digest.update(length.array());
            ByteBuffer header = ByteBuffer.allocate((int) headerBytes);
            readFully(channel, header, 8);
            digest.update(header.array());
            sample(channel, 8 + headerBytes, size, digest);
            return hex(digest);
        } catch (IOException e) {
            throw new UserError("preflight: cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /** SHA-256 of a whole small file (a config.json). */
    public static String ofSmallFile(Path file) {
        try {
            return HexFormat.of().formatHex(sha256().digest(Files.readAllBytes(file)));
        } catch (IOException e) {
            throw new UserError("preflight: cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /** The sampled windows of [start, end): the region's length, then each window's bytes. */
    static void sample(FileChannel channel, long start, long end, MessageDigest digest) throws IOException {
        long length = end - start;
        digest.update(longBytes(length));
        if (length <= (long) WINDOW * WINDOWS) {
            ByteBuffer all = ByteBuffer.allocate((int) length);
            readFully(channel, all, start);
            digest.update(all.array());
            return;
        }
        ByteBuffer window = ByteBuffer.allocate(WINDOW);
        for (int i = 0; i < WINDOWS; i++) {
            long offset = start + i * (length - WINDOW) / (WINDOWS - 1); // first window at 0, last ends at the end
            window.clear();
            readFully(channel, window, offset);
            digest.update(window.array());
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
