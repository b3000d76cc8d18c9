package io.fsdp4j.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The event files of {@link TensorBoardEvents} decoded here (TFRecord framing, both masked CRC-32Cs, the Event
 * protocol buffer) and compared event by event with files PyTorch's {@code SummaryWriter} wrote for the same scalars
 * ({@code tools/tensorboard/make_fixture.py}); {@code tools/tensorboard/check_events.py} reads a run's files with
 * TensorBoard's own {@code EventAccumulator}.
 */
class TensorBoardEventsTest {
    private static final Path FIXTURES = Path.of("src/test/resources/tensorboard");

    /** The scalars of make_fixture.py's SCALARS, in its order. */
    private static final List<Scalar> SCALARS = List.of(
            new Scalar("train/loss", 1, 5.5554962158203125f),
            new Scalar("train/lr", 1, 3e-3f),
            new Scalar("train/grad_norm", 1, 0.0f),
            new Scalar("train/loss", 2, -1.25f),
            new Scalar("train/tok_s", 2, 123456.789f),
            new Scalar("train/loss", 300, Float.NaN),
            new Scalar("eval/loss", 300, 4.5f));

    record Scalar(String tag, long step, float value) {}

    /** One decoded Event: wall_time, step, and which of its fields were set. */
    record Event(double wallTime, long step, String fileVersion, String writer, int sessionStatus, List<Scalar> values) {
        /** The event without its wall time and writer, which differ between two programs writing the same scalars. */
        Event comparable() {
            return new Event(0, step, fileVersion, null, sessionStatus, values);
        }
    }

    @Test
    void writesWhatSummaryWriterWritesForTheSameScalars(@TempDir Path dir) throws IOException {
        double[] clock = {1_795_600_000.25};
        try (var events = TensorBoardEvents.create(dir, 0, () -> clock[0]++)) {
            for (Scalar s : SCALARS) {
                events.scalar(s.tag(), s.step(), s.value());
            }
        }
        List<Event> ours = decode(onlyFile(dir)), python = decode(FIXTURES.resolve("fresh.tfevents"));
        assertThat(ours).hasSize(SCALARS.size() + 1);
        assertThat(ours.stream().map(Event::comparable).toList())
                .isEqualTo(python.stream().map(Event::comparable).toList());
        assertThat(ours.getFirst().fileVersion()).isEqualTo("brain.Event:2");
        assertThat(ours.getFirst().writer()).isEqualTo("fsdp4j");
        assertThat(ours.getFirst().wallTime()).isEqualTo(1_795_600_000.25);
        assertThat(ours.get(1).wallTime()).isEqualTo(1_795_600_001.25); // each event stamped when written
        assertThat(ours.stream().skip(1).map(e -> e.values().getFirst()).toList()).isEqualTo(SCALARS);
        assertThat(onlyFile(dir).getFileName().toString()).startsWith("events.out.tfevents.1795600000.")
                .endsWith("." + ProcessHandle.current().pid() + ".fsdp4j");
    }

    @Test
    void aResumedRunTellsTensorBoardToDropWhatTheInterruptedRunLoggedAfterItsStep(@TempDir Path dir) throws IOException {
        try (var events = TensorBoardEvents.create(dir, 2, () -> 1_795_600_000.0)) {
            events.scalar("train/loss", 3, 2.0);
        }
        List<Event> ours = decode(onlyFile(dir)), python = decode(FIXTURES.resolve("resumed.tfevents"));
        assertThat(ours.stream().map(Event::comparable).toList())
                .isEqualTo(python.stream().map(Event::comparable).toList());
        assertThat(ours.get(2).sessionStatus()).isEqualTo(1); // SessionLog.START
        assertThat(ours.get(2).step()).isEqualTo(3);
    }

    @Test
    void aMetricsRecordBecomesTrainAndEvalScalars(@TempDir Path dir) throws IOException {
        Map<String, Object> line = new LinkedHashMap<>(StepMetrics.of(7, 2.5, 0.75, 2e-5, 4096, 1000, 0.5, 2,
                Double.NaN, 1.5, false).toMap());
        line.put("skipped", false);
        line.put("skipped_steps", 1);
        line.put("eval_loss", 2.25);
        line.put("eval_perplexity", 9.5);
        line.put("eval_tokens", 1234);
        Map<String, Object> before = new LinkedHashMap<>();
        before.put("step", 0);
        before.put("eval_loss", 3.0);
        try (var events = TensorBoardEvents.create(dir, 0)) {
            events.record(before);
            events.record(line);
            events.record(Map.of("summary", true, "tok_s", 5.0)); // no step: not a step's record
        }
        List<Scalar> scalars = decode(onlyFile(dir)).stream().flatMap(e -> e.values().stream()).toList();
        assertThat(scalars).containsExactly(
                new Scalar("eval/loss", 0, 3.0f),
                new Scalar("train/loss", 7, 2.5f),
                new Scalar("train/grad_norm", 7, 0.75f),
                new Scalar("train/lr", 7, 2e-5f),
                new Scalar("train/tok_s", 7, 8192f),
                new Scalar("train/peak_reserved_gib", 7, 1.5f), // CPU ranks: mfu null, the heap named as the heap too
                new Scalar("train/peak_heap_gib", 7, 1.5f),
                new Scalar("train/skipped_steps", 7, 1f),
                new Scalar("eval/loss", 7, 2.25f),
                new Scalar("eval/perplexity", 7, 9.5f));
    }

