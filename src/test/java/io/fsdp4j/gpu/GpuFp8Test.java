package io.fsdp4j.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import io.fsdp4j.Golden;
import io.fsdp4j.backend.Fp8Casts;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Fp8Scaling;
import io.fsdp4j.tensor.Tensor;
import io.fsdp4j.train.GoldenTrainingTest;
import io.fsdp4j.train.TrainingJob;
import java.util.ArrayList;
import java.util.List;
import org.assertj.core.data.Percentage;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * fp8 on the GPU ({@code fsdp.param_dtype: fp8}, sm_89 and later): each of the three products of a linear on
 * cuBLASLt's fp8 kernels (operands cast by fp8.cu, amax and scale on the device) against the CPU backend's emulation
 * of the same casts, on bf16 inputs: the same fp8 codes, so only the order of the fp32 sums and the output's rounding
 * differ, far less than fp8 differs from bf16; the bf16 product within fp8's error; shapes that are not multiples of 16
 * on the bf16 product; and the golden runs in fp8 on the GPU beside bf16 and beside fp8 on CPU ranks.
 */
@Tag("gpu")
class GpuFp8Test extends CudaOpsFixture {
    GpuFp8Test() {
        super(26);
    }

    private static final Precision BF16 = Precision.BF16;

    private Tensor cpu(float[] v, int... shape) {
        return CPU.upload(v, shape);
    }

    private static float[] host(Tensor t) {
        return t.storage() instanceof io.fsdp4j.tensor.DeviceStorage ? gpu.toFloats(t) : CPU.toFloats(t);
    }

    private static double error(Tensor a, Tensor b) {
        return Golden.relativeError(host(a), host(b));
    }

    @ParameterizedTest(name = "{0} rows, {1} in, {2} out, {3}")
    @CsvSource({"128,256,384,TENSOR", "512,896,1152,TENSOR", "64,1024,16,TENSOR", "128,256,384,ROW",
            "512,896,1152,ROW", "64,1024,16,ROW"})
    void eachProductAgainstTheCpuEmulation(int n, int in, int out, Fp8Scaling scaling) {
        GpuTests.requireGpus(1);
        float[] x = randoms(n * in, 0, 3, BF16), w = randoms(out * in, 0, 0.05, BF16), b = randoms(out, 0, 1, BF16);
        float[] g = randoms(n * out, 0, 1e-3, BF16), dw0 = randoms(out * in, 0, 1e-3, Precision.FP32);
        float[] db0 = randoms(out, 0, 1e-3, Precision.FP32);
        // forward
        Tensor cOut = CPU.allocate(DType.F32, n, out), gOut = gpu.allocate(DType.BF16, n, out);
        CPU.fp8LinearForward(cOut, cpu(x, n, in), cpu(w, out, in), cpu(b, out), null, scaling);
        gpu.fp8LinearForward(gOut, onGpu(x, BF16, n, in), onGpu(w, BF16, out, in), onGpu(b, BF16, out), null, scaling);
        Tensor bf16Out = gpu.allocate(DType.BF16, n, out);
        gpu.linearForward(bf16Out, onGpu(x, BF16, n, in), onGpu(w, BF16, out, in), onGpu(b, BF16, out));
        double fp8VsBf16 = error(cOut, bf16Out);
        assertThat(error(gOut, cOut)).as("forward against the emulation").isLessThan(1e-2)
                .isLessThan(fp8VsBf16 / 4);
        assertThat(fp8VsBf16).as("fp8 against bf16").isBetween(1e-3, 0.06);
        // backward: dx, and dW and dBias accumulated onto what they held
        Tensor cDx = CPU.allocate(DType.F32, n, in), cDw = cpu(dw0, out, in), cDb = cpu(db0, out);
        CPU.fp8LinearBackward(cDx, cDw, cDb, cpu(g, n, out), cpu(x, n, in), cpu(w, out, in), true, null, scaling);
        Tensor gDx = gpu.allocate(DType.BF16, n, in), gDw = gpu.upload(dw0, out, in), gDb = gpu.upload(db0, out);
        gpu.fp8LinearBackward(gDx, gDw, gDb, onGpu(g, BF16, n, out), onGpu(x, BF16, n, in), onGpu(w, BF16, out, in),
                true, null, scaling);
        Tensor bDx = gpu.allocate(DType.BF16, n, in), bDw = gpu.upload(dw0, out, in), bDb = gpu.upload(db0, out);
        gpu.linearBackward(bDx, bDw, bDb, onGpu(g, BF16, n, out), onGpu(x, BF16, n, in), onGpu(w, BF16, out, in), true);
        assertThat(error(gDx, cDx)).as("dx against the emulation").isLessThan(1e-2).isLessThan(error(cDx, bDx) / 4);
        assertThat(error(gDw, cDw)).as("dW against the emulation").isLessThan(2e-3).isLessThan(error(cDw, bDw) / 4);
        assertThat(error(gDb, cDb)).as("dBias against the CPU's").isLessThan(1e-4);
        assertThat(error(cDx, bDx)).as("dx: fp8 against bf16").isBetween(1e-3, 0.15);
        // written, not accumulated: the same product without what dW held
        Tensor gDw0 = gpu.upload(randoms(out * in, 0, 1, Precision.FP32), out, in);
        gpu.fp8LinearBackward(null, gDw0, null, onGpu(g, BF16, n, out), onGpu(x, BF16, n, in), onGpu(w, BF16, out, in),
                false, null, scaling);
        float[] written = gpu.toFloats(gDw0), accumulated = gpu.toFloats(gDw);
        for (int i = 0; i < written.length; i++) {
            accumulated[i] -= dw0[i];
        }
        assertThat(Golden.relativeError(written, accumulated)).isLessThan(1e-5);
    }

