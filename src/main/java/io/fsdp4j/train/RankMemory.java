package io.fsdp4j.train;

/** Bytes one rank holds for the whole job: its shards of parameters, gradients and optimizer state. */
public record RankMemory(int rank, long paramBytes, long gradBytes, long optimizerBytes) {
    public long total() {
        return paramBytes + gradBytes + optimizerBytes;
    }
}
