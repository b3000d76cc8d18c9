package io.fsdp4j.safetensors;

import static io.fsdp4j.safetensors.Messages.error;

import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Writes safetensors files. The header lists the tensors in the order given and is padded with spaces to a
 * multiple of 8 bytes; the data is laid out contiguously, widest dtype first (stable), so that every tensor
 * is aligned to its element size. The file is written under a temporary name in the same folder and then
 * atomically renamed, so the final name never holds a partial file.
 */
public final class SafetensorsWriter {
    private static final int BUFFER_BYTES = 1 << 20;

    private SafetensorsWriter() {}

    /** Writes {@code tensors} with no metadata. */
    public static void write(Path path, List<NamedTensor> tensors) {
        write(path, tensors, Map.of());
    }

    /**
     * Writes {@code tensors} and {@code metadata} (may be empty) to {@code path}, replacing any existing file.
     *
     * @throws IllegalArgumentException if two tensors share a name or an I32 tensor's float value is not an int
     * @throws io.fsdp4j.UserError      if the file cannot be written
     */
    public static void write(Path path, List<NamedTensor> tensors, Map<String, String> metadata) {
        Set<String> seen = new HashSet<>();
        for (NamedTensor t : tensors) {
            if (!seen.add(t.name())) {
                throw new IllegalArgumentException("tensor '" + t.name() + "' is given twice");
            }
        }
        List<NamedTensor> layout = new ArrayList<>(tensors);
        layout.sort(Comparator.comparingInt((NamedTensor t) -> t.dtype().bytes()).reversed());
        byte[] header = header(tensors, layout, metadata);

        Path target = path.toAbsolutePath();
        Path temp = null;
        try {
            temp = createTemp(target);
            try (FileChannel out = FileChannel.open(temp, StandardOpenOption.WRITE)) {
                ByteBuffer buffer = ByteBuffer.allocateDirect(BUFFER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
                buffer.putLong(header.length);
                put(out, buffer, header);
                for (NamedTensor t : layout) {
                    putData(out, buffer, t);
                }
                drain(out, buffer);
                out.force(true);
            }
            Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            temp = null;
            syncDirectory(target.getParent());
        } catch (NoSuchFileException e) {
            throw error(path, "cannot write: folder " + target.getParent() + " does not exist", e);
        } catch (AccessDeniedException e) {
            throw error(path, "cannot write: permission denied", e);
        } catch (IOException e) {
            throw error(path, "cannot write: " + e, e);
        } finally {
            if (temp != null) {
                try {
                    Files.deleteIfExists(temp);
                } catch (IOException ignored) {
                    // the original failure matters more
                }
            }
        }
    }

    /** The header, entries in the caller's order, offsets from {@code layout}. */
    private static byte[] header(List<NamedTensor> tensors, List<NamedTensor> layout, Map<String, String> metadata) {
        Map<String, long[]> offsets = new HashMap<>();
        long at = 0;
        for (NamedTensor t : layout) {
            offsets.put(t.name(), new long[] {at, at + t.byteSize()});
            at += t.byteSize();
        }
        List<TensorInfo> entries = new ArrayList<>(tensors.size());
        for (NamedTensor t : tensors) {
            long[] o = offsets.get(t.name());
            entries.add(new TensorInfo(t.name(), t.dtype().safetensorsName(), t.shape(), o[0], o[1]));
        }
        return SafetensorsHeader.encode(entries, metadata);
    }

    /** Makes the rename durable where the platform allows syncing a folder (Linux does, Windows does not). */
    private static void syncDirectory(Path dir) {
        try (FileChannel channel = FileChannel.open(dir, StandardOpenOption.READ)) {
            channel.force(true);
        } catch (IOException | UnsupportedOperationException ignored) {
            // best effort: the data itself was forced before the rename
        }
    }

    private static Path createTemp(Path target) throws IOException {
        Path dir = target.getParent();
        for (int attempt = 0; ; attempt++) {
            Path temp = dir.resolve("." + target.getFileName() + "."
                    + Long.toHexString(ThreadLocalRandom.current().nextLong()) + ".tmp");
            try {
                // CREATE_NEW honours the umask, unlike Files.createTempFile, which makes the file private
                FileChannel.open(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE).close();
                return temp;
            } catch (FileAlreadyExistsException e) {
                if (attempt == 10) {
                    throw e;
                }
            }
        }
    }

    private static void putData(FileChannel out, ByteBuffer buffer, NamedTensor t) throws IOException {
        int n = t.numel();
        int width = t.dtype().bytes();
        float[] values = t.values();
        int[] ints = t.ints();
        for (int done = 0; done < n; ) {
            if (buffer.remaining() < width) {
                drain(out, buffer);
            }
            int end = done + Math.min(buffer.remaining() / width, n - done);
            switch (t.dtype()) {
                case F32 -> buffer.asFloatBuffer().put(values, done, end - done);
                case BF16 -> {
                    for (int i = done; i < end; i++) {
                        buffer.putShort(Half.toBf16(values[i]));
                    }
                }
                case F16 -> {
                    for (int i = done; i < end; i++) {
                        buffer.putShort(Half.toF16(values[i]));
                    }
                }
                case I32 -> {
                    if (ints != null) {
                        buffer.asIntBuffer().put(ints, done, end - done);
                    } else {
                        for (int i = done; i < end; i++) {
                            buffer.putInt(exactInt(t, i, values[i]));
                        }
                    }
                }
            }
            if (t.dtype() == DType.F32 || (t.dtype() == DType.I32 && ints != null)) {
                buffer.position(buffer.position() + (end - done) * width); // the views do not move the buffer
            }
            done = end;
        }
    }

    private static int exactInt(NamedTensor t, int index, float value) {
        long v = (long) value;
        if (v != value || v != (int) v) {
            throw new IllegalArgumentException("tensor '" + t.name() + "' is I32 but value " + index + " is " + value
                    + ", not a 32-bit int");
        }
        return (int) v;
    }

    private static void put(FileChannel out, ByteBuffer buffer, byte[] bytes) throws IOException {
        for (int done = 0; done < bytes.length; ) {
            if (!buffer.hasRemaining()) {
                drain(out, buffer);
            }
            int n = Math.min(buffer.remaining(), bytes.length - done);
            buffer.put(bytes, done, n);
            done += n;
        }
    }

    private static void drain(FileChannel out, ByteBuffer buffer) throws IOException {
        buffer.flip();
        while (buffer.hasRemaining()) {
            out.write(buffer);
        }
        buffer.clear();
    }
}