    @Test
    void aDirectoryThatCannotBeMadeIsOneLineNamingIt(@TempDir Path dir) throws IOException {
        Path file = Files.writeString(dir.resolve("a-file"), "x");
        assertThatThrownBy(() -> TensorBoardEvents.create(file.resolve("tb"), 0)).isInstanceOf(UserError.class)
                .hasMessageStartingWith("cannot write log.tensorboard " + file.resolve("tb"));
    }

    @Test
    void theDecoderRefusesADamagedRecord(@TempDir Path dir) throws IOException {
        byte[] bytes = Files.readAllBytes(FIXTURES.resolve("fresh.tfevents"));
        bytes[bytes.length - 6] ^= 1; // the last scalar's value
        Path damaged = Files.write(dir.resolve("damaged.tfevents"), bytes);
        assertThatThrownBy(() -> decode(damaged)).hasMessageContaining("data CRC");
        bytes = Files.readAllBytes(FIXTURES.resolve("fresh.tfevents"));
        bytes[1] ^= 1; // the first record's length
        Files.write(damaged, bytes);
        assertThatThrownBy(() -> decode(damaged)).hasMessageContaining("length CRC");
    }

    @Test
    void masksTheCrcAsTfRecordDoes() {
        // TensorFlow's crc32c tests: crc32c("123456789") = 0xe3069283; masked: rotate right 15, add 0xa282ead8
        byte[] digits = "123456789".getBytes(StandardCharsets.US_ASCII);
        int crc = 0xe3069283;
        assertThat(TensorBoardEvents.maskedCrc(digits, 0, digits.length))
                .isEqualTo(((crc >>> 15) | (crc << 17)) + 0xa282ead8);
    }

    private static Path onlyFile(Path dir) throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            List<Path> all = files.toList();
            assertThat(all).hasSize(1);
            return all.getFirst();
        }
    }

    // --- a reader of TFRecord files of Event protocol buffers, written from the formats' descriptions ---

    static List<Event> decode(Path file) throws IOException {
        ByteBuffer in = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.LITTLE_ENDIAN);
        List<Event> events = new ArrayList<>();
        while (in.hasRemaining()) {
            byte[] length = new byte[8];
            in.get(length);
            int lengthCrc = in.getInt();
            if (lengthCrc != TensorBoardEvents.maskedCrc(length, 0, 8)) {
                throw new IllegalStateException(file + ": record " + events.size() + ": length CRC mismatch");
            }
            byte[] data = new byte[Math.toIntExact(ByteBuffer.wrap(length).order(ByteOrder.LITTLE_ENDIAN).getLong())];
            in.get(data);
            if (in.getInt() != TensorBoardEvents.maskedCrc(data, 0, data.length)) {
                throw new IllegalStateException(file + ": record " + events.size() + ": data CRC mismatch");
            }
            events.add(event(ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN)));
        }
        return events;
    }

    private static Event event(ByteBuffer b) {
        double wallTime = 0;
        long step = 0;
        String version = null, writer = null;
        int status = -1;
        List<Scalar> values = new ArrayList<>();
        List<ByteBuffer> summaries = new ArrayList<>();
        while (b.hasRemaining()) {
            int key = (int) varint(b);
            switch (key) {
                case 1 << 3 | 1 -> wallTime = b.getDouble();
                case 2 << 3 -> step = varint(b);
                case 3 << 3 | 2 -> version = text(field(b));
                case 5 << 3 | 2 -> summaries.add(field(b));
                case 7 << 3 | 2 -> {
                    ByteBuffer log = field(b);
                    status = 0;
                    while (log.hasRemaining()) {
                        int k = (int) varint(log);
                        if (k != (1 << 3)) {
                            throw new IllegalStateException("unexpected SessionLog field key " + k);
                        }
                        status = (int) varint(log);
                    }
                }
                case 10 << 3 | 2 -> {
                    ByteBuffer meta = field(b);
                    if (varint(meta) != (1 << 3 | 2)) {
                        throw new IllegalStateException("unexpected SourceMetadata field");
                    }
                    writer = text(field(meta));
                }
                default -> throw new IllegalStateException("unexpected Event field key " + key);
            }
        }
        for (ByteBuffer summary : summaries) {
            while (summary.hasRemaining()) {
                if (varint(summary) != (1 << 3 | 2)) {
                    throw new IllegalStateException("unexpected Summary field");
                }
                ByteBuffer value = field(summary);
                String tag = null;
                Float simple = null;
                while (value.hasRemaining()) {
                    int k = (int) varint(value);
                    switch (k) {
                        case 1 << 3 | 2 -> tag = text(field(value));
                        case 2 << 3 | 5 -> simple = value.getFloat();
                        default -> throw new IllegalStateException("unexpected Summary.Value field key " + k);
                    }
                }
                values.add(new Scalar(tag, step, simple == null ? Float.NaN : simple));
            }
        }
        return new Event(wallTime, step, version, writer, status, values);
    }

    private static long varint(ByteBuffer b) {
        long result = 0;
        for (int shift = 0; ; shift += 7) {
            byte next = b.get();
            result |= (long) (next & 0x7F) << shift;
            if (next >= 0) {
                return result;
            }
        }
    }

    private static ByteBuffer field(ByteBuffer b) {
        int length = (int) varint(b);
        ByteBuffer slice = b.slice(b.position(), length).order(ByteOrder.LITTLE_ENDIAN);
        b.position(b.position() + length);
        return slice;
    }

    private static String text(ByteBuffer b) {
        byte[] bytes = new byte[b.remaining()];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
