package io.fsdp4j.train;

import io.fsdp4j.UserError;
import io.fsdp4j.config.TrainConfig;
import io.fsdp4j.model.ModelConfig;
import io.fsdp4j.model.UnitLayout;
import io.fsdp4j.report.HeapMemory;
import java.util.List;
import java.util.Locale;

/**
 * The Java heap a job on CPU ranks needs at the least, checked before its first step: every rank of the process
 * keeps its shard of the fp32 weights, gradients and AdamW moments on the heap (16 bytes a parameter over all
 * ranks), and each rank gathers whole units and holds its batch's logits. A heap below that is refused in one line
 * that says what to set, rather than failing mid-step.
 */
final class HeapBudget {
    /** fp32 master weights, gradients and the two AdamW moments. */
    static final int BYTES_PER_PARAMETER = 16;

    private HeapBudget() {}

    /** The heap bytes a job of {@code ranks} CPU ranks of this process needs at the least. */
    static long neededBytes(TrainConfig config, ModelConfig model, List<UnitLayout> layout, int ranks) {
        long params = layout.stream().mapToLong(UnitLayout::numel).sum();
        long largestUnit = layout.stream().mapToLong(UnitLayout::numel).max().orElse(0);
        long gathered = (1L + config.fsdp().prefetch()) * largestUnit * Float.BYTES;
        long logits = 2L * config.train().batchSize() * config.data().seqLen() * model.vocabSize() * Float.BYTES;
        return params * BYTES_PER_PARAMETER + ranks * (gathered + logits);
    }

    /** Refuses a job on CPU ranks whose heap is too small for {@link #neededBytes}; nothing on GPUs. */
    static void require(TrainConfig config, ModelConfig model, List<UnitLayout> layout) {
        if (JobSetup.onCuda(config)) {
            return;
        }
        int ranks = config.dist().ranks();
        long params = layout.stream().mapToLong(UnitLayout::numel).sum();
        String message = HeapMemory.tooSmallFor(neededBytes(config, model, layout, ranks), String.format(Locale.ROOT,
                "%,d parameters x %d bytes of fp32 weights, gradients and AdamW moments, and what %d CPU rank(s)"
                        + " gather and compute", params, BYTES_PER_PARAMETER, ranks));
        if (message != null) {
            throw new UserError(message);
        }
    }
}
