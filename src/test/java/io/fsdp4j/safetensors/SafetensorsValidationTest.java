package io.fsdp4j.safetensors;

import static io.fsdp4j.safetensors.TestFiles.assertUserError;
import static io.fsdp4j.safetensors.TestFiles.raw;

import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every malformed file is a UserError with a one-line message that names the file and the problem. */
class SafetensorsValidationTest {
    @TempDir
    Path dir;

    private Path file(String name) {
        return dir.resolve(name + ".safetensors");
    }

    private static String entry(String name, String body) {
        return "\"" + name + "\": {" + body + "}";
    }

    private static Arguments bad(String label, String header, int dataBytes, String... fragments) {
        return Arguments.of(label, header, dataBytes, fragments);
    }

    static Stream<Arguments> badHeaders() {
        String ok = entry("ok", "\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]");
        return Stream.of(
                bad("corrupt JSON", "{\"w\": {\"dtype\": \"F32\", ", 8, "not valid JSON"),
                bad("trailing garbage", "{" + ok + "} xyz", 8, "not valid JSON"),
                bad("duplicate key", "{" + ok + ", " + ok + "}", 8, "duplicate"),
                bad("array header", "[1, 2]", 8, "not a JSON object"),
                bad("empty header", "", 8, "empty"),
                bad("entry not object", "{\"w\": 3}", 8, "'w' is a number"),
                bad("missing dtype", "{" + entry("w", "\"shape\": [2], \"data_offsets\": [0, 8]") + "}", 8,
                        "'w' has no \"dtype\""),
                bad("missing shape", "{" + entry("w", "\"dtype\": \"F32\", \"data_offsets\": [0, 8]") + "}",
                        8, "'w' has no \"shape\""),
                bad("missing offsets", "{" + entry("w", "\"dtype\": \"F32\", \"shape\": [2]") + "}", 8,
                        "'w' has no \"data_offsets\""),
                bad("dtype not string",
                        "{" + entry("w", "\"dtype\": 4, \"shape\": [2], \"data_offsets\": [0, 8]") + "}", 8,
                        "dtype that is a number"),
                bad("unknown dtype",
                        "{" + entry("w", "\"dtype\": \"F128\", \"shape\": [2], \"data_offsets\": [0, 8]") + "}", 8,
                        "unknown dtype 'F128'"),
                bad("lower-case dtype",
                        "{" + entry("w", "\"dtype\": \"f32\", \"shape\": [2], \"data_offsets\": [0, 8]") + "}", 8,
                        "unknown dtype 'f32'"),
                bad("shape not array",
                        "{" + entry("w", "\"dtype\": \"F32\", \"shape\": 2, \"data_offsets\": [0, 8]") + "}", 8,
                        "\"shape\" 2, expected an array"),
                bad("fractional dim",
                        "{" + entry("w", "\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 8]") + "}", 8,
                        "expected an array of non-negative integers"),
                bad("negative dim",
                        "{" + entry("w", "\"dtype\": \"F32\", \"shape\": [-2], \"data_offsets\": [0, 8]") + "}", 8,
                        "negative dimension"),
                bad("three offsets",
                        "{" + entry("w", "\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8, 9]") + "}", 8,
                        "expected an array of 2"),
                bad("negative offset",
                        "{" + entry("w", "\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [-4, 0]") + "}", 8,
                        "negative offset"),
                bad("begin after end",
                        "{" + entry("w", "\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]") + "}", 8,
                        "begin after end"),
                bad("size mismatch",
                        "{" + entry("w", "\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [0, 8]") + "}", 8,
                        "spanning 8 bytes, but shape [3] of BF16 needs 3 x 2 = 6 bytes"),
                bad("size overflow",
                        "{" + entry("w", "\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 8]")
                                + "}", 8, "overflows"),
                bad("offsets beyond the file",
                        "{" + entry("w", "\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]") + "}", 8,
                        "truncated", "shorter than its header says"),
                bad("overlap",
                        "{" + ok + ", " + entry("v", "\"dtype\": \"BF16\", \"shape\": [2], \"data_offsets\": [6, 10]")
                                + "}", 12, "'ok' [0, 8] and 'v' [6, 10] overlap"),
                bad("metadata not strings", "{\"__metadata__\": {\"step\": 3}, " + ok + "}", 8,
                        "__metadata__ entry 'step' is a number"),
                bad("metadata not object", "{\"__metadata__\": [], " + ok + "}", 8,
                        "__metadata__ is an array"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("badHeaders")
    void rejectsBadHeader(String label, String header, int dataBytes, String... fragments) {
        Path f = raw(file(label.replace(' ', '_')), header, new byte[dataBytes]);
        assertUserError(() -> SafetensorsFile.open(f), f, fragments);
    }

    @Test
    void rejectsAFileShorterThanTheLengthPrefix() throws IOException {
        Path f = Files.write(file("tiny"), new byte[] {1, 2, 3});
        assertUserError(() -> SafetensorsFile.open(f), f, "3 bytes", "shorter than the 8-byte header length");
        Path empty = Files.write(file("empty"), new byte[0]);
        assertUserError(() -> SafetensorsFile.open(empty), empty, "0 bytes");
    }

    @Test
    void rejectsAHeaderLengthLargerThanTheFile() {
        byte[] header = "{}".getBytes(StandardCharsets.UTF_8);
        Path f = raw(file("long"), 1000, header, new byte[0]);
        assertUserError(() -> SafetensorsFile.open(f), f, "header length 1000 is larger than the file (10 bytes)");
    }

    @Test
    void rejectsAnAbsurdHeaderLength() {
        Path huge = raw(file("huge"), 1L << 40, new byte[16], new byte[0]);
        assertUserError(() -> SafetensorsFile.open(huge), huge, "header length 1099511627776 is absurd");
        Path negative = raw(file("negative"), -1, new byte[16], new byte[0]);
        assertUserError(() -> SafetensorsFile.open(negative), negative, "18446744073709551615 is absurd");
    }

    @Test
    void rejectsAHeaderThatIsNotUtf8() {
        byte[] header = {'{', '"', (byte) 0xff, (byte) 0xfe, '"', ':', '1', '}'};
        Path f = raw(file("latin"), header.length, header, new byte[0]);
        assertUserError(() -> SafetensorsFile.open(f), f, "not valid UTF-8");
    }

    @Test
    void rejectsATruncatedFile() throws IOException {
        Path f = file("cut");
        SafetensorsWriter.write(f, List.of(
                NamedTensor.of("a", DType.F32, new long[] {4}, new float[4]),
                NamedTensor.of("b", DType.F32, new long[] {4}, new float[4])));
        long size = Files.size(f);
        try (FileChannel c = FileChannel.open(f, StandardOpenOption.WRITE)) {
            c.truncate(size - 3);
        }
        assertUserError(() -> SafetensorsFile.open(f), f, "file is truncated", "it is " + (size - 3) + " bytes",
                "shorter than its header says", "'b' ends at byte " + size);
    }

    @Test
    void namesWithControlCharactersStayOnOneLine() {
        String header = "{" + entry("evil\\nname", "\"dtype\": \"X\", \"shape\": [], \"data_offsets\": [0, 0]") + "}";
        Path f = raw(file("evil"), header, new byte[0]);
        assertUserError(() -> SafetensorsFile.open(f), f, "'evil\\u000aname'", "unknown dtype 'X'");
    }

    @Test
    void rejectsMissingFilesAndFolders() {
        Path missing = file("absent");
        assertUserError(() -> SafetensorsFile.open(missing), missing, "no such file");
        assertUserError(() -> SafetensorsFile.open(dir), dir, "is a directory");
    }
}
