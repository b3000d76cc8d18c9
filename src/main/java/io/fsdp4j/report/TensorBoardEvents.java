package io.fsdp4j.report;

import io.fsdp4j.UserError;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.function.DoubleSupplier;
import java.util.zip.CRC32C;

/**
 * A TensorBoard event file ({@code log.tensorboard}): what {@code tensorboard --logdir DIR} shows, written as
 * TensorFlow's {@code tf.summary} and PyTorch's {@code SummaryWriter} write it, without either.
 *
 * <p>The file, {@code DIR/events.out.tfevents.SECONDS.HOST.PID.fsdp4j}, is a TFRecord file: each record is the
 * length of its data (uint64, little-endian), the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C
 * of the data. Each record's data is an {@code Event} protocol buffer (tensorboard/compat/proto/event.proto),
 * encoded here by hand for the few fields used:
 * <pre>
 * Event        { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
 *                SessionLog session_log = 7; SourceMetadata source_metadata = 10; }
 * Summary      { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
 * SessionLog   { SessionStatus status = 1; }   (START = 1)
 * </pre>
 * The first event names the format ({@code brain.Event:2}) and the writer ({@code fsdp4j}); then one event per scalar, as {@code add_scalar}
 * writes them. A resumed run writes a new file that starts with {@code SessionLog.START} at the first step it will
 * train: TensorBoard then drops what the interrupted run logged from that step on (its "purge orphaned data"), as
 * {@code SummaryWriter(purge_step=...)} asks it to.
 *
 * <p>{@link #record} takes a metrics JSONL record ({@link StepMetrics#toMap} and the evaluation keys beside it):
 * {@code loss}, {@code grad_norm}, {@code lr}, {@code tok_s}, {@code mfu}, {@code peak_reserved_gib} (GPUs) or
 * {@code peak_heap_gib} (CPU ranks) and {@code skipped_steps} as {@code train/KEY}; every numeric {@code eval_KEY}
 * but {@code eval_tokens} as {@code eval/KEY}. Values are 32-bit floats, as TensorBoard keeps scalars.
 */
public final class TensorBoardEvents implements AutoCloseable {
    /** The format the first event names; TensorBoard reads session logs (and purges on START) from version 2. */
    static final String FILE_VERSION = "brain.Event:2";
    private static final int MASK_DELTA = 0xa282ead8;
    /** The first event's {@code source_metadata.writer}, as PyTorch's names its event file writer. */
    static final String WRITER = "fsdp4j";
    /** The training keys of a metrics record that become {@code train/KEY} scalars, in the order written. */
    private static final java.util.List<String> TRAIN_KEYS = java.util.List.of("loss", "grad_norm", "lr", "tok_s",
            "mfu", "peak_reserved_gib", "peak_heap_gib", "skipped_steps");

    private final Path file;
    private final OutputStream out;
    private final DoubleSupplier clock;

    private TensorBoardEvents(Path file, OutputStream out, DoubleSupplier clock) {
        this.file = file;
        this.out = out;
        this.clock = clock;
    }

    /**
     * A new event file in {@code dir} (made if missing). {@code resumedAfterStep} &gt; 0: the run continues after that
     * step, and TensorBoard is told to drop what an earlier run logged after it.
     */
    public static TensorBoardEvents create(Path dir, int resumedAfterStep) {
        return create(dir, resumedAfterStep, () -> System.currentTimeMillis() / 1000.0);
    }

    /** {@link #create(Path, int)} with the wall clock (seconds since the epoch) that stamps each event. */
    static TensorBoardEvents create(Path dir, int resumedAfterStep, DoubleSupplier clock) {
        double now = clock.getAsDouble();
        Path file = dir.resolve(String.format(java.util.Locale.ROOT, "events.out.tfevents.%010d.%s.%d.fsdp4j",
                (long) now, host(), ProcessHandle.current().pid()));
        try {
            Files.createDirectories(dir);
            // a second file of the same second and process (a test, a restart within it) must not be appended to
            Path unique = file;
            for (int n = 2; Files.exists(unique); n++) {
                unique = file.resolveSibling(file.getFileName() + "." + n);
            }
            file = unique;
            var events = new TensorBoardEvents(file, Files.newOutputStream(file, StandardOpenOption.CREATE_NEW,
                    StandardOpenOption.WRITE), clock);
            events.write(event(now, 0, concat(fileVersion(FILE_VERSION), sourceMetadata(WRITER))));
            if (resumedAfterStep > 0) { // as SummaryWriter(purge_step=step) starts its file
                events.write(event(now, resumedAfterStep + 1, fileVersion(FILE_VERSION)));
                events.write(event(now, resumedAfterStep + 1, sessionStart()));
            }
            events.out.flush();
            return events;
        } catch (IOException e) {
            throw new UserError("cannot write log.tensorboard " + file + ": " + reason(e));
        }
    }