    @Test
    void shapesNotOfSixteensRunTheBf16Product() {
        GpuTests.requireGpus(1);
        int n = 100, in = 64, out = 48;
        Tensor x = onGpu(randoms(n * in, 0, 1, BF16), BF16, n, in), w = onGpu(randoms(out * in, 0, 1, BF16), BF16, out, in);
        Tensor a = gpu.allocate(DType.BF16, n, out), b = gpu.allocate(DType.BF16, n, out);
        gpu.fp8LinearForward(a, x, w, null);
        gpu.linearForward(b, x, w, null);
        assertThat(gpu.toFloats(a)).containsExactly(gpu.toFloats(b));
    }

    /** An input not 16-byte aligned takes the one-element kernels: the same casts, the same product, to the bit. */
    @Test
    void anUnalignedInputCastsAsAnAlignedOne() {
        GpuTests.requireGpus(1);
        int n = 64, in = 128, out = 32;
        float[] x = randoms(n * in + 1, 0, 2, BF16), w = randoms(out * in, 0, 1, BF16);
        Tensor whole = onGpu(x, BF16, n * in + 1), unaligned = whole.view(1, n, in);
        Tensor aligned = onGpu(java.util.Arrays.copyOfRange(x, 1, n * in + 1), BF16, n, in);
        Tensor wg = onGpu(w, BF16, out, in);
        Tensor a = gpu.allocate(DType.BF16, n, out), b = gpu.allocate(DType.BF16, n, out);
        gpu.fp8LinearForward(a, unaligned, wg, null);
        gpu.fp8LinearForward(b, aligned, wg, null);
        assertThat(gpu.toFloats(a)).containsExactly(gpu.toFloats(b));
    }

