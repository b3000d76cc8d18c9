package io.fsdp4j.tensor;

/** Tensor storage in Java heap arrays, used by the CPU backend. */
public sealed interface HostStorage extends Storage {

    /** fp32 elements. */
    record F32(float[] data) implements HostStorage {
        @Override
        public long capacity() {
            return data.length;
        }
    }

    /** bf16 elements as their 16 raw bits. */
    record Bf16(short[] data) implements HostStorage {
        @Override
        public long capacity() {
            return data.length;
        }
    }

    /** IEEE fp16 elements as their 16 raw bits. */
    record F16(short[] data) implements HostStorage {
        @Override
        public long capacity() {
            return data.length;
        }
    }

    /** 32-bit integers (token ids, targets). */
    record I32(int[] data) implements HostStorage {
        @Override
        public long capacity() {
            return data.length;
        }
    }

    static HostStorage allocate(DType dtype, int elements) {
        return switch (dtype) {
            case F32 -> new F32(new float[elements]);
            case BF16 -> new Bf16(new short[elements]);
            case I32 -> new I32(new int[elements]);
            case F16 -> new F16(new short[elements]);
        };
    }
}