    public Path file() {
        return file;
    }

    /** One scalar at {@code step}, as {@code SummaryWriter.add_scalar(tag, value, step)}. */
    public void scalar(String tag, long step, double value) {
        try {
            write(event(clock.getAsDouble(), step, summary(tag, (float) value)));
            out.flush();
        } catch (IOException e) {
            throw new UserError("cannot write log.tensorboard " + file + ": " + reason(e));
        }
    }

    /** The scalars of a metrics record (see the class comment) at its {@code step}. */
    public void record(Map<String, ?> record) {
        if (!(record.get("step") instanceof Number step)) {
            return;
        }
        for (String key : TRAIN_KEYS) {
            if (record.get(key) instanceof Number n) {
                scalar("train/" + key, step.longValue(), n.doubleValue());
            }
        }
        record.forEach((key, value) -> {
            if (key.startsWith("eval_") && !key.equals("eval_tokens") && value instanceof Number n
                    && !(value instanceof Boolean)) {
                scalar("eval/" + key.substring("eval_".length()), step.longValue(), n.doubleValue());
            }
        });
    }

    @Override
    public void close() {
        try {
            out.close();
        } catch (IOException e) {
            throw new UserError("cannot write log.tensorboard " + file + ": " + reason(e));
        }
    }

    /** One TFRecord: length, its masked CRC, the data, its masked CRC. */
    private void write(byte[] data) throws IOException {
        ByteBuffer header = ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN);
        header.putLong(data.length);
        header.putInt(maskedCrc(header.array(), 0, 8));
        out.write(header.array());
        out.write(data);
        out.write(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(maskedCrc(data, 0, data.length))
                .array());
    }

    /** CRC-32C of {@code bytes[offset, offset + length)}, rotated right by 15 bits plus a constant, as TFRecord masks it. */
    static int maskedCrc(byte[] bytes, int offset, int length) {
        CRC32C crc = new CRC32C();
        crc.update(bytes, offset, length);
        int c = (int) crc.getValue();
        return ((c >>> 15) | (c << 17)) + MASK_DELTA;
    }

    // --- protocol buffer encoding of the fields used (proto3: a field at its default value is left out) ---

    /** An Event: wall_time (1, double), step (2, int64), then one field of its oneof, already encoded. */
    static byte[] event(double wallTime, long step, byte[] what) {
        var b = new ByteArrayOutputStream();
        if (wallTime != 0) {
            b.write(tag(1, 1));
            b.writeBytes(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putDouble(wallTime).array());
        }
        if (step != 0) {
            b.write(tag(2, 0));
            varint(b, step);
        }
        b.writeBytes(what);
        return b.toByteArray();
    }

    /** Event.file_version (3). */
    static byte[] fileVersion(String version) {
        return lengthDelimited(3, version.getBytes(StandardCharsets.UTF_8));
    }

    /** Event.source_metadata (10) = SourceMetadata { writer (1) }: which program wrote the file. */
    static byte[] sourceMetadata(String writer) {
        return lengthDelimited(10, lengthDelimited(1, writer.getBytes(StandardCharsets.UTF_8)));
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] both = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, both, a.length, b.length);
        return both;
    }

    /** Event.session_log (7) = SessionLog { status (1) = START (1) }. */
    static byte[] sessionStart() {
        return lengthDelimited(7, new byte[] {(byte) tag(1, 0), 1});
    }

    /** Event.summary (5) = Summary { value (1) = Value { tag (1), simple_value (2, float) } }. */
    static byte[] summary(String tag, float value) {
        var v = new ByteArrayOutputStream();
        v.writeBytes(lengthDelimited(1, tag.getBytes(StandardCharsets.UTF_8)));
        v.write(tag(2, 5)); // a member of Value's oneof: written even at 0
        v.writeBytes(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putFloat(value).array());
        return lengthDelimited(5, lengthDelimited(1, v.toByteArray()));
    }

    private static int tag(int field, int wireType) {
        return field << 3 | wireType;
    }

    private static byte[] lengthDelimited(int field, byte[] payload) {
        var b = new ByteArrayOutputStream();
        b.write(tag(field, 2));
        varint(b, payload.length);
        b.writeBytes(payload);
        return b.toByteArray();
    }

    private static void varint(ByteArrayOutputStream b, long value) {
        while ((value & ~0x7FL) != 0) {
            b.write((int) (value & 0x7F) | 0x80);
            value >>>= 7;
        }
        b.write((int) value);
    }

    private static String host() {
        try {
            return InetAddress.getLocalHost().getHostName().replaceAll("[^A-Za-z0-9._-]", "_");
        } catch (IOException e) {
            return "localhost";
        }
    }

    private static String reason(IOException e) {
        return e instanceof FileSystemException f && f.getReason() != null ? f.getReason()
                : e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    }
}
