package io.fsdp4j.safetensors;

import static io.fsdp4j.safetensors.Messages.error;

import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Writes one safetensors file whose tensors are known (names, dtypes, shapes) before their values: the header goes
 * first, then the values are appended in pieces, tensor after tensor in the order given, converted from floats to
 * each tensor's dtype. Memory stays one buffer whatever the tensors' sizes, so a model far larger than the heap is
 * written piece by piece. The file is written where it is named: callers that need it to appear whole write into a
 * temporary folder and rename that. {@link #close} without {@link #finish} deletes the partial file.
 */
public final class StreamingSafetensorsWriter implements AutoCloseable {
    private static final int BUFFER_BYTES = 1 << 20;

    /** A tensor of the file: its name, the dtype its values are stored as, and its shape. */
    public record Entry(String name, DType dtype, long[] shape) {
        public Entry {
            if (!dtype.isFloat()) {
                throw new IllegalArgumentException("tensor '" + name + "': only float dtypes are streamed, not " + dtype);
            }
            shape = shape.clone();
        }

        public long numel() {
            long n = 1;
            for (long d : shape) {
                n = Math.multiplyExact(n, d);
            }
            return n;
        }

        /** Bytes its values take in the file. */
        public long byteSize() {
            return numel() * dtype.bytes();
        }

        @Override
        public long[] shape() {
            return shape.clone();
        }
    }

    private final Path path;
    private final List<Entry> entries;
    private final FileChannel out;
    private final ByteBuffer buffer = ByteBuffer.allocateDirect(BUFFER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    private int current; // entry being written
    private long writtenOfCurrent; // its elements written so far
    private boolean finished;

    private StreamingSafetensorsWriter(Path path, List<Entry> entries, FileChannel out) {
        this.path = path;
        this.entries = entries;
        this.out = out;
    }

    /**
     * Creates {@code path} (replacing a file there) and writes its header. Entries are laid out in the order given;
     * a narrower dtype may follow a wider one but not precede it, so that every tensor is aligned to its element size.
     *
     * @throws IllegalArgumentException for a repeated name or a wider dtype after a narrower one
     * @throws io.fsdp4j.UserError      if the file cannot be created
     */
    public static StreamingSafetensorsWriter create(Path path, List<Entry> entries, Map<String, String> metadata) {
        Set<String> seen = new HashSet<>();
        for (int i = 0; i < entries.size(); i++) {
            if (!seen.add(entries.get(i).name())) {
                throw new IllegalArgumentException("tensor '" + entries.get(i).name() + "' is given twice");
            }
            if (i > 0 && entries.get(i).dtype().bytes() > entries.get(i - 1).dtype().bytes()) {
                throw new IllegalArgumentException("tensor '" + entries.get(i).name() + "' (" + entries.get(i).dtype()
                        + ") follows a narrower dtype: give the widest dtypes first");
            }
        }
        byte[] header = header(entries, metadata);
        FileChannel channel;
        try {
            channel = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                    StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw error(path, "cannot write: " + e, e);
        }
        var writer = new StreamingSafetensorsWriter(path, List.copyOf(entries), channel);
        try {
            writer.buffer.putLong(header.length);
            for (int done = 0; done < header.length; ) {
                if (!writer.buffer.hasRemaining()) {
                    writer.drain();
                }
                int n = Math.min(writer.buffer.remaining(), header.length - done);
                writer.buffer.put(header, done, n);
                done += n;
            }
        } catch (IOException e) {
            writer.close();
            throw error(path, "cannot write: " + e, e);
        }
        writer.skipEmpty();
        return writer;
    }

    /**
     * Appends {@code count} values from {@code src[offset..]}: the next values of the tensor being written, running
     * on into the following tensors when it is complete.
     *
     * @throws IllegalStateException if more values are given than the tensors hold
     */
    public void write(float[] src, int offset, int count) {
        try {
            int done = 0;
            while (done < count) {
                if (current == entries.size()) {
                    throw new IllegalStateException(path + ": " + (count - done) + " values beyond the last tensor");
                }
                Entry e = entries.get(current);
                int n = (int) Math.min(count - done, e.numel() - writtenOfCurrent);
                put(e.dtype(), src, offset + done, n);
                done += n;
                writtenOfCurrent += n;
                skipEmpty();
            }
        } catch (IOException e) {
            throw error(path, "cannot write: " + e, e);
        }
    }

    /** Moves past complete (and empty) tensors. */
    private void skipEmpty() {
        while (current < entries.size() && writtenOfCurrent == entries.get(current).numel()) {
            current++;
            writtenOfCurrent = 0;
        }
    }

    /**
     * Flushes the file to disk and closes it.
     *
     * @throws IllegalStateException if some tensor has not been given all its values
     */
    public void finish() {
        if (current != entries.size()) {
            throw new IllegalStateException(path + ": tensor '" + entries.get(current).name() + "' has "
                    + writtenOfCurrent + " of " + entries.get(current).numel() + " values");
        }
        try {
            drain();
            out.force(true);
            out.close();
            finished = true;
        } catch (IOException e) {
            throw error(path, "cannot write: " + e, e);
        }
    }

    /** Closes the file; when {@link #finish} has not completed, deletes the partial file. */
    @Override
    public void close() {
        if (finished) {
            return;
        }
        try {
            out.close();
            Files.deleteIfExists(path);
        } catch (IOException ignored) {
            // the failure that led here matters more
        }
    }

    private void put(DType dtype, float[] src, int from, int count) throws IOException {
        int width = dtype.bytes();
        for (int done = 0; done < count; ) {
            if (buffer.remaining() < width) {
                drain();
            }
            int n = Math.min(buffer.remaining() / width, count - done);
            switch (dtype) {
                case F32 -> {
                    buffer.asFloatBuffer().put(src, from + done, n);
                    buffer.position(buffer.position() + n * 4); // the view does not move the buffer
                }
                case BF16 -> {
                    for (int i = from + done, end = i + n; i < end; i++) {
                        buffer.putShort(Half.toBf16(src[i]));
                    }
                }
                case F16 -> {
                    for (int i = from + done, end = i + n; i < end; i++) {
                        buffer.putShort(Half.toF16(src[i]));
                    }
                }
                case I32 -> throw new AssertionError("refused in Entry");
            }
            done += n;
        }
    }

    private void drain() throws IOException {
        buffer.flip();
        while (buffer.hasRemaining()) {
            out.write(buffer);
        }
        buffer.clear();
    }

    /** The header, entries in order and laid out in that order. */
    private static byte[] header(List<Entry> entries, Map<String, String> metadata) {
        List<TensorInfo> infos = new ArrayList<>(entries.size());
        long at = 0;
        for (Entry e : entries) {
            infos.add(new TensorInfo(e.name(), e.dtype().safetensorsName(), e.shape(), at, at + e.byteSize()));
            at += e.byteSize();
        }
        return SafetensorsHeader.encode(infos, metadata);
    }
}
