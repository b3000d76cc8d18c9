package io.fsdp4j.safetensors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import io.fsdp4j.UserError;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;

/** Builds safetensors files byte by byte, and checks user errors. */
final class TestFiles {
    private TestFiles() {}

    /** Writes the 8-byte little-endian {@code declaredLength}, then {@code header} and {@code data}. */
    static Path raw(Path file, long declaredLength, byte[] header, byte[] data) {
        ByteBuffer b = ByteBuffer.allocate(8 + header.length + data.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(declaredLength).put(header).put(data);
        try {
            return Files.write(file, b.array());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A file with a correct length prefix for {@code headerJson}. */
    static Path raw(Path file, String headerJson, byte[] data) {
        byte[] header = headerJson.getBytes(StandardCharsets.UTF_8);
        return raw(file, header.length, header, data);
    }

    static byte[] bytes(int... values) {
        byte[] b = new byte[values.length];
        for (int i = 0; i < values.length; i++) {
            b[i] = (byte) values[i];
        }
        return b;
    }

    /** Asserts that {@code call} throws a UserError with a one-line message naming {@code file} and every fragment. */
    static UserError assertUserError(ThrowingCallable call, Path file, String... fragments) {
        UserError e = catchThrowableOfType(UserError.class, call);
        assertThat(e).as("expected a UserError").isNotNull();
        assertThat(e.getMessage()).doesNotContain("\n", "\r").contains(file.getFileName().toString());
        for (String f : fragments) {
            assertThat(e.getMessage()).containsIgnoringCase(f);
        }
        return e;
    }
}