    /**
     * The eight-wide amax on a tensor large enough for its four loads a thread (fp8_amax_bf16x8 on 1024 blocks of 256
     * threads takes four 16-byte loads at once while 3 x 262,144 vectors lie ahead, one at a time after): one element
     * a thousand times the others, in each of the four loads' ranges and in the last vector, sets the scale, and the
     * product is that of the one-element kernels (an unaligned input), to the bit. An amax that missed the element
     * would scale by another factor.
     */
    @Test
    void theEightWideAmaxFindsTheLargestElementInEveryLoadOfALargeTensor() {
        GpuTests.requireGpus(1);
        int n = 4160, in = 2048, out = 16; // 8,519,680 elements: 1,064,960 vectors of eight
        float[] base = randoms(n * in + 1, 0, 1, BF16);
        Tensor w = onGpu(randoms(out * in, 0, 1, BF16), BF16, out, in);
        long stride = 1024L * 256;
        for (long vector : new long[] {5, 5 + stride, 5 + 2 * stride, 5 + 3 * stride, n * (long) in / 8 - 1}) {
            float[] x = base.clone();
            x[1 + (int) (8 * vector + 3)] = 1000f; // element 3 of that vector of the aligned copy
            Tensor unaligned = onGpu(x, BF16, n * in + 1).view(1, n, in);
            Tensor aligned = onGpu(java.util.Arrays.copyOfRange(x, 1, n * in + 1), BF16, n, in);
            Tensor a = gpu.allocate(DType.BF16, n, out), b = gpu.allocate(DType.BF16, n, out);
            gpu.fp8LinearForward(a, unaligned, w, null);
            gpu.fp8LinearForward(b, aligned, w, null);
            assertSameBits(b, a, "out, the large element in vector " + vector);
        }
    }

    /**
     * The transposing casts of the backward on unaligned operands (the one-element kernels) and on aligned ones (the
     * 128 x 64 tiles, eight elements of four rows a thread): the same fp8 codes, so the same dx and dW to the bit.
     * Shapes not of 128s and 64s: the tiles at the edges are partial.
     */
    @Test
    void theTiledTransposingCastsAsTheOneElementKernel() {
        GpuTests.requireGpus(1);
        int n = 80, in = 208, out = 144;
        float[] x = randoms(n * in + 1, 0, 2, BF16), w = randoms(out * in + 1, 0, 0.05, BF16);
        float[] g = randoms(n * out + 1, 0, 1e-3, BF16);
        Tensor xu = onGpu(x, BF16, n * in + 1).view(1, n, in), wu = onGpu(w, BF16, out * in + 1).view(1, out, in);
        Tensor gu = onGpu(g, BF16, n * out + 1).view(1, n, out);
        Tensor xa = onGpu(java.util.Arrays.copyOfRange(x, 1, n * in + 1), BF16, n, in);
        Tensor wa = onGpu(java.util.Arrays.copyOfRange(w, 1, out * in + 1), BF16, out, in);
        Tensor ga = onGpu(java.util.Arrays.copyOfRange(g, 1, n * out + 1), BF16, n, out);
        Tensor dxU = gpu.allocate(DType.BF16, n, in), dwU = gpu.allocate(DType.F32, out, in);
        Tensor dxA = gpu.allocate(DType.BF16, n, in), dwA = gpu.allocate(DType.F32, out, in);
        gpu.fp8LinearBackward(dxU, dwU, null, gu, xu, wu, false);
        gpu.fp8LinearBackward(dxA, dwA, null, ga, xa, wa, false);
        assertSameBits(dxA, dxU, "dx");
        assertSameBits(dwA, dwU, "dW");
    }

