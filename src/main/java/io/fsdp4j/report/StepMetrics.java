package io.fsdp4j.report;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One optimizer step as reported: the record of the metrics JSONL ({@code log.metrics}), of the terminal line and
 * of the Prometheus gauges. Keys and meanings are in {@code docs/metrics.md}.
 *
 * @param step            optimizer step, 1-based (continues after a resume)
 * @param loss            token-weighted mean loss over the global batch
 * @param gradNorm        global gradient norm before clipping
 * @param lr              learning rate the update used
 * @param tokens          input tokens in the global batch
 * @param lossTokens      positions of the global batch that carried a loss
 * @param stepSeconds     wall time of the step on rank 0
 * @param tokPerSec       {@code tokens / stepSeconds}
 * @param tokPerSecPerGpu {@code tokPerSec} divided by the world size (per rank on CPU)
 * @param mfu             model FLOPs utilisation in [0, 1]; NaN where no peak rate is defined (CPU ranks)
 * @param peakReservedGib peak memory so far, GiB (CPU: JVM heap in use; CUDA: reserved device memory)
 * @param gpu             whether the ranks are GPUs. Every record has the interface's keys ({@code tok_s_gpu}, {@code mfu},
 *                        {@code peak_reserved_gib}); on CPU ranks {@code mfu} is null and the record also names the
 *                        rate and memory as what they are there: {@code tok_s_rank}, {@code peak_heap_gib}
 */
public record StepMetrics(int step, double loss, double gradNorm, double lr, long tokens, long lossTokens,
                          double stepSeconds, double tokPerSec, double tokPerSecPerGpu, double mfu,
                          double peakReservedGib, boolean gpu) {
    private static final double GIB = 1024.0 * 1024 * 1024;

    /**
     * Derives the rates from the step's tokens and time and the devices that computed them (the world size; one when
     * the ranks share a GPU).
     */
    public static StepMetrics of(int step, double loss, double gradNorm, double lr, long tokens, long lossTokens,
                                 double stepSeconds, int devices, double mfu, double peakReservedGib) {
        return of(step, loss, gradNorm, lr, tokens, lossTokens, stepSeconds, devices, mfu, peakReservedGib, true);
    }

    /** {@link #of} on GPUs ({@code gpu}) or CPU ranks. */
    public static StepMetrics of(int step, double loss, double gradNorm, double lr, long tokens, long lossTokens,
                                 double stepSeconds, int devices, double mfu, double peakMemoryGib, boolean gpu) {
        double tokPerSec = tokens / stepSeconds;
        return new StepMetrics(step, loss, gradNorm, lr, tokens, lossTokens, stepSeconds, tokPerSec,
                tokPerSec / devices, mfu, peakMemoryGib, gpu);
    }

    /** Peak memory in bytes, as the Prometheus gauge reports it. */
    public long peakMemoryBytes() {
        return Math.round(peakReservedGib * GIB);
    }

    /**
     * The metrics JSONL record, keys in their documented order; an undefined {@code mfu} is {@code null}. The per-GPU
     * keys only with GPUs ({@link #gpu}).
     */
    public Map<String, Object> toMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("step", step);
        m.put("loss", loss);
        m.put("grad_norm", gradNorm);
        m.put("lr", lr);
        m.put("tokens", tokens);
        m.put("loss_tokens", lossTokens);
        m.put("step_s", stepSeconds);
        m.put("tok_s", tokPerSec);
        // the keys the interface promises on every line (shared notes, cli.md); on CPU ranks a rank stands for the
        // device, no peak rate is defined (mfu null) and the memory is the JVM heap in use
        m.put("tok_s_gpu", tokPerSecPerGpu);
        m.put("mfu", Double.isNaN(mfu) || !gpu ? null : mfu);
        m.put("peak_reserved_gib", peakReservedGib);
        if (!gpu) { // and the same, named as what they are
            m.put("tok_s_rank", tokPerSecPerGpu);
            m.put("peak_heap_gib", peakReservedGib);
        }
        return m;
    }
}
