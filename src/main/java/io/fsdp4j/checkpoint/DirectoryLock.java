package io.fsdp4j.checkpoint;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.time.temporal.ChronoUnit;

/**
 * A run's hold on its {@code checkpoint.dir}, for the run's whole life: an operating-system lock on the file
 * {@value #FILE} in it, which names the holder (host, pid, start time). A second run on the same directory is
 * refused with that line instead of mixing its checkpoints with the first's. The lock ends with its process, so a
 * run killed with SIGKILL leaves only the file's text: the next run takes it over and says whose it was.
 * Taking the lock also creates the directory and writes into it, so a path that cannot hold checkpoints fails before
 * the first step.
 */
public final class DirectoryLock implements AutoCloseable {
    public static final String FILE = ".lock";

    private final Path file;
    private final FileChannel channel;
    private final FileLock lock;

    private DirectoryLock(Path file, FileChannel channel, FileLock lock) {
        this.file = file;
        this.channel = channel;
        this.lock = lock;
    }

    /**
     * Locks {@code dir} (created if missing) for this process, or refuses, naming the run that holds it. {@code key}
     * names the setting in messages ({@code checkpoint.dir}); {@code notes} gets the notice of a lock taken over.
     */
    public static DirectoryLock acquire(Path dir, String key, PrintStream notes) {
        Path file = dir.resolve(FILE);
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new UserError("cannot create " + key + " " + dir + ": " + inTheWay(dir).map(f -> f + " is a file, not"
                    + " a directory").orElse(reason(e)) + "; give a directory this run can write");
        }
        FileChannel channel;
        try {
            channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
                    StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw new UserError("cannot write in " + key + " " + dir + " (" + file + ": " + reason(e) + "); give a"
                    + " directory this run can write");
        }
        try {
            FileLock lock;
            try {
                lock = channel.tryLock();
            } catch (OverlappingFileLockException e) {
                lock = null; // another run in this very process holds it
            }
            String holder = read(channel);
            if (lock == null) {
                throw new UserError(key + " " + dir + " is in use by another run (" + (holder.isEmpty() ? "its lock "
                        + "file " + file : holder) + "); wait for it to end, or give this run another " + key);
            }
            if (!holder.isEmpty()) {
                notes.println("fsdp4j: " + key + " " + dir + " was locked by a run that ended without releasing it ("
                        + holder + "); taking it over");
            }
            byte[] me = (describe() + "\n").getBytes(StandardCharsets.UTF_8);
            channel.truncate(0);
            channel.write(ByteBuffer.wrap(me), 0);
            channel.force(true);
            return new DirectoryLock(file, channel, lock);
        } catch (IOException e) {
            closeQuietly(channel);
            throw new UserError("cannot write " + file + " (the lock of " + key + " " + dir + "): " + reason(e));
        } catch (RuntimeException e) {
            closeQuietly(channel);
            throw e;
        }
    }

    /** This process, as the lock file names it: {@code host H, pid P, started T}. */
    static String describe() {
        ProcessHandle me = ProcessHandle.current();
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            host = "an unknown host";
        }
        String started = me.info().startInstant().map(t -> t.truncatedTo(ChronoUnit.SECONDS).toString())
                .orElse(Instant.now().truncatedTo(ChronoUnit.SECONDS) + " or before");
        return "host " + host + ", pid " + me.pid() + ", started " + started;
    }

    private static String read(FileChannel channel) throws IOException {
        ByteBuffer buffer = ByteBuffer.allocate((int) Math.min(channel.size(), 4096));
        channel.read(buffer, 0);
        return new String(buffer.array(), 0, buffer.position(), StandardCharsets.UTF_8).strip();
    }

    /** The nearest existing ancestor of {@code path} (or itself) when it is not a directory: what is in the way. */
    public static java.util.Optional<Path> inTheWay(Path path) {
        for (Path p = path.toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.exists(p)) {
                return Files.isDirectory(p) ? java.util.Optional.empty() : java.util.Optional.of(p);
            }
        }
        return java.util.Optional.empty();
    }

    private static String reason(IOException e) {
        if (e instanceof java.nio.file.FileAlreadyExistsException f) {
            return f.getFile() + " exists and is not a directory";
        }
        String m = e.getMessage();
        return e instanceof java.nio.file.FileSystemException f && f.getReason() != null ? f.getReason()
                : m == null ? e.getClass().getSimpleName() : m;
    }

    private static void closeQuietly(FileChannel channel) {
        try {
            channel.close();
        } catch (IOException ignored) {
            // already failing
        }
    }

    /** Releases the lock; the file stays, empty, so that the next run finds no holder. */
    @Override
    public void close() {
        try {
            channel.truncate(0);
            lock.release();
            channel.close();
        } catch (IOException e) {
            throw new UserError("cannot release the lock " + file + ": " + reason(e));
        }
    }
}
