package io.fsdp4j.backend.cpu;

import static io.fsdp4j.RandomArrays.uniform;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * SwiGLU's vectorised rows against the scalar formulas value by value, bit for bit, at widths that leave a scalar
 * tail or none, with 1, 2 and 4 threads, its backward (and GeGLU's) also in place over gate|up as a block's backward
 * runs it; and against Math.exp's SwiGLU within float rounding. Attention's shifted
 * exponentials likewise, over runs that start and end anywhere.
 */
class CpuActivationsTest {
    @Test
    void swigluIsTheScalarFormulaBitForBit() {
        SplittableRandom r = new SplittableRandom(3);
        for (int f : new int[] {1, 5, 8, 16, 19, 352}) {
            int rows = 37;
            float[] gu = uniform(r, rows * 2 * f + 2, -12, 12), dy = uniform(r, rows * f + 1, -1, 1);
            float[] out = new float[rows * f], dOut = new float[rows * 2 * f];
            for (int i = 0; i < rows; i++) {
                for (int j = 0; j < f; j++) {
                    float gate = gu[2 + i * 2 * f + j], up = gu[2 + i * 2 * f + f + j], d = dy[1 + i * f + j];
                    out[i * f + j] = gate / (1f + Exp.exp(-gate)) * up;
                    float sig = 1f / (1f + Exp.exp(-gate));
                    dOut[i * 2 * f + j] = d * up * sig * (1f + gate * (1f - sig));
                    dOut[i * 2 * f + f + j] = d * (gate * sig);
                    double exact = gate / (1 + Math.exp(-gate)) * up;
                    assertThat((double) out[i * f + j]).isCloseTo(exact, org.assertj.core.data.Offset.offset(
                            1e-6 * Math.max(1, Math.abs(exact))));
                }
            }
            for (int cores : new int[] {1, 2, 4}) {
                float[] y = new float[rows * f], d = new float[rows * 2 * f];
                Parallel.withCores(cores, () -> {
                    CpuActivations.swigluForward(y, 0, gu, 2, rows, f);
                    CpuActivations.swigluBackward(d, 0, dy, 1, gu, 2, rows, f);
                });
                assertThat(y).as("forward f=%d, %d cores", f, cores).isEqualTo(out);
                assertThat(d).as("backward f=%d, %d cores", f, cores).isEqualTo(dOut);
                // in place, as a block's backward runs it: the gradient written over gate|up itself
                float[] inPlace = gu.clone();
                Parallel.withCores(cores, () -> CpuActivations.swigluBackward(inPlace, 2, dy, 1, inPlace, 2, rows, f));
                assertThat(java.util.Arrays.copyOfRange(inPlace, 2, 2 + rows * 2 * f))
                        .as("backward in place f=%d, %d cores", f, cores).isEqualTo(dOut);
                float[] gegluInPlace = gu.clone(), geglu = new float[rows * 2 * f];
                Parallel.withCores(cores, () -> {
                    CpuActivations.gegluBackward(geglu, 0, dy, 1, gu, 2, rows, f);
                    CpuActivations.gegluBackward(gegluInPlace, 2, dy, 1, gegluInPlace, 2, rows, f);
                });
                assertThat(java.util.Arrays.copyOfRange(gegluInPlace, 2, 2 + rows * 2 * f))
                        .as("GeGLU's backward in place f=%d, %d cores", f, cores).isEqualTo(geglu);
            }
        }
    }

    @Test
    void expShiftedIsTheScalarExpOfEachValue() {
        SplittableRandom r = new SplittableRandom(5);
        float[] a = uniform(r, 300, -30, 30);
        for (int from : new int[] {0, 1, 7, 100}) {
            for (int to : new int[] {from, from + 1, from + 9, from + 64, 300}) {
                float[] got = a.clone();
                CpuActivations.expShifted(got, from, to, 2.5f);
                for (int i = 0; i < a.length; i++) {
                    float expected = i >= from && i < to ? Exp.exp(a[i] - 2.5f) : a[i];
                    assertThat(Float.floatToRawIntBits(got[i])).as("[%d, %d) at %d", from, to, i)
                            .isEqualTo(Float.floatToRawIntBits(expected));
                }
            }
        }
    }
}