    /**
     * A forward given a store ({@link Fp8Casts}: a forward recomputed for its backward) casts its weight and input
     * both ways at once and keeps them; the backward given the store takes them, casting only the output gradient
     * (three casts, not five), and every product gives the same bits as without a store. Under LoRA (no weight
     * gradient) the input is not cast transposed, and the backward's input gradient still takes the kept weight. Both
     * recipes: rowwise keeps each layout with its own scales (per output feature row-major, per input feature
     * transposed), and its numbers are not tensorwise's.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"TENSOR", "ROW"})
    void aStoreGivesTheBackwardTheForwardsCasts(Fp8Scaling scaling) {
        GpuTests.requireGpus(1);
        LinearCase c = randomLinear(80, 208, 144);
        Tensor x = c.x(), w = c.w(), b = c.b(), g = c.g();
        int n = c.n(), in = c.in(), out = c.out();
        Tensor[] plain = c.run(null, scaling);
        Tensor y = plain[0], dx = plain[1];
        Fp8Casts casts = new Fp8Casts(true);
        Tensor[] kept = c.run(casts, scaling);
        assertThat(casts.castsMade()).isEqualTo(3);
        assertThat(casts.castsReused()).isEqualTo(2);
        assertSameResults(kept, plain);
        // LoRA's frozen base: the input gradient alone, from the kept weight
        Fp8Casts frozen = new Fp8Casts(false);
        Tensor dxF = gpu.allocate(DType.BF16, n, in);
        gpu.fp8LinearForward(gpu.allocate(DType.BF16, n, out), x, w, b, frozen, scaling);
        gpu.fp8LinearBackward(dxF, null, null, g, x, w, false, frozen, scaling);
        assertThat(frozen.castsMade()).isEqualTo(3);
        assertThat(frozen.castsReused()).isEqualTo(1);
        assertSameBits(dxF, dx, "dx of a frozen weight");
        if (scaling == Fp8Scaling.ROW) { // and not tensorwise's numbers
            Tensor yT = gpu.allocate(DType.BF16, n, out);
            gpu.fp8LinearForward(yT, x, w, b);
            assertThat(java.util.Arrays.equals(gpu.toFloats(yT), gpu.toFloats(y))).isFalse();
        }
    }

    /**
     * A forward whose activations the backward reads as they are (a block not checkpointed) keeps only its input's
     * amax ({@link Fp8Casts#amaxesOnly}): the backward's transposed cast of the input takes it (one find, no amax pass),
     * and every product gives the same bits as without a store. Rowwise keeps nothing. Under LoRA (no weight gradient)
     * nothing is kept either: no product reads the input's transposed cast.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"TENSOR", "ROW"})
    void anAmaxStoreGivesTheBackwardTheForwardsInputAmax(Fp8Scaling scaling) {
        GpuTests.requireGpus(1);
        LinearCase c = randomLinear(80, 208, 144);
        Tensor x = c.x(), w = c.w(), b = c.b(), g = c.g();
        int n = c.n(), in = c.in(), out = c.out();
        Tensor[] plain = c.run(null, scaling);
        Tensor dx = plain[1];
        Fp8Casts amaxes = Fp8Casts.amaxesOnly(true);
        Tensor[] kept = c.run(amaxes, scaling);
        assertThat(amaxes.castsReused()).as("the backward took the input's amax").isEqualTo(
                scaling == Fp8Scaling.TENSOR ? 1 : 0);
        assertSameResults(kept, plain);
        Fp8Casts frozen = Fp8Casts.amaxesOnly(false);
        Tensor dxF = gpu.allocate(DType.BF16, n, in);
        gpu.fp8LinearForward(gpu.allocate(DType.BF16, n, out), x, w, b, frozen, scaling);
        gpu.fp8LinearBackward(dxF, null, null, g, x, w, false, frozen, scaling);
        assertThat(frozen.castsReused()).isZero();
        assertSameBits(dxF, dx, "dx of a frozen weight");
    }

    /**
     * SwiGLU's forward and backward, given an fp8 store, keep their output's amax there (computed in the same kernel);
     * the fp8 products that cast those outputs next take it instead of an amax pass: the down projection's forward its
     * input (hidden), the gate|up projection's backward its output gradient (dGateUp). The same bits as without: the
     * activations, and the products, whose scales come from the same amax. Values near 1e4 in one place show that the
     * kept amax is the whole tensor's.
     */
    @Test
    void swigluKeepsItsOutputsAmaxForTheNextCast() {
        GpuTests.requireGpus(1);
        int n = 64, f = 96, out = 48;
        float[] gu = randoms(n * 2 * f, 0, 2, BF16);
        gu[5 * 2 * f + f + 7] = 1e4f; // an up value far above the rest: hidden's amax is there
        Tensor gateUp = onGpu(gu, BF16, n, 2 * f), dHidden = onGpu(randoms(n * f, 0, 1e-3, BF16), BF16, n, f);
        Tensor wDown = onGpu(randoms(out * f, 0, 0.05, BF16), BF16, out, f);
        Tensor wGateUp = onGpu(randoms(2 * f * out, 0, 0.05, BF16), BF16, 2 * f, out);
        Tensor x = onGpu(randoms(n * out, 0, 1, BF16), BF16, n, out);
        Tensor hidden = gpu.allocate(DType.BF16, n, f), y = gpu.allocate(DType.BF16, n, out);
        Tensor dGateUp = gpu.allocate(DType.BF16, n, 2 * f), dx = gpu.allocate(DType.BF16, n, out);
        Tensor dw = gpu.allocate(DType.F32, 2 * f, out);
        gpu.swigluForward(hidden, gateUp);
        gpu.fp8LinearForward(y, hidden, wDown, null, null, Fp8Scaling.TENSOR);
        gpu.swigluBackward(dGateUp, dHidden, gateUp);
        gpu.fp8LinearBackward(dx, dw, null, dGateUp, x, wGateUp, false, null, Fp8Scaling.TENSOR);
        Fp8Casts amaxes = Fp8Casts.amaxesOnly(true);
        Tensor hiddenK = gpu.allocate(DType.BF16, n, f), yK = gpu.allocate(DType.BF16, n, out);
        Tensor dGateUpK = gpu.allocate(DType.BF16, n, 2 * f), dxK = gpu.allocate(DType.BF16, n, out);
        Tensor dwK = gpu.allocate(DType.F32, 2 * f, out);
        gpu.swigluForward(hiddenK, gateUp, amaxes);
        gpu.fp8LinearForward(yK, hiddenK, wDown, null, amaxes, Fp8Scaling.TENSOR);
        assertThat(amaxes.castsReused()).as("the down projection took hidden's amax").isEqualTo(1);
        gpu.swigluBackward(dGateUpK, dHidden, gateUp, amaxes);
        gpu.fp8LinearBackward(dxK, dwK, null, dGateUpK, x, wGateUp, false, amaxes, Fp8Scaling.TENSOR);
        assertThat(amaxes.castsReused()).as("and the gate|up backward dGateUp's").isEqualTo(2);
        assertSameBits(hiddenK, hidden, "hidden");
        assertSameBits(yK, y, "down's out");
        assertSameBits(dGateUpK, dGateUp, "dGateUp");
        assertSameBits(dxK, dx, "gate|up's dx");
        assertSameBits(dwK, dw, "gate|up's dW");
    }

