package io.fsdp4j.tensor;

/**
 * NF4, 4-bit NormalFloat, exactly as bitsandbytes stores it ({@code quantize_4bit(quant_type="nf4", blocksize=64)},
 * its CUDA kernel kQuantizeBlockwise): values in blocks of {@link #BLOCK} consecutive elements; each block's absmax
 * (largest magnitude) kept in fp32; each value scaled by the reciprocal {@code 1f / absmax} (an fp32 multiply, not a
 * division) and mapped to the nearest of the 16 {@link #CODE} values by bitsandbytes' comparison tree
 * ({@link #code}: thresholds halfway between neighbouring codes, a value on a threshold taking the lower code, NaN,
 * as from an all-zero block, code 0); two codes a byte, the even element in the high nibble. Dequantized,
 * element = CODE[code] * absmax, an fp32 product (rounded once more to bf16 or fp16 where that is the output).
 *
 * <p>Here the bytes travel in {@code int}s (an {@link DType#I32} tensor), four a word, byte k of the stream in bits
 * 8 (k % 4) .. 8 (k % 4) + 7 of word k / 4: the bytes of bitsandbytes' uint8 tensor as a little-endian device holds
 * them. A block is 32 bytes, 8 words.
 */
public final class Nf4 {
    /** Elements sharing one absmax (bitsandbytes' blocksize 64, QLoRA's). */
    public static final int BLOCK = 64;
    /** Words of packed codes per block. */
    public static final int WORDS_PER_BLOCK = BLOCK / 8;

    /** bitsandbytes' NF4 code book (its nf4_dequantization_lut, get_4bit_type("nf4")), index = the 4-bit code. */
    static final float[] CODE = {
        -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
        -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
        0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
        0.7229568362236023f, 1.0f};

    private Nf4() {}

    /** The code book's value of a 4-bit code (0..15). */
    public static float value(int code) {
        return CODE[code];
    }

    /**
     * bitsandbytes' dQuantizeNF4: the code of a value scaled into [-1, 1], by its tree of comparisons against the
     * midpoints of neighbouring codes (as fp32 literals); each test is {@code x > t}, so NaN ends at code 0.
     */
    public static int code(float x) {
        if (x > 0.03979014977812767f) {
            if (x > 0.3893125355243683f) {
                if (x > 0.6427869200706482f) {
                    return x > 0.8614784181118011f ? 0b1111 : 0b1110;
                }
                return x > 0.5016634166240692f ? 0b1101 : 0b1100;
            }
            if (x > 0.2035212516784668f) {
                return x > 0.2920137718319893f ? 0b1011 : 0b1010;
            }
            return x > 0.1202552504837513f ? 0b1001 : 0b1000;
        }
        if (x > -0.33967943489551544f) {
            if (x > -0.13791173323988914f) {
                return x > -0.045525018125772476f ? 0b0111 : 0b0110;
            }
            return x > -0.23460740596055984f ? 0b0101 : 0b0100;
        }
        if (x > -0.6106329262256622f) {
            return x > -0.4599952697753906f ? 0b0011 : 0b0010;
        }
        return x > -0.8480964004993439f ? 0b0001 : 0b0000;
    }

    /**
     * Quantizes {@code blocks} blocks of {@code values} from {@code from}: their codes into {@code packed} from word
     * {@code packedAt} (8 words a block), their absmax into {@code absmax} from {@code absmaxAt}.
     */
    public static void quantize(float[] values, int from, int blocks, int[] packed, int packedAt, float[] absmax,
                                int absmaxAt) {
        for (int b = 0; b < blocks; b++) {
            int first = from + b * BLOCK;
            float max = 0f;
            for (int i = 0; i < BLOCK; i++) {
                max = Math.max(max, Math.abs(values[first + i]));
            }
            absmax[absmaxAt + b] = max;
            float scale = 1f / max; // as the kernel: a reciprocal, then products
            for (int w = 0; w < WORDS_PER_BLOCK; w++) {
                int word = 0;
                for (int k = 0; k < 4; k++) {
                    int e = first + 8 * w + 2 * k;
                    int pair = code(values[e] * scale) << 4 | code(values[e + 1] * scale);
                    word |= pair << (8 * k);
                }
                packed[packedAt + b * WORDS_PER_BLOCK + w] = word;
            }
        }
    }

    /** The 4-bit code of element {@code e} of a packed stream (the high nibble of its byte for an even e). */
    public static int codeAt(int[] packed, long e) {
        int word = packed[Math.toIntExact(e >>> 3)];
        int b = word >>> (8 * (int) ((e >>> 1) & 3)) & 0xff;
        return (e & 1) == 0 ? b >>> 4 : b & 0xf;
    }

    /**
     * out[outAt + i] = CODE[code of element i] * absmax[i / 64] (fp32), for the {@code count} elements of a packed
     * stream from its element 0 (count a multiple of 64).
     */
    public static void dequantize(int[] packed, float[] absmax, float[] out, int outAt, int count) {
        for (int i = 0; i < count; i++) {
            out[outAt + i] = CODE[codeAt(packed, i)] * absmax[i / BLOCK];
        }
    }

    /** values quantized and dequantized again: what a model computes with in place of them (fp32 products). */
    public static float[] roundTrip(float[] values) {
        if (values.length % BLOCK != 0) {
            throw new IllegalArgumentException(values.length + " values: not whole blocks of " + BLOCK);
        }
        int blocks = values.length / BLOCK;
        int[] packed = new int[blocks * WORDS_PER_BLOCK];
        float[] absmax = new float[blocks];
        quantize(values, 0, blocks, packed, 0, absmax, 0);
        float[] out = new float[values.length];
        dequantize(packed, absmax, out, 0, values.length);
        return out;
    }

    /** The packed stream as bitsandbytes' uint8 tensor holds it: byte k from word k / 4. */
    public static byte[] bytes(int[] packed) {
        byte[] result = new byte[packed.length * 4];
        for (int k = 0; k < result.length; k++) {
            result[k] = (byte) (packed[k / 4] >>> (8 * (k % 4)));
        }
        return result;
    }
}
