package io.fsdp4j.plan;

import io.fsdp4j.UserError;
import io.fsdp4j.config.ActivationCheckpointing;
import io.fsdp4j.config.FsdpSection;
import io.fsdp4j.config.Precision;

/**
 * What each GPU computes per optimizer step: {@code batch} sequences of {@code seq} tokens (one micro-batch), with
 * parameters gathered in {@code paramDtype} (activations are computed in it too) and gradients reduced in
 * {@code reduceDtype}; with {@code cpuOffload} ({@code fsdp.cpu_offload}) the fp32 master and gradient shards and
 * the AdamW moments live in host memory and AdamW runs on the host; {@code prefetch} ({@code fsdp.prefetch}) is how
 * many units ahead of the computing one have their all-gather started.
 */
public record Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                       Precision reduceDtype, boolean cpuOffload, int prefetch) {

    public Workload {
        if (seq < 1 || batch < 1) {
            throw new UserError("--seq and --batch must be at least 1");
        }
        if (prefetch < 0 || prefetch > FsdpSection.MAX_PREFETCH) {
            throw new UserError("--prefetch must be between 0 and " + FsdpSection.MAX_PREFETCH);
        }
    }

    public Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                    Precision reduceDtype, boolean cpuOffload) {
        this(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, FsdpSection.DEFAULT_PREFETCH);
    }

    public Workload(int seq, int batch, ActivationCheckpointing checkpointing, Precision paramDtype,
                    Precision reduceDtype) {
        this(seq, batch, checkpointing, paramDtype, reduceDtype, false);
    }

    /** The benchmark's settings: seq 2048, batch 1, full checkpointing, bf16 parameters, fp32 reduction. */
    public static Workload benchmark() {
        return new Workload(2048, 1, ActivationCheckpointing.FULL, Precision.BF16, Precision.FP32);
    }

    public Workload withCheckpointing(ActivationCheckpointing mode) {
        return new Workload(seq, batch, mode, paramDtype, reduceDtype, cpuOffload, prefetch);
    }

    public Workload withCpuOffload(boolean offload) {
        return new Workload(seq, batch, checkpointing, paramDtype, reduceDtype, offload, prefetch);
    }

    public Workload withSeq(int tokens) {
        return new Workload(tokens, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, prefetch);
    }

    public Workload withPrefetch(int depth) {
        return new Workload(seq, batch, checkpointing, paramDtype, reduceDtype, cpuOffload, depth);
    }

    /** N, the rows (tokens) of one micro-batch on one GPU. */
    public long tokens() {
        return (long) seq * batch;
    }

    /** Bytes of one element of gathered parameters and of activations. */
    public int paramBytes() {
        return bytes(paramDtype);
    }

    /** Bytes of one element of a gradient reduction. */
    public int reduceBytes() {
        return bytes(reduceDtype);
    }

    static int bytes(Precision p) {
        return p.dtype().bytes();
    }

    /** Full checkpointing: every block's forward is recomputed in its backward. */
    public boolean recompute() {
        return checkpointing == ActivationCheckpointing.FULL;
    }

    /** Selective checkpointing: a block's norms and MLP activation are recomputed in its backward. */
    public boolean selective() {
        return checkpointing == ActivationCheckpointing.SELECTIVE;
    }
}
