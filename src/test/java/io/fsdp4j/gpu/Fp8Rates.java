package io.fsdp4j.gpu;

import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.List;
import java.util.Locale;

/**
 * The linear layers' rates on this GPU in bf16 and in fp8 ({@code fsdp.param_dtype: fp8}), through {@link CudaBackend}
 * as a block calls them: the forward (out = x W^T) and the backward (dx and dW, accumulated) of each of Qwen2.5-7B's
 * four linears (q|k|v with its bias, o, gate|up, down) at N tokens (default 2048; arguments: other N), timed apart with
 * events. fp8's times include its casts (amax and scaled rounding of each operand on the device), so its rate over
 * bf16's is what a step gains on its block products. TFLOP/s: 2 N I O a forward, 4 N I O a backward.
 * A developer tool, run on the GPU machine: {@code bash tools/gpu/run.sh test-main io.fsdp4j.gpu.Fp8Rates [N ...]}.
 */
public final class Fp8Rates {
    private Fp8Rates() {}

    private record Linear(String name, int in, int out, boolean bias) {}

    public static void main(String[] args) {
        int[] tokens = args.length == 0 ? new int[] {2048} : java.util.Arrays.stream(args).mapToInt(Integer::parseInt)
                .toArray();
        List<Linear> linears = List.of(new Linear("qkv", 3584, 4608, true), new Linear("o", 3584, 3584, false),
                new Linear("gate_up", 3584, 37888, false), new Linear("down", 18944, 3584, false));
        try (CudaBackend gpu = new CudaBackend(0)) {
            System.out.printf(Locale.ROOT, "%s; Qwen2.5-7B's linears%n", Cuda.properties(0).name());
            System.out.printf(Locale.ROOT, "%6s %-8s %10s %10s %10s %10s %9s %9s%n", "N", "linear", "bf16 fwd",
                    "fp8 fwd", "bf16 bwd", "fp8 bwd", "fwd x", "bwd x");
            for (int n : tokens) {
                double[] total = new double[4];
                for (Linear l : linears) {
                    double[] ms = time(gpu, n, l);
                    double fwdFlops = 2.0 * n * l.in() * l.out();
                    for (int i = 0; i < 4; i++) {
                        total[i] += ms[i];
                    }
                    System.out.printf(Locale.ROOT, "%6d %-8s %7.3f ms %7.3f ms %7.3f ms %7.3f ms %8.2fx %8.2fx"
                                    + "   (TF/s: %.0f %.0f %.0f %.0f)%n", n, l.name(), ms[0], ms[1], ms[2], ms[3],
                            ms[0] / ms[1], ms[2] / ms[3], fwdFlops / ms[0] / 1e9, fwdFlops / ms[1] / 1e9,
                            2 * fwdFlops / ms[2] / 1e9, 2 * fwdFlops / ms[3] / 1e9);
                }
                System.out.printf(Locale.ROOT, "%6d %-8s %7.3f ms %7.3f ms %7.3f ms %7.3f ms %8.2fx %8.2fx%n", n,
                        "block", total[0], total[1], total[2], total[3], total[0] / total[1], total[2] / total[3]);
            }
        }
    }

    /** bf16 forward, fp8 forward, bf16 backward, fp8 backward of {@code l} over n rows, ms, after a warm-up of each. */
    private static double[] time(CudaBackend gpu, int n, Linear l) {
        try (var scope = gpu.newScope(); var entered = scope.enter()) {
            var random = new java.util.SplittableRandom(n + l.in());
            Tensor x = bf16(gpu, random, n, l.in()), w = bf16(gpu, random, l.out(), l.in());
            Tensor dOut = bf16(gpu, random, n, l.out());
            Tensor bias = l.bias() ? bf16(gpu, random, l.out()) : null, dBias = l.bias() ? gpu.allocate(DType.F32,
                    l.out()) : null;
            Tensor out = gpu.allocate(DType.BF16, n, l.out()), dx = gpu.allocate(DType.BF16, n, l.in());
            Tensor dW = gpu.allocate(DType.F32, l.out(), l.in());
            int reps = 10;
            return new double[] {
                GpuTests.millisPerCall(gpu, reps, () -> gpu.linearForward(out, x, w, bias)),
                GpuTests.millisPerCall(gpu, reps, () -> gpu.fp8LinearForward(out, x, w, bias)),
                GpuTests.millisPerCall(gpu, reps, () -> gpu.linearBackward(dx, dW, dBias, dOut, x, w, true)),
                GpuTests.millisPerCall(gpu, reps, () -> gpu.fp8LinearBackward(dx, dW, dBias, dOut, x, w, true))};
        }
    }

    /** A bf16 tensor of values uniform in [-1, 1). */
    private static Tensor bf16(CudaBackend gpu, java.util.SplittableRandom random, int... shape) {
        float[] v = new float[Math.toIntExact(Tensor.product(shape))];
        for (int i = 0; i < v.length; i++) {
            v[i] = (float) (random.nextDouble() * 2 - 1);
        }
        Tensor t = gpu.allocate(DType.BF16, shape);
        try (var scope = gpu.newScope(); var entered = scope.enter()) {
            gpu.copy(gpu.upload(v, shape), t);
        }
        return t;
    }
}