    /**
     * The casts' amax slots are zeroed together once all have been handed out: products past the end of a round of
     * slots (1,100 forwards of two casts each here, a third of them of a larger input) give the same bits as the first:
     * a slot not zeroed again would keep a larger amax, a smaller scale, other bits.
     */
    @Test
    void castsPastARoundOfAmaxSlotsGiveTheSameBits() {
        GpuTests.requireGpus(1);
        int n = 16, in = 32, out = 16;
        Tensor big = onGpu(randoms(n * in, 0, 100, BF16), BF16, n, in);
        Tensor x = onGpu(randoms(n * in, 0, 1, BF16), BF16, n, in), w = onGpu(randoms(out * in, 0, 0.05, BF16), BF16,
                out, in);
        Tensor first = gpu.allocate(DType.BF16, n, out), y = gpu.allocate(DType.BF16, n, out);
        gpu.fp8LinearForward(first, x, w, null);
        float[] expected = gpu.toFloats(first);
        for (int i = 0; i < 1_100; i++) { // two casts a product; every third of a larger input (not a divisor of 512)
            gpu.fp8LinearForward(y, i % 3 == 0 ? big : x, w, null);
            if (i % 3 != 0) {
                assertThat(gpu.toFloats(y)).as("product %d", i).containsExactly(expected);
            }
        }
    }

    /** A linear's random operands: input x (n, in), weight w (out, in), bias b, output gradient g (n, out). */
    private record LinearCase(int n, int in, int out, Tensor x, Tensor w, Tensor b, Tensor g) {

