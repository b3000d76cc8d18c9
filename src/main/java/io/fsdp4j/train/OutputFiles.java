package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.checkpoint.DirectoryLock;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * The paths a run will write, made and test-written before its first step, so that a path under a regular file, a
 * read-only directory or a full disk fails at once, naming the path and its setting, instead of after hours of
 * training. A probe is a small file written, flushed to the disk and deleted beside the output.
 */
final class OutputFiles {
    /** Big enough that a disk with less room left than a few metrics lines fails the probe. */
    private static final int PROBE_BYTES = 64 * 1024;

    private OutputFiles() {}

    /** Creates {@code dir} (the value of {@code key}) if missing and writes a probe in it. */
    static void requireWritableDirectory(Path dir, String key) {
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new UserError("cannot create " + key + " " + dir + ": " + DirectoryLock.inTheWay(dir).map(f -> f
                    + " is a file, not a directory").orElse(reason(e)) + "; give a directory this run can write");
        }
        probe(dir, key + " " + dir);
    }

    /**
     * Makes the directory of {@code file} (the value of {@code key}) and writes a probe there; a file that exists but
     * is not a regular file (a device) gets an empty line, which readers of JSON lines skip.
     */
    static void requireWritableFile(Path file, String key) {
        if (Files.isDirectory(file)) {
            throw new UserError(key + " " + file + " is a directory; give a file name");
        }
        if (Files.exists(file) && !Files.isRegularFile(file)) {
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE, StandardOpenOption.APPEND)) {
                channel.write(ByteBuffer.wrap(new byte[] {'\n'}));
            } catch (IOException e) {
                throw new UserError("cannot write " + key + " " + file + ": " + reason(e));
            }
            return;
        }
        Path parent = file.toAbsolutePath().getParent();
        try {
            Files.createDirectories(parent);
        } catch (IOException e) {
            throw new UserError("cannot create the directory of " + key + " " + file + ": " + DirectoryLock.inTheWay(
                    parent).map(f -> f + " is a file, not a directory").orElse(reason(e)));
        }
        if (Files.exists(file) && !Files.isWritable(file)) {
            throw new UserError("cannot write " + key + " " + file + ": permission denied");
        }
        probe(parent, key + " " + file);
    }

    private static void probe(Path dir, String what) {
        Path probe = dir.resolve(".fsdp4j-probe-" + ProcessHandle.current().pid());
        try {
            try (FileChannel channel = FileChannel.open(probe, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                    StandardOpenOption.TRUNCATE_EXISTING)) {
                ByteBuffer bytes = ByteBuffer.allocate(PROBE_BYTES);
                while (bytes.hasRemaining()) {
                    channel.write(bytes);
                }
                channel.force(true);
            } finally {
                Files.deleteIfExists(probe);
            }
        } catch (IOException e) {
            throw new UserError("cannot write " + what + " (a test write of " + probe + " failed: " + reason(e) + ")");
        }
    }

    /** What went wrong, in words (the JDK's exceptions for a path in the way carry only the path). */
    static String reason(IOException e) {
        if (e instanceof FileAlreadyExistsException f) {
            return f.getFile() + " exists and is not a directory";
        }
        if (e instanceof NotDirectoryException f) {
            return f.getFile() + " is not a directory";
        }
        if (e instanceof NoSuchFileException f) {
            return f.getFile() + " does not exist";
        }
        if (e instanceof FileSystemException f && f.getReason() != null) {
            return f.getReason();
        }
        return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    }
}
