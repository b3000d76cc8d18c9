package io.fsdp4j.model;

/**
 * Where initial parameter values come from (random initialisation, a Hugging Face checkpoint, a sharded
 * checkpoint): a reader of any element range of a unit's flat buffer, so that each rank reads only its shard.
 */
public interface ParamSource {

    /** dst[dstOffset .. dstOffset+count) = elements [start, start+count) of unit {@code unit}'s flat buffer. */
    void read(int unit, long start, float[] dst, int dstOffset, int count);
}
