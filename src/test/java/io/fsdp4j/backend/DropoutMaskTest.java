package io.fsdp4j.backend;

import static io.fsdp4j.RandomArrays.gaussian;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import io.fsdp4j.tensor.Tensor;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The CPU backend's dropout and its counter-based mask ({@link DropoutMask}): the fraction dropped is p over a large
 * tensor, kept elements are scaled by 1 / (1 - p), the mask is a function of (seed, element index) only (a slice drawn
 * at its offset is the whole draw's slice: what makes ranks, micro-batches and recomputes agree), seeds differ.
 */
class DropoutMaskTest {
    private static final CpuBackend B = CpuBackend.INSTANCE;

    @ParameterizedTest(name = "p = {0}")
    @ValueSource(doubles = {0.05, 0.1, 0.5, 0.9})
    void dropsAFractionPAndScalesTheRest(double p) {
        int n = 1 << 21;
        float[] x = gaussian(new SplittableRandom(3), n, 1);
        Tensor out = B.allocate(io.fsdp4j.tensor.DType.F32, n);
        B.dropout(out, B.upload(x, n), p, DropoutMask.seed(7, 1, 0), 0);
        float[] o = B.toFloats(out);
        float scale = DropoutMask.scale(p);
        long dropped = 0;
        for (int i = 0; i < n; i++) {
            if (o[i] == 0f) {
                dropped++;
            } else {
                assertThat(o[i]).isEqualTo(x[i] * scale);
            }
        }
        // binomial: sd = sqrt(p (1-p) / n) < 3.5e-4; 5 sd
        assertThat((double) dropped / n).isCloseTo(p, within(1.8e-3));
    }

    @Test
    void theMaskIsAFunctionOfTheElementsIndexAlone() {
        int n = 10_000, first = 3_333, length = 4_000;
        float[] x = gaussian(new SplittableRandom(4), n, 1);
        long seed = DropoutMask.seed(1, 2, 3, 4);
        Tensor whole = B.allocate(io.fsdp4j.tensor.DType.F32, n);
        B.dropout(whole, B.upload(x, n), 0.3, seed, 0);
        Tensor part = B.allocate(io.fsdp4j.tensor.DType.F32, length);
        B.dropout(part, B.upload(Arrays.copyOfRange(x, first, first + length), length), 0.3, seed, first);
        assertThat(B.toFloats(part)).containsExactly(Arrays.copyOfRange(B.toFloats(whole), first, first + length));

        Tensor again = B.upload(x, n); // in place, and drawn again: the same
        B.dropout(again, again, 0.3, seed, 0);
        assertThat(B.toFloats(again)).containsExactly(B.toFloats(whole));
    }

    @Test
    void anotherSeedDrawsAnotherMask() {
        int n = 100_000, same = 0;
        long a = DropoutMask.seed(1, 2, 3, 4), b = DropoutMask.seed(1, 2, 3, 5), c = DropoutMask.seed(1, 3, 3, 4);
        assertThat(a).isNotEqualTo(b).isNotEqualTo(c);
        int threshold = DropoutMask.threshold(0.5);
        for (int i = 0; i < n; i++) {
            if (DropoutMask.keeps(a, i, threshold) == DropoutMask.keeps(b, i, threshold)) {
                same++;
            }
        }
        assertThat((double) same / n).isCloseTo(0.5, within(0.01)); // independent: agree half the time at p 0.5
    }

    @ParameterizedTest(name = "p = {0}")
    @ValueSource(doubles = {-0.1, 1.0, 1.5, Double.NaN})
    void aProbabilityOutsideZeroToOneIsRefused(double p) {
        Tensor x = B.allocate(io.fsdp4j.tensor.DType.F32, 4);
        assertThatThrownBy(() -> B.dropout(x, x, p, 1, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not in [0, 1)");
    }

    @Test
    void atPZeroEverythingIsKeptAsItIs() {
        float[] x = gaussian(new SplittableRandom(5), 1000, 1);
        Tensor out = B.allocate(io.fsdp4j.tensor.DType.F32, 1000);
        B.dropout(out, B.upload(x, 1000), 0, 9, 0);
        assertThat(B.toFloats(out)).containsExactly(x);
    }
}
