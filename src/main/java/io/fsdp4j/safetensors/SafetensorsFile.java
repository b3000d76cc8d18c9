package io.fsdp4j.safetensors;

import static io.fsdp4j.safetensors.Messages.error;
import static io.fsdp4j.safetensors.Messages.quote;

import io.fsdp4j.tensor.Half;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.SequencedSet;

/**
 * A memory-mapped safetensors file. {@link #open} validates the whole header before any tensor data is
 * touched; reads convert from the stored little-endian dtype. Safe to read from several threads at once;
 * views from {@link #raw} become unusable after {@link #close}.
 */
public final class SafetensorsFile implements AutoCloseable {
    private static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** Elements converted per bulk copy for 16-bit dtypes. */
    private static final int CHUNK = 16_384;
    /** The largest Java array length that every JVM allows. */
    private static final int MAX_ARRAY = Integer.MAX_VALUE - 8;

    private final Path path;
    private final SafetensorsHeader header;
    private final Arena arena;
    private final MemorySegment data;
    private volatile boolean closed;

    private SafetensorsFile(Path path, SafetensorsHeader header, Arena arena, MemorySegment data) {
        this.path = path;
        this.header = header;
        this.arena = arena;
        this.data = data;
    }

    /**
     * Opens, validates and maps a safetensors file.
     *
     * @throws io.fsdp4j.UserError if the file cannot be read or is not a valid safetensors file
     */
    public static SafetensorsFile open(Path path) {
        if (Files.isDirectory(path)) {
            throw error(path, "is a directory, expected a .safetensors file");
        }
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ)) {
            long size = channel.size();
            if (size < 8) {
                throw error(path, "file is " + size + " bytes, shorter than the 8-byte header length; it is truncated"
                        + " or not a safetensors file");
            }
            ByteBuffer prefix = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            readFully(channel, prefix, 0);
            long headerLength = prefix.getLong(0);
            if (headerLength < 0 || headerLength > SafetensorsHeader.MAX_HEADER_BYTES) {
                throw error(path, "header length " + Long.toUnsignedString(headerLength) + " is absurd (limit "
                        + SafetensorsHeader.MAX_HEADER_BYTES + " bytes); the file is corrupt or not a safetensors file");
            }
            if (headerLength > size - 8) {
                throw error(path, "header length " + headerLength + " is larger than the file (" + size
                        + " bytes); the file is truncated or corrupt");
            }
            byte[] headerBytes = new byte[(int) headerLength];
            readFully(channel, ByteBuffer.wrap(headerBytes), 8);
            SafetensorsHeader header = SafetensorsHeader.parse(path, headerBytes, size);
            long dataStart = 8 + headerLength;
            Arena arena = Arena.ofShared();
            try {
                MemorySegment data = size == dataStart
                        ? MemorySegment.ofArray(new byte[0])
                        : channel.map(FileChannel.MapMode.READ_ONLY, dataStart, size - dataStart, arena);
                return new SafetensorsFile(path, header, arena, data.asReadOnly());
            } catch (IOException | RuntimeException e) {
                arena.close();
                throw e;
            }
        } catch (NoSuchFileException e) {
            throw error(path, "no such file", e);
        } catch (AccessDeniedException e) {
            throw error(path, "permission denied", e);
        } catch (IOException e) {
            throw error(path, "cannot read: " + e.getMessage(), e);
        }
    }

    private static void readFully(FileChannel channel, ByteBuffer dst, long position) throws IOException {
        while (dst.hasRemaining()) {
            int n = channel.read(dst, position + dst.position());
            if (n < 0) {
                throw new IOException("unexpected end of file");
            }
        }
    }

    /** The file this was opened from. */
    public Path path() {
        return path;
    }

    /** The tensor names, in the order of the header. */
    public SequencedSet<String> names() {
        return header.tensors().sequencedKeySet();
    }

    public boolean contains(String name) {
        return header.tensors().containsKey(name);
    }

    /** The {@code __metadata__} entries of the header (empty when there are none). */
    public Map<String, String> metadata() {
        return header.metadata();
    }

    /**
     * The header entry of a tensor.
     *
     * @throws io.fsdp4j.UserError if the file has no tensor of that name
     */
    public TensorInfo info(String name) {
        TensorInfo t = header.tensors().get(name);
        if (t == null) {
            throw error(path, "tensor " + quote(name) + " is missing from the file (it has "
                    + header.tensors().size() + " tensors)");
        }
        return t;
    }

    /** Reads a whole F32, F64, BF16 or F16 tensor as floats. */
    public float[] readFloats(String name) {
        TensorInfo t = info(name);
        float[] values = new float[arrayLength(t)];
        readFloats(name, 0, values, 0, values.length);
        return values;
    }

    /**
     * Reads {@code count} elements starting at element {@code elementOffset} (in row-major order) of an F32,
     * F64, BF16 or F16 tensor into {@code dst[dstOffset..]}, converted to float.
     *
     * @throws IndexOutOfBoundsException if the range is outside the tensor or {@code dst}
     */
    public void readFloats(String name, long elementOffset, float[] dst, int dstOffset, int count) {
        TensorInfo t = info(name);
        StoredDType dtype = storedDType(t);
        if (dtype != StoredDType.F32 && dtype != StoredDType.F64 && dtype != StoredDType.BF16
                && dtype != StoredDType.F16) {
            throw error(path, "tensor " + quote(name) + " has dtype " + t.dtype() + ", which cannot be read as"
                    + " floats (readable: F32, F64, BF16, F16)");
        }
        MemorySegment src = slice(t, elementOffset, count, dst.length, dstOffset);
        switch (dtype) {
            case F32 -> MemorySegment.copy(src, F32, 0, dst, dstOffset, count);
            case F64 -> {
                for (int i = 0; i < count; i++) {
                    dst[dstOffset + i] = (float) src.getAtIndex(F64, i);
                }
            }
            case BF16, F16 -> {
                short[] buffer = new short[Math.min(count, CHUNK)];
                for (int done = 0; done < count; done += buffer.length) {
                    int n = Math.min(buffer.length, count - done);
                    MemorySegment.copy(src, I16, 2L * done, buffer, 0, n);
                    int at = dstOffset + done;
                    if (dtype == StoredDType.BF16) {
                        for (int i = 0; i < n; i++) {
                            dst[at + i] = Half.fromBf16(buffer[i]);
                        }
                    } else {
                        for (int i = 0; i < n; i++) {
                            dst[at + i] = Half.fromF16(buffer[i]);
                        }
                    }
                }
            }
            default -> throw new AssertionError(dtype);
        }
    }

    /**
     * Reads a whole I32 or I64 tensor as ints.
     *
     * @throws io.fsdp4j.UserError for another dtype, or an I64 value outside the int range
     */
    public int[] readInts(String name) {
        TensorInfo t = info(name);
        StoredDType dtype = storedDType(t);
        if (dtype != StoredDType.I32 && dtype != StoredDType.I64) {
            throw error(path, "tensor " + quote(name) + " has dtype " + t.dtype() + ", which cannot be read as"
                    + " ints (readable: I32, I64)");
        }
        int[] values = new int[arrayLength(t)];
        MemorySegment src = slice(t, 0, values.length, values.length, 0);
        if (dtype == StoredDType.I32) {
            MemorySegment.copy(src, I32, 0, values, 0, values.length);
        } else {
            for (int i = 0; i < values.length; i++) {
                long v = src.getAtIndex(I64, i);
                if (v != (int) v) {
                    throw error(path, "tensor " + quote(name) + " element " + i + " is " + v
                            + ", outside the 32-bit int range");
                }
                values[i] = (int) v;
            }
        }
        return values;
    }

    /** A read-only view of a tensor's bytes, valid until this file is closed. */
    public MemorySegment raw(String name) {
        TensorInfo t = info(name);
        ensureOpen();
        return data.asSlice(t.begin(), t.byteSize());
    }

    /** Unmaps the file; idempotent. Must not be called while another thread reads. */
    @Override
    public void close() {
        if (!closed) {
            closed = true;
            arena.close();
        }
    }

    @Override
    public String toString() {
        return "SafetensorsFile[" + path + ", " + header.tensors().size() + " tensors]";
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException(path + " is closed");
        }
    }

    private static StoredDType storedDType(TensorInfo t) {
        return StoredDType.byName(t.dtype()).orElseThrow(); // validated by the header parser
    }

    private int arrayLength(TensorInfo t) {
        long n = t.numel();
        if (n > MAX_ARRAY) {
            throw error(path, "tensor " + quote(t.name()) + " has " + n + " elements, too many for one Java array;"
                    + " read it in ranges");
        }
        return (int) n;
    }

    /** The bytes of elements {@code [offset, offset + count)} of {@code t}, after checking both ranges. */
    private MemorySegment slice(TensorInfo t, long offset, int count, int dstLength, int dstOffset) {
        ensureOpen();
        long numel = t.numel();
        if (offset < 0 || count < 0 || offset > numel - count) {
            throw new IndexOutOfBoundsException(path + ": elements [" + offset + ", " + offset + " + " + count
                    + ") are outside tensor " + quote(t.name()) + " of " + numel + " elements");
        }
        java.util.Objects.checkFromIndexSize(dstOffset, count, dstLength);
        long size = storedDType(t).bytes();
        return data.asSlice(t.begin() + offset * size, count * size);
    }
}
