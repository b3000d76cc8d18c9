package io.fsdp4j.tensor;

/** Element types of tensors that fsdp4j computes with or stores. */
public enum DType {
    F32(4, "F32"),
    BF16(2, "BF16"),
    F16(2, "F16"),
    I32(4, "I32");

    private final int bytes;
    private final String safetensorsName;

    DType(int bytes, String safetensorsName) {
        this.bytes = bytes;
        this.safetensorsName = safetensorsName;
    }

    public int bytes() {
        return bytes;
    }

    /** The dtype's name in a safetensors header. */
    public String safetensorsName() {
        return safetensorsName;
    }

    public boolean isFloat() {
        return this != I32;
    }
}
