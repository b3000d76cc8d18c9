package io.fsdp4j.backend.cpu;

import static io.fsdp4j.RandomArrays.uniform;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Both register tiles against their definition, whichever of them {@link CpuMatmul} uses on this machine (4 rows
 * with 256-bit vectors, 8 with 512-bit ones): each element of C is the chain c = fma(a_k, b_k, c) over the packed
 * panels' k in order, from C's value ({@code tile}) or from the bias or zero ({@code tileFrom}), bit for bit, with C
 * a row stride apart and nothing outside the tile written.
 */
class VectorMatmulTest {
    @Test
    void bothTilesAreTheFmaChains() {
        SplittableRandom random = new SplittableRandom(11);
        int width = VectorMatmul.width(), ldc = width + 5, co = 3;
        for (int rows : new int[] {4, 8}) {
            for (int kc : new int[] {1, 2, 7, 64}) {
                float[] pa = uniform(random, 2 + kc * rows), pb = uniform(random, 1 + kc * width);
                float[] start = uniform(random, co + rows * ldc + 2), bias = uniform(random, width + 4);
                for (int variant = 0; variant < 3; variant++) { // from C, from the bias, from zero
                    boolean fromC = variant == 0;
                    float[] b = variant == 1 ? bias : null;
                    float[] expected = start.clone();
                    for (int r = 0; r < rows; r++) {
                        for (int j = 0; j < width; j++) {
                            int at = co + r * ldc + j;
                            float acc = fromC ? start[at] : b == null ? 0f : b[4 + j];
                            for (int k = 0; k < kc; k++) {
                                acc = Math.fma(pa[2 + k * rows + r], pb[1 + k * width + j], acc);
                            }
                            expected[at] = acc;
                        }
                    }
                    float[] c = start.clone();
                    if (rows == 4 && fromC) {
                        VectorMatmul.tile(kc, pa, 2, pb, 1, c, co, ldc);
                    } else if (rows == 4) {
                        VectorMatmul.tileFrom(kc, pa, 2, pb, 1, c, co, ldc, b, 4);
                    } else if (fromC) {
                        VectorMatmul.tile8(kc, pa, 2, pb, 1, c, co, ldc);
                    } else {
                        VectorMatmul.tileFrom8(kc, pa, 2, pb, 1, c, co, ldc, b, 4);
                    }
                    assertThat(c).as("%d rows, kc %d, variant %d", rows, kc, variant).isEqualTo(expected);
                }
            }
        }
    }
}
