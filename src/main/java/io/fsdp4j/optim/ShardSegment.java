package io.fsdp4j.optim;

import io.fsdp4j.model.ParamSpec;

/**
 * The part of one parameter that falls in a rank's shard of a unit.
 *
 * @param param the parameter
 * @param shardOffset first element in the shard
 * @param length elements
 */
public record ShardSegment(ParamSpec param, int shardOffset, int length) {
}
