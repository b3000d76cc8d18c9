package io.fsdp4j.backend;

/**
 * Where one parameter's AdamW update applies in a flat shard: elements {@code [offset, offset + length)}, with the
 * weight decay or without it. A unit's segments are updated together ({@link Backend#adamw(Tensor, Tensor, Tensor,
 * Tensor, java.util.List, float, float, float, float, float, long, float)}): one kernel a unit on the GPU.
 */
public record AdamWSegment(int offset, int length, boolean decays) {
    public AdamWSegment {
        if (offset < 0 || length < 0) {
            throw new IllegalArgumentException("segment at " + offset + " of " + length + " elements");
        }
    }
}
