package io.fsdp4j.safetensors;

import static io.fsdp4j.safetensors.TestFiles.assertUserError;
import static io.fsdp4j.safetensors.TestFiles.bytes;
import static io.fsdp4j.safetensors.TestFiles.raw;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Half;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SafetensorsFileTest {
    @TempDir
    Path dir;

    /** A file whose header and bytes are written out by hand, with unaligned offsets and a gap. */
    private Path handBuilt() {
        String header = """
                {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "__metadata__": {"format": "pt"},
                 "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [8, 12]},
                 "c": {"dtype": "F16", "shape": [], "data_offsets": [13, 15]},
                 "d": {"dtype": "F64", "shape": [1], "data_offsets": [15, 23]},
                 "e": {"dtype": "I64", "shape": [2], "data_offsets": [23, 39]},
                 "f": {"dtype": "U8", "shape": [1], "data_offsets": [39, 40]},
                 "g": {"dtype": "I32", "shape": [1], "data_offsets": [40, 44]}}""";
        byte[] data = bytes(
                0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0, // a: 1.0f, -2.0f
                0x00, 0x3f, 0x80, 0xbf, // b: bf16 0x3f00 = 0.5, 0xbf80 = -1
                0xee, // a byte in the gap, belonging to no tensor
                0x00, 0x3c, // c: f16 0x3c00 = 1.0
                0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x40, // d: 3.5
                0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // e: -2
                0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //    5
                0x07, // f: 7
                0x2a, 0x00, 0x00, 0x00); // g: 42
        return raw(dir.resolve("hand.safetensors"), header, data);
    }

    @Test
    void readsAHandBuiltFile() {
        Path file = handBuilt();
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.path()).isEqualTo(file);
            assertThat(f.names()).containsExactly("a", "b", "c", "d", "e", "f", "g");
            assertThat(f.metadata()).containsExactlyEntriesOf(java.util.Map.of("format", "pt"));
            assertThat(f.info("b")).isEqualTo(new TensorInfo("b", "BF16", new long[] {1, 2}, 8, 12));
            assertThat(f.info("b").numel()).isEqualTo(2);
            assertThat(f.info("b").knownDType()).contains(DType.BF16);
            assertThat(f.info("d").knownDType()).isEmpty();
            assertThat(f.info("c").rank()).isZero();
            assertThat(f.readFloats("a")).containsExactly(1f, -2f);
            assertThat(f.readFloats("b")).containsExactly(0.5f, -1f);
            assertThat(f.readFloats("c")).containsExactly(1f);
            assertThat(f.readFloats("d")).containsExactly(3.5f);
            assertThat(f.readInts("e")).containsExactly(-2, 5);
            assertThat(f.readInts("g")).containsExactly(42);
            MemorySegment raw = f.raw("f");
            assertThat(raw.isReadOnly()).isTrue();
            assertThat(raw.byteSize()).isEqualTo(1);
            assertThat(raw.get(ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) 7);
        }
    }

    @Test
    void refusesConversionsItCannotDo() {
        Path file = handBuilt();
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertUserError(() -> f.readFloats("f"), file, "'f'", "U8", "cannot be read as floats");
            assertUserError(() -> f.readFloats("e"), file, "I64", "cannot be read as floats");
            assertUserError(() -> f.readInts("a"), file, "F32", "cannot be read as ints");
        }
    }

    @Test
    void i64OutsideIntRangeIsAnError() {
        String header = "{\"big\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]}}";
        Path file = raw(dir.resolve("big.safetensors"), header, bytes(0, 0, 0, 0x80, 0, 0, 0, 0)); // 2^31
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertUserError(() -> f.readInts("big"), file, "2147483648", "outside the 32-bit int range");
        }
    }

    @Test
    void unknownTensorNameIsMissing() {
        Path file = handBuilt();
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.contains("nope")).isFalse();
            assertUserError(() -> f.info("nope"), file, "'nope'", "missing from the file");
            assertUserError(() -> f.readFloats("nope"), file, "missing");
            assertUserError(() -> f.raw("nope"), file, "missing");
        }
    }

    @Test
    void acceptsEveryDtypeName() {
        String[] names = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2",
                "U16", "U32", "U64"};
        int[] sizes = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1, 1, 1, 2, 4, 8};
        StringBuilder header = new StringBuilder("{");
        int at = 0;
        for (int i = 0; i < names.length; i++) {
            header.append(i == 0 ? "" : ",").append('"').append(names[i]).append("\": {\"dtype\": \"").append(names[i])
                    .append("\", \"shape\": [3], \"data_offsets\": [").append(at).append(", ")
                    .append(at += 3 * sizes[i]).append("]}");
        }
        Path file = raw(dir.resolve("all.safetensors"), header.append('}').toString(), new byte[at]);
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.names()).containsExactly(names);
            for (int i = 0; i < names.length; i++) {
                assertThat(f.raw(names[i]).byteSize()).isEqualTo(3L * sizes[i]);
            }
        }
    }

    @Test
    void readsSubRanges() {
        int n = 40_000; // spans several conversion chunks
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            values[i] = (i % 1000) - 500.5f;
        }
        Path file = dir.resolve("s.safetensors");
        SafetensorsWriter.write(file, List.of(
                NamedTensor.of("f32", DType.F32, new long[] {200, 200}, values),
                NamedTensor.of("bf16", DType.BF16, new long[] {200, 200}, values),
                NamedTensor.of("f16", DType.F16, new long[] {n}, values)));
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            for (String name : List.of("f32", "bf16", "f16")) {
                float[] whole = f.readFloats(name);
                float[] dst = new float[25_000];
                Arrays.fill(dst, -1f);
                f.readFloats(name, 12_345, dst, 3, 20_000);
                assertThat(Arrays.equals(dst, 3, 20_003, whole, 12_345, 32_345)).as(name).isTrue();
                assertThat(dst[2]).isEqualTo(-1f);
                assertThat(dst[20_003]).isEqualTo(-1f);
                f.readFloats(name, n - 1, dst, 0, 1);
                assertThat(dst[0]).isEqualTo(whole[n - 1]);
                f.readFloats(name, n, dst, 0, 0); // an empty range at the end is fine
            }
            assertThat(Arrays.equals(f.readFloats("f32"), values)).isTrue();
            assertThat(f.readFloats("bf16")[7]).isEqualTo(Half.roundBf16(values[7]));
            float[] dst = new float[10];
            assertThatThrownBy(() -> f.readFloats("f32", n - 5, dst, 0, 6))
                    .isInstanceOf(IndexOutOfBoundsException.class).hasMessageContaining("outside tensor 'f32'");
            assertThatThrownBy(() -> f.readFloats("f32", -1, dst, 0, 1)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> f.readFloats("f32", 0, dst, 5, 6)).isInstanceOf(IndexOutOfBoundsException.class);
        }
    }

    @Test
    void closeIsIdempotentAndInvalidatesReads() {
        Path file = handBuilt();
        SafetensorsFile f = SafetensorsFile.open(file);
        MemorySegment view = f.raw("a");
        f.close();
        f.close();
        assertThatThrownBy(() -> f.readFloats("a")).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> view.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
    }
}
