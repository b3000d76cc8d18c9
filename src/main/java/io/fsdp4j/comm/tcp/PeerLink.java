package io.fsdp4j.comm.tcp;

import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.HostStorage;
import io.fsdp4j.tensor.Tensor;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One TCP connection between this process and another for one group: the frames of that group's collectives,
 * in the order both sides call them. A frame is
 * <pre>
 *   int kind, long seq, int pieces, then per piece: int member, int slot, byte type, int count, count elements
 * </pre>
 * (elements little-endian: F32 4 bytes, BF16 and F16 2 bytes of raw bits, I32 4, F64 8), or {@code int -1, UTF reason}
 * when the sender's job is aborting. {@code member} is the group rank whose input the piece is; {@code slot} which
 * part of it (reduce-scatter: the member the slice is for).
 */
public final class PeerLink implements AutoCloseable {
    static final int ABORT = -1;
    static final byte F32 = 0, BF16 = 1, I32 = 2, F64 = 3, F16 = 4;
    private static final int CHUNK_BYTES = 1 << 16;
    private static final long ABORT_GRACE_MS = 2000;

    /** The other process's index in the job, and how messages name it: "node 1 (ranks 2-3)". */
    public final int process;
    public final String who;
    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;
    private final ReentrantLock writing = new ReentrantLock();
    private final byte[] writeChunk = new byte[CHUNK_BYTES];
    private final byte[] readChunk = new byte[CHUNK_BYTES];
    private volatile boolean aborted;
    private volatile boolean reading;

    public PeerLink(int process, String who, Socket socket, DataInputStream in, DataOutputStream out) {
        this.process = process;
        this.who = who;
        this.socket = socket;
        this.in = in;
        this.out = out;
    }

