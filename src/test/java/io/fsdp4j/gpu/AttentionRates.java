package io.fsdp4j.gpu;

import io.fsdp4j.backend.AttentionShape;
import io.fsdp4j.backend.CudaBackend;
import io.fsdp4j.config.AttentionKernel;
import io.fsdp4j.cuda.Cuda;
import io.fsdp4j.cuda.Cudnn;
import io.fsdp4j.tensor.DType;
import io.fsdp4j.tensor.Tensor;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Attention's rates on this GPU, engine by engine ({@code attention.kernel}: fsdp4j's kernels and cuDNN's), through
 * {@link CudaBackend} as training calls it: forward and backward timed apart with events, B=1, causal, bf16, at the
 * Qwen2.5 presets' heads and the sequence lengths given (default 2048 4096 8192 16384). TFLOP/s by fsdp4j's convention
 * (docs/plan.md, tools/peers/attention_rates.py): causal forward 4 * NH * HS * (T + 1) / 2 per token, backward 2.5x.
 * A developer tool, run on the GPU machine: {@code bash tools/gpu/session.sh attention} (beside PyTorch's rates), or
 * with the test classpath {@code java --enable-native-access=ALL-UNNAMED -cp target/classes:target/test-classes:DEPS
 * io.fsdp4j.gpu.AttentionRates [T ...]}.
 */
public final class AttentionRates {
    private AttentionRates() {}

    private record Heads(String model, int heads, int kvHeads, int headDim) {}

    public static void main(String[] args) {
        List<Integer> lengths = new ArrayList<>();
        for (String a : args) {
            lengths.add(Integer.parseInt(a));
        }
        if (lengths.isEmpty()) {
            lengths.addAll(List.of(2048, 4096, 8192, 16384));
        }
        List<Heads> presets = List.of(new Heads("qwen2.5-7b", 28, 4, 128), new Heads("qwen2.5-1.5b", 12, 2, 128),
                new Heads("qwen2.5-0.5b", 14, 2, 64));
        try (CudaBackend gpu = new CudaBackend(0)) {
            System.out.printf(Locale.ROOT, "%s, cuDNN %s%n", Cuda.properties(0).name(),
                    Cudnn.found() ? Cudnn.versionString(Cudnn.version()) : "not found");
            System.out.printf(Locale.ROOT, "%-13s %6s  %-7s %10s %10s %9s %9s%n", "model", "T", "engine", "fwd ms",
                    "bwd ms", "fwd TF/s", "bwd TF/s");
            for (Heads h : presets) {
                for (int t : lengths) {
                    var s = new AttentionShape(1, t, h.heads(), h.kvHeads(), h.headDim(), 0);
                    for (AttentionKernel engine : List.of(AttentionKernel.FSDP4J, AttentionKernel.CUDNN)) {
                        if (engine == AttentionKernel.CUDNN && !Cudnn.found()) {
                            continue;
                        }
                        double[] ms = time(gpu, s, engine);
                        double flops = 4.0 * h.heads() * h.headDim() * (double) t * (t + 1) / 2;
                        System.out.printf(Locale.ROOT, "%-13s %6d  %-7s %10.3f %10.3f %9.0f %9.0f%n", h.model(), t,
                                engine, ms[0], ms[1], flops / ms[0] / 1e9, 2.5 * flops / ms[1] / 1e9);
                    }
                }
            }
        }
    }

    /** Forward and backward times of {@code s} on {@code engine}, ms, after a warm-up of each. */
    private static double[] time(CudaBackend gpu, AttentionShape s, AttentionKernel engine) {
        gpu.attention().use(engine);
        int n = s.batch() * s.seqLen(), ow = s.heads() * s.headDim();
        try (var scope = gpu.newScope(); var entered = scope.enter()) {
            float[] values = new float[n * s.qkvWidth()];
            var random = new java.util.SplittableRandom(1);
            for (int i = 0; i < values.length; i++) {
                values[i] = (float) (random.nextDouble() * 2 - 1);
            }
            Tensor qkv = gpu.allocate(DType.BF16, n, s.qkvWidth());
            gpu.copy(gpu.upload(values, n, s.qkvWidth()), qkv);
            Tensor out = gpu.allocate(DType.BF16, n, ow), lse = gpu.allocate(DType.F32, 1, s.heads(), s.seqLen());
            Tensor dQkv = gpu.allocate(DType.BF16, n, s.qkvWidth());
            int reps = s.seqLen() >= 8192 ? 5 : 20;
            double fwd = GpuTests.millisPerCall(gpu, reps, () -> gpu.attentionForward(out, lse, qkv, null, s));
            double bwd = GpuTests.millisPerCall(gpu, reps,
                    () -> gpu.attentionBackward(dQkv, out, qkv, out, lse, null, s));
            return new double[] {fwd, bwd};
        }
    }
}
