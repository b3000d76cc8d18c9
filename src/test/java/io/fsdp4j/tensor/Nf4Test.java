package io.fsdp4j.tensor;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.CpuBackend;
import io.fsdp4j.safetensors.SafetensorsFile;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * NF4 bit for bit as bitsandbytes stores it (tools/golden/make_golden_qlora.py: its published algorithm, as
 * bitsandbytes does not install here): the packed codes, the absmax and the dequantized values of an fp32 weight (with
 * an all-zero block, a lone non-zero, values on and beside every threshold at absmax 1 and 3) and of a bf16-valued
 * one, from {@link Nf4#quantize} and from the CPU backend's dequantization in fp32 and bf16.
 */
class Nf4Test {
    static final Path FIXTURE = Golden.dir("qwen2").resolveSibling("nf4").resolve("nf4.safetensors");

    @ParameterizedTest(name = "weight{0}")
    @ValueSource(strings = {"", "_hf"})
    void quantizesAsBitsandbytes(String suffix) {
        try (SafetensorsFile f = SafetensorsFile.open(FIXTURE)) {
            float[] weight = f.readFloats("weight" + suffix);
            int blocks = weight.length / Nf4.BLOCK;
            int[] packed = new int[blocks * Nf4.WORDS_PER_BLOCK];
            float[] absmax = new float[blocks];
            Nf4.quantize(weight, 0, blocks, packed, 0, absmax, 0);
            assertThat(Nf4.bytes(packed)).as("codes").isEqualTo(bytes(f.raw("codes" + suffix)));
            assertThat(absmax).as("absmax").isEqualTo(f.readFloats("absmax" + suffix));
            float[] want = f.readFloats("dequantized" + suffix);
            float[] got = new float[weight.length];
            Nf4.dequantize(packed, absmax, got, 0, got.length);
            assertBits(got, want, "dequantized");
            assertBits(Nf4.roundTrip(weight), want, "round trip");
        }
    }

    @ParameterizedTest(name = "weight{0}")
    @ValueSource(strings = {"", "_hf"})
    void theCpuBackendDequantizesInFp32AndBf16(String suffix) {
        CpuBackend be = CpuBackend.INSTANCE;
        try (SafetensorsFile f = SafetensorsFile.open(FIXTURE)) {
            byte[] codes = bytes(f.raw("codes" + suffix));
            int[] words = new int[codes.length / 4];
            for (int k = 0; k < codes.length; k++) {
                words[k / 4] |= (codes[k] & 0xff) << (8 * (k % 4));
            }
            float[] absmax = f.readFloats("absmax" + suffix);
            int n = codes.length * 2;
            Tensor c = be.uploadInts(words, words.length), a = be.upload(absmax, absmax.length);
            Tensor fp32 = be.allocate(DType.F32, n), bf16 = be.allocate(DType.BF16, n);
            be.dequantizeNf4(fp32, c, a);
            be.dequantizeNf4(bf16, c, a);
            assertBits(be.toFloats(fp32), f.readFloats("dequantized" + suffix), "fp32");
            assertBits(be.toFloats(bf16), f.readFloats("dequantized_bf16" + suffix), "bf16");
            // a view: the second half of the codes and absmax into the second half of the output
            Tensor half = be.allocate(DType.F32, n);
            be.dequantizeNf4(half.view(n / 2, n / 2), c.view(words.length / 2, words.length / 2),
                    a.view(absmax.length / 2, absmax.length / 2));
            float[] tail = java.util.Arrays.copyOfRange(be.toFloats(half), n / 2, n);
            float[] wantTail = java.util.Arrays.copyOfRange(f.readFloats("dequantized" + suffix), n / 2, n);
            assertBits(tail, wantTail, "view");
        }
    }

    /** The same bits (-0.0 from an all-zero block included). */
    private static void assertBits(float[] got, float[] want, String what) {
        assertThat(got).as(what).hasSameSizeAs(want);
        for (int i = 0; i < want.length; i++) {
            assertThat(Float.floatToRawIntBits(got[i])).as("%s[%d]: %s vs %s", what, i, got[i], want[i])
                    .isEqualTo(Float.floatToRawIntBits(want[i]));
        }
    }

    private static byte[] bytes(MemorySegment raw) {
        return raw.toArray(ValueLayout.JAVA_BYTE);
    }
}