        /**
         * The fp8 forward, then the backward given the same store (may be null), the weight as a view made again (the
         * same tensor to a store): out, dx, dW, dBias.
         */
        Tensor[] run(Fp8Casts casts, Fp8Scaling scaling) {
            Tensor y = gpu.allocate(DType.BF16, n, out), dx = gpu.allocate(DType.BF16, n, in);
            Tensor dw = gpu.allocate(DType.F32, out, in), db = gpu.allocate(DType.F32, out);
            gpu.fp8LinearForward(y, x, w, b, casts, scaling);
            gpu.fp8LinearBackward(dx, dw, db, g, x, w.view(0, out, in), false, casts, scaling);
            return new Tensor[] {y, dx, dw, db};
        }
    }

    /** A linear of random operands: inputs of magnitude up to 2, weights 0.05, biases 1, output gradients 1e-3. */
    private LinearCase randomLinear(int n, int in, int out) {
        return new LinearCase(n, in, out, onGpu(randoms(n * in, 0, 2, BF16), BF16, n, in),
                onGpu(randoms(out * in, 0, 0.05, BF16), BF16, out, in), onGpu(randoms(out, 0, 1, BF16), BF16, out),
                onGpu(randoms(n * out, 0, 1e-3, BF16), BF16, n, out));
    }

    /** {@link LinearCase#run}'s results equal to the bit. */
    private static void assertSameResults(Tensor[] actual, Tensor[] expected) {
        String[] names = {"out", "dx", "dW", "dBias"};
        for (int i = 0; i < names.length; i++) {
            assertSameBits(actual[i], expected[i], names[i]);
        }
    }

    /**
     * Rowwise, an input not 16-byte aligned takes the one-element kernels (a warp a row; 32 x 32 transposing tiles),
     * an aligned one the eight-wide ones (128 x 64 tiles): the same casts, so the same forward, input gradient and weight
     * gradient to the bit.
     */
    @Test
    void aRowwiseUnalignedInputCastsAsAnAlignedOne() {
        GpuTests.requireGpus(1);
        int n = 192, in = 320, out = 144;
        float[] x = randoms(n * in + 1, 0, 2, BF16), w = randoms(out * in, 0, 1, BF16);
        Tensor whole = onGpu(x, BF16, n * in + 1), unaligned = whole.view(1, n, in);
        Tensor aligned = onGpu(java.util.Arrays.copyOfRange(x, 1, n * in + 1), BF16, n, in);
        Tensor wg = onGpu(w, BF16, out, in), g = onGpu(randoms(n * out, 0, 1e-3, BF16), BF16, n, out);
        Tensor a = gpu.allocate(DType.BF16, n, out), b = gpu.allocate(DType.BF16, n, out);
        gpu.fp8LinearForward(a, unaligned, wg, null, null, Fp8Scaling.ROW);
        gpu.fp8LinearForward(b, aligned, wg, null, null, Fp8Scaling.ROW);
        assertSameBits(a, b, "out");
        Tensor dxA = gpu.allocate(DType.BF16, n, in), dxB = gpu.allocate(DType.BF16, n, in);
        Tensor dwA = gpu.allocate(DType.F32, out, in), dwB = gpu.allocate(DType.F32, out, in);
        gpu.fp8LinearBackward(dxA, dwA, null, g, unaligned, wg, false, null, Fp8Scaling.ROW);
        gpu.fp8LinearBackward(dxB, dwB, null, g, aligned, wg, false, null, Fp8Scaling.ROW);
        assertSameBits(dxA, dxB, "dx");
        assertSameBits(dwA, dwB, "dW");
    }

    /**
     * a and b element for element the same bits (a linear scan: AssertJ's containsExactly compares arrays in quadratic
     * time, minutes for a million elements).
     */
    private static void assertSameBits(Tensor a, Tensor b, String what) {
        float[] x = gpu.toFloats(a), y = gpu.toFloats(b);
        int at = java.util.Arrays.mismatch(x, y);
        assertThat(at).as("%s: the first element that differs (%s against %s)", what,
                at < 0 ? "" : x[at], at < 0 ? "" : y[at]).isEqualTo(-1);
    }

