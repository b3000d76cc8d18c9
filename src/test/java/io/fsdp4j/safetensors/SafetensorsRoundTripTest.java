package io.fsdp4j.safetensors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.tensor.DType;
import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SafetensorsRoundTripTest {
    @TempDir
    Path dir;

    private float[] roundTrip(DType dtype, float... values) {
        Path file = dir.resolve(dtype + ".safetensors");
        SafetensorsWriter.write(file, List.of(NamedTensor.of("t", dtype, new long[] {values.length}, values)));
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.info("t")).isEqualTo(new TensorInfo("t", dtype.safetensorsName(),
                    new long[] {values.length}, 0, (long) values.length * dtype.bytes()));
            return f.readFloats("t");
        }
    }

    @Test
    void f32IsExact() {
        float[] values = {0f, -0f, 1f, -2.5f, Float.MIN_VALUE, Float.MAX_VALUE, Float.POSITIVE_INFINITY,
                Float.NEGATIVE_INFINITY, Float.NaN, 1e-30f, (float) Math.PI};
        assertThat(roundTrip(DType.F32, values)).containsExactly(values);
    }

    @Test
    void bf16RoundsToNearestEven() {
        float one = 1f;
        float[] read = roundTrip(DType.BF16,
                one,
                one + 0x1p-8f, // halfway between 1 and 1 + 2^-7: ties to even, down to 1
                one + 3 * 0x1p-8f, // halfway between 1 + 2^-7 and 1 + 2^-6: ties to even, up
                one + 0x1p-8f + 0x1p-20f, // just above halfway: up
                -3f,
                Float.NaN,
                Float.POSITIVE_INFINITY);
        assertThat(read).containsExactly(1f, 1f, 1f + 0x1p-6f, 1f + 0x1p-7f, -3f, Float.NaN, Float.POSITIVE_INFINITY);
    }

    @Test
    void bf16BytesAreLittleEndian() throws IOException {
        Path file = dir.resolve("b.safetensors");
        SafetensorsWriter.write(file, List.of(NamedTensor.of("t", DType.BF16, new long[] {2}, new float[] {1f, -2f})));
        byte[] all = Files.readAllBytes(file);
        long headerLength = ByteBuffer.wrap(all).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
        assertThat(all).endsWith(0x80, 0x3f, 0x00, 0xc0); // 0x3f80 = 1, 0xc000 = -2
        assertThat(all).hasSize((int) (8 + headerLength + 4));
    }

    @Test
    void f16RoundsToNearestEven() {
        float[] read = roundTrip(DType.F16,
                1f,
                1f + 0x1p-11f, // halfway between 1 and 1 + 2^-10: down
                1f + 3 * 0x1p-11f, // halfway between 1 + 2^-10 and 1 + 2^-9: up
                65504f, // largest f16
                65520f, // halfway to the next power: overflows
                0x1p-24f, // smallest subnormal
                -0.5f);
        assertThat(read).containsExactly(1f, 1f, 1f + 0x1p-9f, 65504f, Float.POSITIVE_INFINITY, 0x1p-24f, -0.5f);
    }

    @Test
    void i32FromIntsAndFromIntegralFloats() {
        Path file = dir.resolve("i.safetensors");
        int[] ints = {Integer.MIN_VALUE, -1, 0, 1, Integer.MAX_VALUE, 123_456_789};
        SafetensorsWriter.write(file, List.of(
                NamedTensor.ofInts("ids", new long[] {2, 3}, ints),
                NamedTensor.of("small", DType.I32, new long[] {3}, new float[] {-7f, 0f, 16_777_216f})));
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.info("ids").dtype()).isEqualTo("I32");
            assertThat(f.info("ids").knownDType()).contains(DType.I32);
            assertThat(f.readInts("ids")).containsExactly(ints);
            assertThat(f.readInts("small")).containsExactly(-7, 0, 16_777_216);
        }
    }

    @Test
    void i32FromNonIntegralFloatFailsAndLeavesNoFile() throws IOException {
        Path file = dir.resolve("bad.safetensors");
        for (float bad : new float[] {0.5f, Float.NaN, 0x1p31f}) {
            assertThatThrownBy(() -> SafetensorsWriter.write(file,
                    List.of(NamedTensor.of("x", DType.I32, new long[] {2}, new float[] {1f, bad}))))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("not a 32-bit int");
        }
        try (Stream<Path> left = Files.list(dir)) {
            assertThat(left).isEmpty();
        }
    }

    @Test
    void metadataRoundTrips() {
        Path file = dir.resolve("m.safetensors");
        Map<String, String> metadata = new LinkedHashMap<>();
        metadata.put("format", "pt");
        metadata.put("step", "1200");
        metadata.put("note", "héllo \"quoted\" ✓");
        SafetensorsWriter.write(file, List.of(NamedTensor.of("w", DType.F32, new long[] {1}, new float[] {2f})),
                metadata);
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.metadata()).containsExactlyEntriesOf(metadata);
        }
        Path plain = dir.resolve("plain.safetensors");
        SafetensorsWriter.write(plain, List.of(NamedTensor.of("w", DType.F32, new long[] {1}, new float[] {2f})));
        try (SafetensorsFile f = SafetensorsFile.open(plain)) {
            assertThat(f.metadata()).isEmpty();
        }
    }

    @Test
    void keepsInsertionOrderAlignsDataAndPadsHeader() throws IOException {
        Path file = dir.resolve("mixed.safetensors");
        List<NamedTensor> tensors = List.of(
                NamedTensor.of("z.bf16", DType.BF16, new long[] {3}, new float[] {1, 2, 3}),
                NamedTensor.of("a.f32", DType.F32, new long[] {2, 2}, new float[] {1, 2, 3, 4}),
                NamedTensor.of("m.f16", DType.F16, new long[] {1}, new float[] {5}),
                NamedTensor.ofInts("b.i32", new long[] {1}, new int[] {9}),
                NamedTensor.of("scalar", DType.F32, new long[] {}, new float[] {7}),
                NamedTensor.of("empty", DType.BF16, new long[] {0, 4}, new float[0]));
        SafetensorsWriter.write(file, tensors, Map.of("k", "v"));

        byte[] all = Files.readAllBytes(file);
        long headerLength = ByteBuffer.wrap(all).order(ByteOrder.LITTLE_ENDIAN).getLong(0);
        assertThat(headerLength % 8).isZero();
        String header = new String(all, 8, (int) headerLength, StandardCharsets.UTF_8);
        assertThat(header).startsWith("{").matches("(?s).*} *");

        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.names()).containsExactly("z.bf16", "a.f32", "m.f16", "b.i32", "scalar", "empty");
            for (NamedTensor t : tensors) {
                TensorInfo info = f.info(t.name());
                assertThat(info.begin() % t.dtype().bytes()).as(t.name()).isZero();
                assertThat(info.shape()).isEqualTo(t.shape());
            }
            long dataBytes = all.length - 8 - headerLength;
            assertThat(dataBytes).isEqualTo(3 * 2 + 4 * 4 + 2 + 4 + 4);
            assertThat(f.readFloats("z.bf16")).containsExactly(1, 2, 3);
            assertThat(f.readFloats("a.f32")).containsExactly(1, 2, 3, 4);
            assertThat(f.readFloats("m.f16")).containsExactly(5);
            assertThat(f.readInts("b.i32")).containsExactly(9);
            assertThat(f.info("scalar").numel()).isEqualTo(1);
            assertThat(f.readFloats("scalar")).containsExactly(7);
            assertThat(f.info("empty").numel()).isZero();
            assertThat(f.readFloats("empty")).isEmpty();
            assertThat(f.raw("a.f32").getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 3))
                    .isEqualTo(4f);
        }
    }

    @Test
    void replacesAnExistingFileAndLeavesNoTemporaryFiles() throws IOException {
        Path file = dir.resolve("w.safetensors");
        SafetensorsWriter.write(file, List.of(NamedTensor.of("old", DType.F32, new long[] {1}, new float[] {1})));
        SafetensorsWriter.write(file, List.of(NamedTensor.of("new", DType.F32, new long[] {1}, new float[] {2})));
        try (SafetensorsFile f = SafetensorsFile.open(file)) {
            assertThat(f.names()).containsExactly("new");
            assertThat(f.readFloats("new")).containsExactly(2);
        }
        try (Stream<Path> files = Files.list(dir)) {
            assertThat(files).containsExactly(file);
        }
    }

    @Test
    void largeTensorCrossesWriteBuffers() {
        int n = 270_000; // 1.08 MB of F32: more than the writer's 1 MiB buffer
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            values[i] = i * 0.25f - 1000f;
        }
        assertThat(Arrays.equals(roundTrip(DType.F32, values), values)).isTrue();
        float[] bf16 = roundTrip(DType.BF16, values);
        for (int i = 0; i < n; i += 997) {
            assertThat(bf16[i]).isEqualTo(io.fsdp4j.tensor.Half.roundBf16(values[i]));
        }
    }

    @Test
    void rejectsBadTensorsBeforeWriting() {
        Path file = dir.resolve("x.safetensors");
        NamedTensor a = NamedTensor.of("a", DType.F32, new long[] {1}, new float[] {1});
        assertThatThrownBy(() -> SafetensorsWriter.write(file, List.of(a, a)))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("twice");
        assertThatThrownBy(() -> NamedTensor.of("b", DType.F32, new long[] {2, 2}, new float[3]))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("4 elements but 3");
        assertThatThrownBy(() -> NamedTensor.of("__metadata__", DType.F32, new long[] {1}, new float[1]))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> NamedTensor.of("c", DType.F32, new long[] {-1}, new float[0]))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("negative");
        assertThat(file).doesNotExist();
    }

    @Test
    void writingIntoAMissingFolderIsAUserError() {
        Path file = dir.resolve("no/such/folder/x.safetensors");
        TestFiles.assertUserError(() -> SafetensorsWriter.write(file,
                List.of(NamedTensor.of("a", DType.F32, new long[] {1}, new float[] {1}))), file, "does not exist");
    }
}