    public static PeerLink over(int process, String who, Socket socket) throws IOException {
        return new PeerLink(process, who, socket, new DataInputStream(new BufferedInputStream(socket.getInputStream(), CHUNK_BYTES)),
                new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), CHUNK_BYTES)));
    }

    /** Data one piece carries: a range of a host tensor's elements, floats or doubles. */
    sealed interface Source {
        record TensorRange(Tensor tensor, long start, int count) implements Source {}

        record Floats(float[] values) implements Source {}

        record Doubles(double[] values) implements Source {}
    }

    record OutPiece(int member, int slot, Source source) {}

    /**
     * A received piece: {@code data} is a float[], short[] (bf16 or fp16 bits, as {@code type} says), int[] or
     * double[].
     */
    record InPiece(int member, int slot, byte type, Object data) {
        int count() {
            return switch (data) {
                case float[] f -> f.length;
                case short[] s -> s.length;
                case int[] i -> i.length;
                case double[] d -> d.length;
                default -> throw new IllegalStateException();
            };
        }

        /** The elements widened to fp32, as {@link InProcessGroup} reads a tensor. */
        float[] floats() {
            return switch (data) {
                case float[] f -> f;
                case short[] s -> {
                    float[] f = new float[s.length];
                    for (int i = 0; i < s.length; i++) {
                        f[i] = type == F16 ? io.fsdp4j.tensor.Half.fromF16(s[i]) : io.fsdp4j.tensor.Half.fromBf16(s[i]);
                    }
                    yield f;
                }
                default -> throw new IllegalArgumentException("collective sums take F32, BF16 or F16 tensors");
            };
        }

        /** The elements as a host tensor of their own type. */
        Tensor tensor() {
            int n = count();
            return switch (data) {
                case float[] f -> new Tensor(DType.F32, new int[] {n}, new HostStorage.F32(f), 0);
                case short[] s when type == F16 -> new Tensor(DType.F16, new int[] {n}, new HostStorage.F16(s), 0);
                case short[] s -> new Tensor(DType.BF16, new int[] {n}, new HostStorage.Bf16(s), 0);
                case int[] i -> new Tensor(DType.I32, new int[] {n}, new HostStorage.I32(i), 0);
                default -> throw new IllegalStateException("doubles are not a tensor");
            };
        }
    }

    /** A received frame; {@code abortReason} non-null when the peer was aborting. */
    record InFrame(int kind, long seq, List<InPiece> pieces, String abortReason) {}

    void write(int kind, long seq, List<OutPiece> pieces) throws IOException {
        writing.lock();
        try {
            out.writeInt(kind);
            out.writeLong(seq);
            out.writeInt(pieces.size());
            for (OutPiece p : pieces) {
                out.writeInt(p.member());
                out.writeInt(p.slot());
                writeSource(p.source());
            }
            out.flush();
        } finally {
            writing.unlock();
        }
    }

    private void writeSource(Source source) throws IOException {
        switch (source) {
            case Source.TensorRange(Tensor t, long start, int count) -> {
                int from = CpuBackend.off(t) + Math.toIntExact(start);
                switch (t.storage()) {
                    case HostStorage.F32(float[] d) -> writeElements(F32, d, from, count);
                    case HostStorage.Bf16(short[] d) -> writeElements(BF16, d, from, count);
                    case HostStorage.F16(short[] d) -> writeElements(F16, d, from, count);
                    case HostStorage.I32(int[] d) -> writeElements(I32, d, from, count);
                    default -> throw new IllegalArgumentException("collectives between processes take host tensors, got " + t);
                }
            }
            case Source.Floats(float[] values) -> writeElements(F32, values, 0, values.length);
            case Source.Doubles(double[] values) -> writeElements(F64, values, 0, values.length);
        }
    }

    /** Writes {@code type}, {@code count} and elements {@code [from, from + count)} of {@code data}, a chunk at a time. */
    private void writeElements(byte type, Object data, int from, int count) throws IOException {
        out.writeByte(type);
        out.writeInt(count);
        int size = elementBytes(type);
        int per = CHUNK_BYTES / size;
        for (int i = 0; i < count; i += per) {
            int k = Math.min(per, count - i);
            copy(buffer(writeChunk), data, from + i, k, true);
            out.write(writeChunk, 0, k * size);
        }
    }

    /** Reads the next frame (only the group's leader thread reads a link). */
    InFrame read() throws IOException {
        reading = true; // before the check: an abort after it sees this thread reading and closes after the grace
        try {
            if (aborted) {
                throw new IOException("this side aborted the connection to " + who);
            }
            return readFrame();
        } finally {
            reading = false;
        }
    }

    private InFrame readFrame() throws IOException {
        int kind = in.readInt();
        if (kind == ABORT) {
            return new InFrame(kind, -1, List.of(), in.readUTF());
        }
        long seq = in.readLong();
        int n = in.readInt();
        List<InPiece> pieces = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            int member = in.readInt(), slot = in.readInt();
            byte type = in.readByte();
            int count = in.readInt();
            if (count < 0) {
                throw new IOException("corrupt frame from " + who + " (negative count)");
            }
            pieces.add(new InPiece(member, slot, type, readElements(type, count)));
        }
        return new InFrame(kind, seq, pieces, null);
    }

    private Object readElements(byte type, int count) throws IOException {
        int size = elementBytes(type);
        Object data = switch (type) {
            case F32 -> new float[count];
            case BF16, F16 -> new short[count];
            case I32 -> new int[count];
            default -> new double[count];
        };
        int per = CHUNK_BYTES / size;
        for (int i = 0; i < count; i += per) {
            int k = Math.min(per, count - i);
            in.readFully(readChunk, 0, k * size);
            copy(buffer(readChunk), data, i, k, false);
        }
        return data;
    }

    /** The bytes of one element of {@code type}; an unknown type is a corrupt frame. */
    private int elementBytes(byte type) throws IOException {
        return switch (type) {
            case F32, I32 -> 4;
            case BF16, F16 -> 2;
            case F64 -> 8;
            default -> throw new IOException("corrupt frame from " + who + " (element type " + type + ")");
        };
    }

    /**
     * Copies {@code k} elements between {@code chunk} (from its start) and {@code data} (a float[], short[], int[] or
     * double[], from index {@code at}): into the chunk when {@code toChunk}, out of it otherwise.
     */
    private static void copy(ByteBuffer chunk, Object data, int at, int k, boolean toChunk) {
        switch (data) {
            case float[] f -> {
                if (toChunk) {
                    chunk.asFloatBuffer().put(f, at, k);
                } else {
                    chunk.asFloatBuffer().get(f, at, k);
                }
            }
            case short[] s -> {
                if (toChunk) {
                    chunk.asShortBuffer().put(s, at, k);
                } else {
                    chunk.asShortBuffer().get(s, at, k);
                }
            }
            case int[] v -> {
                if (toChunk) {
                    chunk.asIntBuffer().put(v, at, k);
                } else {
                    chunk.asIntBuffer().get(v, at, k);
                }
            }
            case double[] d -> {
                if (toChunk) {
                    chunk.asDoubleBuffer().put(d, at, k);
                } else {
                    chunk.asDoubleBuffer().get(d, at, k);
                }
            }
            default -> throw new IllegalStateException();
        }
    }

    private static ByteBuffer buffer(byte[] bytes) {
        return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * Tells the peer why this job stops, unless a frame is being written now (then the connection is closed), and
     * ends this side's sending. Reading stays open: the peer answers with its own abort or by closing, which wakes a
     * thread reading here; if the peer stays silent, the connection is closed after {@value #ABORT_GRACE_MS} ms.
     */
    void abort(String reason) {
        aborted = true;
        try {
            if (writing.tryLock(200, TimeUnit.MILLISECONDS)) {
                try {
                    out.writeInt(ABORT);
                    out.writeUTF(reason.length() > 2000 ? reason.substring(0, 2000) : reason);
                    out.flush();
                    socket.shutdownOutput();
                } finally {
                    writing.unlock();
                }
                Thread.ofVirtual().name("abort-" + process).start(() -> {
                    try {
                        Thread.sleep(ABORT_GRACE_MS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    if (reading) {
                        close(); // the peer is silent: release the thread waiting for it
                    }
                });
                return;
            }
        } catch (IOException e) {
            // the peer is gone already
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        close();
    }

    /**
     * Closes the connection. After an abort, first reads what the peer still sends until it closes its side or
     * {@code deadline} (nanoTime) passes: closing with unread data would reset the connection, and the peer could
     * lose the abort's reason before reading it.
     */
    void close(long deadline) {
        if (aborted && !socket.isClosed()) {
            try {
                byte[] sink = new byte[CHUNK_BYTES];
                while (true) {
                    long left = (deadline - System.nanoTime()) / 1_000_000;
                    if (left <= 0) {
                        break;
                    }
                    socket.setSoTimeout((int) Math.min(left, Integer.MAX_VALUE));
                    if (socket.getInputStream().read(sink) < 0) {
                        break;
                    }
                }
            } catch (IOException e) {
                // timed out or reset: close now
            }
        }
        close();
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException e) {
            // closing anyway
        }
    }
}