    private static List<String> sets(String device, String dtype, String... more) {
        List<String> sets = new ArrayList<>(GoldenTrainingTest.layout("full_shard", 1, 0, 1));
        sets.addAll(List.of("dist.device=" + device, "fsdp.param_dtype=" + dtype));
        sets.addAll(List.of(more));
        return sets;
    }

    /**
     * Ten golden steps in fp8 on the GPU (each recipe): within 1% of bf16 on the GPU, and of fp8 on a CPU rank (fp32
     * activations).
     */
    @ParameterizedTest(name = "{0}, {1}")
    @CsvSource({"qwen2,tensorwise", "bloom,tensorwise", "qwen2,rowwise", "bloom,rowwise"})
    void goldenStepsInFp8(String model, String recipe) {
        GpuTests.requireGpus(1);
        String fp8Recipe = "fsdp.fp8_recipe=" + recipe;
        TrainingJob.Result fp8 = GoldenTrainingTest.train(model, sets("cuda", "fp8", fp8Recipe));
        TrainingJob.Result bf16 = GoldenTrainingTest.train(model, sets("cuda", "bf16"));
        TrainingJob.Result cpuFp8 = GoldenTrainingTest.train(model, sets("cpu", "fp8", fp8Recipe));
        assertThat(fp8.devices()).doesNotStartWith("cpu");
        for (int s = 0; s < bf16.steps().size(); s++) {
            double loss = fp8.steps().get(s).loss();
            assertThat(loss).as("loss at step %d against bf16", s + 1)
                    .isCloseTo(bf16.steps().get(s).loss(), Percentage.withPercentage(1));
            assertThat(loss).as("loss at step %d against fp8 on the CPU", s + 1)
                    .isCloseTo(cpuFp8.steps().get(s).loss(), Percentage.withPercentage(1));
        }
        assertThat(fp8.steps().getFirst().loss()).isNotEqualTo(bf16.steps().getFirst().loss());
    }

    /**
     * The same ten steps with the stores' paths the 7B benchmark takes: a block left out of checkpointing (its
     * forward's input amaxes kept for its backward, SwiGLU's output amaxes from its kernels), the other recomputed
     * under full_keep_attention (its casts kept), and AdamW's kept bf16 copy (the weights' amaxes from AdamW's pass);
     * and the last block checkpointed selectively instead ({@code fsdp.blocks_selective}: its forward's amaxes kept,
     * its norms and SwiGLU recomputed). The numbers are those of the plain run, bit for bit: every cast takes the same amax of the same elements. Both
     * runs take fsdp4j's attention kernels, which sum in a fixed order: under {@code attention.kernel: auto} each job
     * times the engines at its first call of a shape, and at these tiny shapes the faster forward flips from job to
     * job (cuDNN's or fsdp4j's, 0.010 against 0.011 ms, H200), which alone moved step 1's loss by 0.07%.
     */
    @Test
    void goldenStepsInFp8WithEveryKeptAmax() {
        GpuTests.requireGpus(1);
        TrainingJob.Result plain = GoldenTrainingTest.train("qwen2", sets("cuda", "fp8", "attention.kernel=fsdp4j"));
        TrainingJob.Result kept = GoldenTrainingTest.train("qwen2", sets("cuda", "fp8", "attention.kernel=fsdp4j",
                "fsdp.activation_checkpointing=full_keep_attention", "fsdp.blocks_not_checkpointed=1",
                "fsdp.param_copy=kept"));
        TrainingJob.Result selective = GoldenTrainingTest.train("qwen2", sets("cuda", "fp8", "attention.kernel=fsdp4j",
                "fsdp.activation_checkpointing=full_keep_attention", "fsdp.blocks_selective=1",
                "fsdp.param_copy=kept"));
        for (int s = 0; s < plain.steps().size(); s++) {
            assertThat(kept.steps().get(s).loss()).as("loss at step %d", s + 1)
                    .isEqualTo(plain.steps().get(s).loss());
            assertThat(selective.steps().get(s).loss()).as("loss at step %d, the last block selective", s + 1)
                    .isEqualTo(plain.steps().get(s).loss());
        }
    }
}
