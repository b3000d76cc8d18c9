package io.fsdp4j.backend;

import static io.fsdp4j.RandomArrays.gaussian;
import static io.fsdp4j.tensor.DType.F32;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fsdp4j.tensor.Tensor;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A linear's backward asked for no weight gradient (dWeight null: a frozen weight, as LoRA's base): the same input
 * gradient, bit for bit, as with one, and no weight-gradient product computed (counted by the backend).
 */
class FrozenWeightBackwardTest {

    @ParameterizedTest(name = "{0} rows, {1} in, {2} out, bias {3}, accumulate {4}")
    @CsvSource({"7,5,3,false,true", "33,24,40,true,true", "64,96,48,true,false", "1,8,300,false,false"})
    void noWeightGradientGivesTheSameInputGradientAndComputesNoProduct(int rows, int in, int out, boolean bias,
                                                                        boolean accumulate) {
        CpuBackend be = CpuBackend.counting();
        var rng = new SplittableRandom(rows * 31L + in);
        Tensor x = be.upload(gaussian(rng, rows * in, 1), rows, in);
        Tensor w = be.upload(gaussian(rng, out * in, 1), out, in);
        Tensor dOut = be.upload(gaussian(rng, rows * out, 1), rows, out);
        Tensor dxWith = be.allocate(F32, rows, in), dxWithout = be.allocate(F32, rows, in);
        Tensor dW = be.allocate(F32, out, in), dB = bias ? be.allocate(F32, out) : null;

        be.linearBackward(dxWith, dW, dB, dOut, x, w, accumulate);
        assertThat(be.weightGradients()).isEqualTo(1);
        be.linearBackward(dxWithout, null, null, dOut, x, w, accumulate);
        assertThat(be.weightGradients()).as("a frozen weight's backward computes no dW product").isEqualTo(1);
        assertThat(be.toFloats(dxWithout)).containsExactly(be.toFloats(dxWith));

        Tensor dxPlain = be.allocate(F32, rows, in); // the accumulating overload, too
        be.linearBackward(dxPlain, null, null, dOut, x, w);
        assertThat(be.weightGradients()).isEqualTo(1);
        assertThat(be.toFloats(dxPlain)).containsExactly(be.toFloats(dxWith));
    }

    @ParameterizedTest(name = "accumulate {0}")
    @CsvSource({"true", "false"})
    void aBiasGradientWithoutTheWeightsIsRefused(boolean accumulate) {
        Backend be = CpuBackend.INSTANCE;
        Tensor x = be.allocate(F32, 2, 3), w = be.allocate(F32, 4, 3), dOut = be.allocate(F32, 2, 4);
        assertThatThrownBy(() -> be.linearBackward(be.allocate(F32, 2, 3), null, be.allocate(F32, 4), dOut, x, w,
                accumulate)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bias gradient");
    }
}
