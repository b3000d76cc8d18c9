package io.fsdp4j.safetensors;

import java.util.Arrays;
import java.util.Optional;
import java.util.stream.Collectors;

/** Every element type a safetensors header may name; the constant names are the names used in headers. */
enum StoredDType {
    F64(8), F32(4), F16(2), BF16(2),
    I64(8), I32(4), I16(2), I8(1),
    U64(8), U32(4), U16(2), U8(1),
    BOOL(1), F8_E4M3(1), F8_E5M2(1);

    /** The known names, comma separated, for error messages. */
    static final String KNOWN = Arrays.stream(values()).map(Enum::name).collect(Collectors.joining(", "));

    private final int bytes;

    StoredDType(int bytes) {
        this.bytes = bytes;
    }

    int bytes() {
        return bytes;
    }

    static Optional<StoredDType> byName(String name) {
        for (StoredDType t : values()) {
            if (t.name().equals(name)) {
                return Optional.of(t);
            }
        }
        return Optional.empty();
    }
}
