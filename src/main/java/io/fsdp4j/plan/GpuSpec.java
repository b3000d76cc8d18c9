package io.fsdp4j.plan;

import io.fsdp4j.UserError;
import io.fsdp4j.model.Flops;

/**
 * One GPU model as the planner sees it: memory, the ceilings compute runs against, and the NVLink bus bandwidth of
 * its node's collectives. H200 figures were measured on the project's GPU machine
 * (/work/shared/notes/gpu-machine.md, 2026-11-21): bf16 GEMMs of Qwen2.5-7B's shapes at 2048 tokens ran at 695 to
 * 810 TFLOP/s (750 taken), device-to-device copies at 4.25 TB/s, and NCCL on 4 NVLink GPUs reached 315 / 325 / 353
 * GB/s bus bandwidth for all-gather / reduce-scatter / all-reduce. The H100 SXM is taken as the same chip with 80 GB
 * of HBM3 at 3.35 instead of 4.8 TB/s (copies scaled by that ratio) and the same NVLink.
 *
 * @param memoryBytes the device's memory
 * @param headroomBytes what is outside fsdp4j's caching allocator: CUDA context, cuBLASLt workspace, NCCL buffers
 * @param gemmFlops achieved dense bf16 matrix-product rate (the ceiling compute is calibrated against)
 * @param hbmBytesPerSecond achieved memory bandwidth (bytes read plus written per second)
 * @param peakFlops dense bf16 peak, the denominator of MFU
 */
public record GpuSpec(String name, long memoryBytes, long headroomBytes, double gemmFlops, double hbmBytesPerSecond,
                      double peakFlops, double allGatherBusBw, double reduceScatterBusBw, double allReduceBusBw) {
    private static final long MIB = 1L << 20, GIB = 1L << 30;

    public static GpuSpec h200() {
        return new GpuSpec("H200", 143_771 * MIB, 2 * GIB, 750e12, 4.25e12, Flops.HOPPER_BF16_PEAK,
                315e9, 325e9, 353e9);
    }

    public static GpuSpec h100() {
        return new GpuSpec("H100", 81_559 * MIB, 2 * GIB, 750e12, 4.25e12 * 3.35 / 4.8, Flops.HOPPER_BF16_PEAK,
                315e9, 325e9, 353e9);
    }

    public static GpuSpec of(String name) {
        return switch (name.toLowerCase(java.util.Locale.ROOT)) {
            case "h200" -> h200();
            case "h100" -> h100();
            default -> throw new UserError("unknown --gpu '" + name + "'; known: h200, h100");
        };
    }

    /**
     * A GPU as the device reports it ({@code name}, {@code totalMemory} bytes), for choices made at a run's start:
     * the H200's rates for an H200, else the H100's (the planner has no others: they only rank one configuration
     * against another there), with the device's own memory.
     */
    public static GpuSpec ofDevice(String name, long totalMemory) {
        GpuSpec rates = name.toUpperCase(java.util.Locale.ROOT).contains("H200") ? h200() : h100();
        return rates.withMemory(name, totalMemory);
    }

    /** The same rates and headroom, under another name with {@code memoryBytes} of memory. */
    public GpuSpec withMemory(String name, long memoryBytes) {
        return new GpuSpec(name, memoryBytes, headroomBytes, gemmFlops, hbmBytesPerSecond, peakFlops, allGatherBusBw,
                reduceScatterBusBw, allReduceBusBw);
    }

    /**
     * The fp8 matrix-product ceiling: twice {@link #gemmFlops}, as Hopper's dense fp8 peak is twice its bf16 peak
     * (1,979 against 989 TFLOP/s). Measured in a step (Qwen2.5-7B, one H200, seq 2048, docs/benchmarks.md of
     * 2026-11-26): the blocks' fp8 products ran at 1,150 to 1,550 TFLOP/s, the bf16 ones at 650 to 710.
     */
    public double fp8GemmFlops() {
        return 2 * gemmFlops;
    }

    /** What the caching allocator may reserve: the device's memory less the headroom. */
    public long usableBytes() {
        return memoryBytes - headroomBytes;
    }
}
